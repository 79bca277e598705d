// Where a page view reads (docs/api.md, "Reads from replicas"): the primary, or the replica of
// UGS_DATABASE_READ_URL when the replica is known to hold every write the caller's account has
// been answered. After each write transaction commits, the primary's WAL position is recorded
// for each account it wrote (write-positions.ts, in Redis, 30 s); a read for an account goes to
// a replica connection only once that connection's replay position has passed the account's
// record, and only while it lags less than UGS_DATABASE_READ_MAX_LAG_MS (replica.ts). Without
// Redis nothing can be proved, and every read stays on the primary.
//
// - `fallback`: the primary first; the replica only when the primary cannot be reached (its
//   read failed as an outage does, or the write breaker says it is away).
// - `replica`: the replica first, the primary when the replica cannot serve the read.
import { sql } from './kysely.ts';
import type { Kysely } from 'kysely';
import type { Database } from './schema.ts';
import type { DatabaseHandle, DatabaseOptions, PageViewReads, ReadPool } from './database.ts';
import { isDatabaseUnavailable } from './errors.ts';
import { Replica, ReplicaNotUsable, type ReplicaCheck } from './replica.ts';
import { openWritePositions, type WritePositions } from './write-positions.ts';
import { formatLsn, parseLsn, UNKNOWN_POSITION } from './wal-position.ts';
import { POSITION_AFTER_COMMIT_SQL } from './commit-position.ts';
import type { Config } from '../config.ts';
import type { ReplicaReadiness } from './replica-readiness.ts';

export type ReplicaSettings = Pick<Config, 'readDatabaseUrl' | 'readFrom' | 'readMaxLagMs' | 'readPoolSize' | 'readRedisPrefix' | 'redisUrl'>;

/** As /readyz's ping of the primary (http/operational.routes.ts). */
const READINESS_TIMEOUT_MS = 2000;

/** Neither node could serve the read: the primary is away and the replica cannot prove it is fresh enough (answered 503 unavailable). */
export class NoNodeCanServe extends Error {
  /** connection_failure: the class isDatabaseUnavailable answers 503 with Retry-After (db/errors.ts). */
  readonly code = '08006';
  constructor(readonly replicaError: unknown) {
    super('the primary cannot be reached and the replica cannot serve this read');
    this.name = 'NoNodeCanServe';
  }
}

/** Redis did not answer: the account's position is not known, so the replica cannot be used. */
class PositionUnknown extends Error {}

export interface ReplicaRouting {
  replica: Replica;
  positions: WritePositions | undefined;
}

/**
 * Installs the replica on a PostgreSQL handle: page views read through it, writes record their
 * position, close() closes it too. Without Redis (REDIS_URL unset) reads stay on the primary;
 * `warn` says so once.
 */
export async function attachReplica(
  handle: DatabaseHandle,
  settings: ReplicaSettings,
  options: DatabaseOptions & { onReplicaProblem?: (err: unknown, message: string) => void } = {},
): Promise<ReplicaRouting> {
  const problem = (message: string) => (err: unknown) => options.onReplicaProblem?.(err, message);
  const replica = new Replica(settings.readDatabaseUrl, settings.readMaxLagMs, { ...options, poolSize: settings.readPoolSize });
  const positions = settings.redisUrl
    ? await openWritePositions(
        settings.redisUrl,
        settings.readRedisPrefix,
        problem('the write positions store (Redis) is unreachable: page views read the primary until it is back'),
      )
    : undefined;
  const close = handle.close;
  handle.close = async () => {
    await close();
    await replica.close();
    await positions?.close();
  };
  if (positions) {
    handle.afterWrite = {
      positionAfterCommit: (conn, asked) =>
        positionAfterCommit(conn, asked, problem('could not read the write position after a commit: the account reads the primary for 30 s')),
      // The write is committed: its answer stands whatever Redis does. A record that could not be
      // made leaves the account's reads as fresh as the lag bound (docs/api.md, "Reads from replicas").
      record: (accounts, position) =>
        positions.record(accounts, position).catch(problem('could not record a write position in Redis: the account reads are as fresh as the lag bound')),
    };
    handle.pageViews = routedPageViews(handle, replica, positions, settings.readFrom, handle.pageViews.onRead);
  }
  handle.replicaReadiness = async (): Promise<ReplicaReadiness> => {
    const base = { mode: settings.readFrom, in_use: positions !== undefined, max_lag_seconds: settings.readMaxLagMs / 1000 };
    let check: ReplicaCheck;
    let timer: NodeJS.Timeout | undefined;
    try {
      check = await Promise.race([
        replica.probe(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('the replica did not answer in time')), READINESS_TIMEOUT_MS);
        }),
      ]);
    } catch {
      return { ...base, reachable: false };
    } finally {
      clearTimeout(timer);
    }
    return { ...base, reachable: true, standby: check.standby, lag_seconds: check.lagSeconds, replay_lsn: formatLsn(check.replayed) };
  };
  return { replica, positions };
}

