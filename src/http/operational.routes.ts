// Liveness, readiness and the API description: no authentication, no business logic.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Type, type Static } from 'typebox';
import { pingDatabase, type DatabaseHandle } from '../db/database.ts';
import { AppError } from '../foundations/errors.ts';
import { ErrorEnvelope, errorResponses } from './envelope.schemas.ts';
import { UNAVAILABLE_RETRY_AFTER_SECONDS, errorBody, storageUnavailable } from './error-handler.ts';
import { storageFault } from '../db/errors.ts';
import { SERVICE_VERSION } from '../foundations/version.ts';

const READY_TIMEOUT_MS = 2000;
const Health = Type.Object(
  {
    success: Type.Literal(1),
    status: Type.String({ examples: ['ok'] }),
    version: Type.String({ description: 'The release this instance runs (docs/operations.md, "Releases").', examples: ['0.2.0'] }),
  },
  { title: 'Health' },
);
const ReplicaReadinessView = Type.Object(
  {
    mode: Type.Union([Type.Literal('fallback'), Type.Literal('replica')], { description: 'UGS_DATABASE_READ_FROM.' }),
    in_use: Type.Boolean({ description: 'Whether page views may read the replica at all: false without Redis (REDIS_URL), which holds the write positions.' }),
    reachable: Type.Boolean({ description: 'The replica answered a check.' }),
    standby: Type.Optional(Type.Boolean({ description: 'Still in recovery (false once it was promoted).' })),
    lag_seconds: Type.Optional(
      Type.Number({ description: 'The age of the oldest commit it received and has not replayed; 0 when it replayed all it received.' }),
    ),
    max_lag_seconds: Type.Number({ description: 'UGS_DATABASE_READ_MAX_LAG_MS in seconds: a replica lagging more serves nothing.' }),
    replay_lsn: Type.Optional(Type.String({ description: 'Its replay position (pg_last_wal_replay_lsn).', examples: ['0/3000148'] })),
  },
  { description: 'With UGS_DATABASE_READ_URL only: what the replica can serve (docs/api.md, "Reads from replicas").' },
);
/** What the instance can do with its database now (docs/operations.md, "Probes"). */
const DatabaseReadiness = Type.Object(
  {
    primary: Type.Union([Type.Literal('reachable'), Type.Literal('unreachable')], {
      description:
        'Whether the database the service writes to answers: `unreachable` while a connection to it fails (PostgreSQL: the breaker is open, and requests that need it answer 503 at once; docs/operations.md, "When the primary cannot be reached").',
    }),
    writable: Type.Boolean({ description: 'Whether it takes writes now: false while it is unreachable or read-only (a standby, in recovery, failing over).' }),
  },
  { title: 'DatabaseReadiness' },
);
type DatabaseState = Static<typeof DatabaseReadiness>;
const Readiness = Type.Object(
  { success: Type.Literal(1), status: Type.String({ examples: ['ready'] }), database: DatabaseReadiness, replica: Type.Optional(ReplicaReadinessView) },
  { title: 'Readiness' },
);
/** The error envelope of a 503, with what the instance found of its database. */
const NotReady = Type.Object(
  { ...ErrorEnvelope.properties, database: Type.Optional(DatabaseReadiness), replica: Type.Optional(ReplicaReadinessView) },
  {
    title: 'NotReady',
    description: 'The error envelope, with what the instance found of its database.',
  },
);

const curl = (source: string) => [{ lang: 'Shell', label: 'curl', source }];
export const operationalCodeSamples = {
  health: curl('curl "$UGS/healthz"'),
  ready: curl('curl "$UGS/readyz"'),
  metrics: curl('curl "$UGS/metrics"'),
};

/** The workers of an instance (UGS_WORKERS above 1), as /readyz sees them. */
export interface WorkersReadiness {
  /** Whether every worker of the instance serves: false while one starts, or after one died until its replacement serves. */
  everyWorkerServes(): boolean;
}

export function registerOperationalRoutes(app: FastifyInstance, database: DatabaseHandle, workers?: WorkersReadiness): void {
  app.get(
    '/healthz',
    {
      schema: {
        tags: ['Operations'],
        operationId: 'health',
        summary: 'The process is alive',
        description: 'Answers 200 while the process runs, with the release it runs; needs no token.',
        response: { 200: { ...Health, 'x-response-description': 'The process is alive.' }, ...errorResponses() },
      },
    },
    async () => ({ success: 1, status: 'ok', version: SERVICE_VERSION }),
  );

  const readinessErrors = errorResponses('unavailable', 'storage_unavailable') as Record<number, Record<string, unknown>>;
  readinessErrors[503] = { ...readinessErrors[503], ...NotReady };
  app.get(
    '/readyz',
    {
      schema: {
        tags: ['Operations'],
        operationId: 'ready',
        summary: 'The database is reachable and takes writes',
        description:
          "Answers 200 when the database answers within 2 s, holds the service's tables and takes writes (and, with several workers, when every worker serves), else 503 `unavailable`; 503 `storage_unavailable` when its data is out of reach (the database or its tables are gone, or the SQLite database file was deleted or replaced while the service ran). `database` says what was found: whether the primary is reachable and whether it takes writes. While the primary is known unreachable it answers at once, without trying a connection. Needs no token.",
        response: { 200: { ...Readiness, 'x-response-description': 'The database answers and takes writes.' }, ...readinessErrors },
      },
    },
    async (request, reply) => {
      // A deleted or replaced SQLite file still answers a ping (the process holds it open), but
      // nothing written there would survive: not ready (docs/operations.md).
      if (database.fileProblem?.()) throw storageUnavailable('file_gone');
      // An instance of several workers is ready when all of them serve, not when this one does
      // (docs/operations.md, "Workers").
      if (workers && !workers.everyWorkerServes())
        throw new AppError('unavailable', 'not every worker of this instance serves yet: one is starting', {
          headers: { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS) },
        });
      // Asked beside the primary's ping (within the same 2 s: read-routing.ts); it never fails.
      const replica = database.replicaReadiness?.();
      const notReady = async (message: string, state: DatabaseState) => {
        const replicaState = await replica;
        const serving = replicaState?.in_use && replicaState.reachable ? ': page views are served from the replica' : '';
        const error = new AppError('unavailable', `${message}${serving}`, { headers: { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS) } });
        return (reply as FastifyReply)
          .code(503)
          .headers(error.headers ?? {})
          .type('application/json; charset=utf-8')
          .send({ ...errorBody(error, request.id), database: state, ...(replicaState ? { replica: replicaState } : {}) });
      };
      // Known unreachable (the pool's breaker is open): said at once, no connection tried.
      if (database.primaryStatus?.() === 'unreachable') return notReady('the database is not reachable', { primary: 'unreachable', writable: false });
      let timer: NodeJS.Timeout | undefined;
      let writable: boolean;
      try {
        writable = await Promise.race([
          pingDatabase(database),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error('ping timed out')), READY_TIMEOUT_MS);
          }),
        ]);
      } catch (err) {
        const fault = storageFault(err);
        if (fault) throw storageUnavailable(fault);
        return notReady('the database is not reachable', { primary: 'unreachable', writable: false });
      } finally {
        clearTimeout(timer);
      }
      if (!writable)
        return notReady('the database answers but cannot take writes now (it is read-only: failing over, or in recovery)', {
          primary: 'reachable',
          writable: false,
        });
      const ready = { success: 1, status: 'ready', database: { primary: 'reachable', writable: true } } as const;
      return replica ? { ...ready, replica: await replica } : ready;
    },
  );

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