/**
 * The primary's WAL position after the transaction's commit (commit-position.ts): the largest
 * of those its commits were sent with, else one asked for now on the connection that
 * committed. An account recorded past everything a standby received cannot read it until a new
 * primary takes over (docs/api.md, "Reads from replicas"). When no position can be read, the
 * accounts get one no replica passes: their reads stay on the primary for the record's 30 s,
 * rather than risk a read from before the write.
 */
async function positionAfterCommit(conn: Kysely<Database>, asked: readonly Promise<string | undefined>[], onError: (err: unknown) => void): Promise<bigint> {
  // A commit that failed (an attempt run again) has no position; the transaction's own, which
  // succeeded, has one, and so the largest is past it.
  let largest: bigint | null = null;
  for (const settled of await Promise.allSettled(asked)) {
    const position = settled.status === 'fulfilled' && settled.value !== undefined ? parseLsn(settled.value) : null;
    if (position !== null && (largest === null || position > largest)) largest = position;
  }
  if (largest !== null) return largest;
  // No commit was sent with its position: asked now.
  try {
    const { rows } = await sql<{ lsn: string }>`${sql.raw(POSITION_AFTER_COMMIT_SQL)}`.execute(conn);
    return parseLsn(rows[0].lsn) ?? UNKNOWN_POSITION;
  } catch (err) {
    onError(err);
    return UNKNOWN_POSITION;
  }
}

function routedPageViews(
  handle: DatabaseHandle,
  replica: Replica,
  positions: WritePositions,
  mode: Config['readFrom'],
  onRead: Set<(pool: ReadPool) => void>,
): PageViewReads {
  const counted = (pool: ReadPool) => {
    for (const listener of onRead) listener(pool);
  };
  const requiredOf = (accountId: number) =>
    positions.required(accountId).catch((err: unknown) => {
      throw new PositionUnknown(err instanceof Error ? err.message : String(err));
    });
  /** Whether the replica (or Redis) could not serve: then the other node is tried. */
  const replicaCannot = (err: unknown) => err instanceof ReplicaNotUsable || err instanceof PositionUnknown || isDatabaseUnavailable(err);

  const route = async <T>(onPrimary: () => Promise<T>, onReplica: () => Promise<T>): Promise<T> => {
    if (mode === 'replica') {
      try {
        const answer = await onReplica();
        counted('replica');
        return answer;
      } catch (err) {
        if (!replicaCannot(err)) throw err;
      }
      const answer = await onPrimary();
      counted('primary');
      return answer;
    }
    let primaryError: unknown;
    if (handle.primaryStatus?.() !== 'unreachable') {
      try {
        const answer = await onPrimary();
        counted('primary');
        return answer;
      } catch (err) {
        if (!isDatabaseUnavailable(err)) throw err;
        primaryError = err;
      }
    }
    try {
      const answer = await onReplica();
      counted('replica');
      return answer;
    } catch (err) {
      if (!replicaCannot(err)) throw err;
      throw primaryError ?? new NoNodeCanServe(err);
    }
  };

  return {
    onRead,
    ofAccount: (accountId, read) =>
      route(
        () => read(handle.reads),
        async () => read(replica.readsAtLeast(await requiredOf(accountId))),
      ),
    findingAccount: (read, accountOf) =>
      route(
        () => read(handle.reads),
        async () => {
          // The account is known only from the row: found at any position, it is read again at
          // the account's own, which most often the same connection has passed already.
          const found = await read(replica.readsAtLeast(0n));
          if (found === undefined) {
            // A token made a moment ago may not be on the replica yet: in `replica` mode the
            // primary says whether it exists (counted as the primary's read).
            if (mode === 'replica') throw new ReplicaNotUsable('behind', 'not found on the replica');
            return undefined;
          }
          const required = await requiredOf(accountOf(found));
          return required === 0n ? found : read(replica.readsAtLeast(required));
        },
      ),
    shared: (read: (db: Kysely<Database>) => Promise<unknown>) =>
      route(
        () => read(handle.db),
        () => read(replica.db),
      ),
  } as PageViewReads;
}
