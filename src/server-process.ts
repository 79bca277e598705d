// One server process: read config, open and migrate the database, build the app, listen, and
// on SIGTERM stop accepting, finish in-flight requests, close the database and exit 0. Alone
// (UGS_WORKERS=1), or as one worker of several, told so by `workers`: then the primary
// (cluster/primary.ts) made the start's checks, migrated, and prints the banner.
import type { Config } from './config.ts';
import { buildApp } from './app.ts';
import { redactUrl } from './db/database.ts';
import { LogThrottle } from './foundations/throttled-log.ts';
import { openMigratedDatabase } from './process/runtime.ts';
import { bootstrapBanner, bootstrapIfEmpty } from './process/bootstrap.ts';
import { createMetrics } from './metrics/metrics.ts';
import { createLogStream } from './process/log-stream.ts';
import { durabilityLine, keysForStart, startWarnings } from './process/startup.ts';
import { SERVICE_VERSION } from './foundations/version.ts';
import { trackConnections } from './process/connections.ts';
import type { Tracing } from './tracing/trace-context.ts';
import type { SharedAcrossWorkers } from './process/cluster/worker-link.ts';
import { PROBE_INTERVAL_MS, type PrimaryStatus } from './db/postgres-pool.ts';

/** How long the exit waits for buffered log lines to be written. */
const LOG_FLUSH_AT_EXIT_MS = 2000;
/** How long the exit waits for buffered spans to be exported. */
const SPAN_FLUSH_AT_EXIT_MS = 2000;

/** What the operator reads when the SQLite file went away (docs/operations.md, "The database file was deleted or replaced"). */
const DATABASE_FILE_GONE_ADVICE =
  'writes answer 503 storage_unavailable and /readyz 503. What this process wrote is still in the files it holds open (open_database, open_wal): ' +
  'copy them before stopping it, or put the files back where they were (writes then resume); see docs/operations.md';

/**
 * The log lines of the PostgreSQL pool's breaker (db/postgres-pool.ts): one when the primary is
 * found unreachable, one when it is reached again; nothing in between, however many requests
 * it answers 503 meanwhile (their own warning is throttled: http/error-handler.ts).
 */
export function primaryStatusLog(log: () => { info: (obj: object, msg: string) => void; warn: (obj: object, msg: string) => void }) {
  return (status: PrimaryStatus, cause?: unknown) => {
    if (status === 'unreachable')
      log().warn(
        { code: (cause as { code?: string })?.code, message: (cause as Error)?.message, probe_every_ms: PROBE_INTERVAL_MS },
        'database primary unreachable: requests that need it answer 503 unavailable at once until a probe reaches it again',
      );
    else log().info({}, 'database primary reachable again: requests use it again');
  };
}

/** One server process: alone, or one of several `workers`. */
export async function serve(config: Config, workers?: SharedAcrossWorkers): Promise<void> {
  const metrics = createMetrics();
  const logs = createLogStream({ sharedOutput: workers !== undefined });
  let tracing: Tracing | undefined;
  // A bug that escapes every handler leaves the process in a state nobody knows: log it, write
  // out the lines still batched (they are what tells what happened) and the spans, and exit
  // non-zero for the supervisor to restart it. Without this, the batched lines were lost.
  let crashLog: { fatal: (obj: object, msg: string) => void } = { fatal: (obj, msg) => console.error(msg, obj) };
  let crashing = false;
  const crash = (kind: string) => (err: unknown) => {
    if (crashing) return;
    crashing = true;
    crashLog.fatal({ err, kind }, `${kind}: exiting`);
    const flushed = Promise.all([logs.finish(LOG_FLUSH_AT_EXIT_MS), tracing?.shutdown(SPAN_FLUSH_AT_EXIT_MS)]);
    void flushed.finally(() => process.exit(1));
  };
  process.on('uncaughtException', crash('uncaught exception'));
  process.on('unhandledRejection', crash('unhandled rejection'));
  // Loaded only when an OTLP endpoint is configured: with tracing off, nothing of OpenTelemetry is.
  if (config.otlpTracesUrl) {
    const { startTracing } = await import('./tracing/otel.ts');
    tracing = startTracing({ ...config, serviceVersion: SERVICE_VERSION, dbSystem: config.databaseUrl.startsWith('sqlite:') ? 'sqlite' : 'postgresql' });
  }
  let log: { info: (obj: object, msg: string) => void; warn: (obj: object | string, msg?: string) => void; error: (obj: object, msg: string) => void } = {
    info: (obj, msg) => console.error(msg, obj),
    warn: (obj, msg) => console.error(msg, obj),
    error: (obj, msg) => console.error(msg, obj),
  };
  // Redis or the replica failing repeats a line on every write or read: one every 10 s at most.
  const replicaProblems = new LogThrottle();
  const { handle, migrations } = await openMigratedDatabase(config, {
    waitMs: 30_000,
    onWait: (err) => log.warn({ code: (err as { code?: string }).code }, 'database not reachable yet; retrying'),
    onPoolError: (err) => log.warn({ code: (err as { code?: string }).code, message: err.message }, 'idle database connection failed'),
    onPrimaryStatus: primaryStatusLog(() => log),
    onReplicaProblem: (err, message) => {
      const suppressed = replicaProblems.take();
      if (suppressed !== undefined) log.warn({ code: (err as { code?: string })?.code, message: (err as Error)?.message, suppressed }, message);
    },
    onQuery: metrics.observeQuery,
    onFileChange: (problem) => {
      const { database: open_database, wal: open_wal } = problem?.openCopies ?? {};
      if (problem) log.error({ open_database, open_wal }, `${problem.what}: ${DATABASE_FILE_GONE_ADVICE}`);
      else log.warn('the SQLite database files are back where they were: writes and /readyz work again');
    },
    tracing,
  });

  // After the database, whose keys decide which of ours may seal (a worker's primary made the key file, if any).
  const { keyring, createdKeyFile } = await keysForStart(handle, config, workers ? { keyFileWasThere: true } : { createKeyFile: true });

  const app = await buildApp({
    database: handle,
    keyring,
    config,
    metrics,
    tracing,
    workers,
    logger: {
      level: config.logLevel,
      redact: ['req.headers.authorization', 'headers.authorization'],
      // Batched (see log-stream.ts): a SIGKILL may lose the last 200 ms of lines.
      stream: logs.stream,
    },
  });
  log = app.log;
  crashLog = app.log;
  const connections = trackConnections(app.server);
  app.log.info({ database: handle.description, applied: migrations.applied }, 'database ready');
  if (config.readDatabaseUrl) {
    app.log.info(
      {
        replica: redactUrl(config.readDatabaseUrl),
        read_from: config.readFrom,
        max_lag_ms: config.readMaxLagMs,
        write_positions: config.redisUrl ? 'redis' : 'none',
      },
      config.redisUrl
        ? 'page views may read the replica (docs/api.md, "Reads from replicas")'
        : 'page views read the primary only: no Redis to hold the write positions',
    );
  }
  if (tracing) {
    const { origin, pathname } = new URL(config.otlpTracesUrl); // never credentials a URL may carry
    app.log.info({ endpoint: `${origin}${pathname}`, protocol: config.otlpProtocol }, 'exporting traces over OTLP');
  }
  if (!workers) {
    // The primary's to say, with several workers.
    const durability = await durabilityLine(handle);
    if (durability) app.log[durability.level](durability.fields, durability.message);
    for (const [fields, message] of startWarnings(config, createdKeyFile)) app.log.warn(fields, message);
  }

  let shuttingDown = false;
  const shutdown = async (signal: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    app.log.info({ signal }, 'shutting down: finishing in-flight requests');
    const timer = setTimeout(() => {
      app.log.error('shutdown took too long; exiting');
      void logs.finish(LOG_FLUSH_AT_EXIT_MS).then(() => process.exit(1));
    }, config.shutdownTimeoutMs);
    timer.unref();
    // Half-way through, connections whose request has still not arrived (a stalled upload, a
    // client that never finished its headers) are closed: they would hold the shutdown up to
    // the request timeout, and a request that is not there cannot be answered anyway.
    const unanswerable = setTimeout(() => {
      const closed = connections.closeUnanswerable();
      if (closed > 0) app.log.info({ connections: closed }, 'shutting down: closed connections whose request had not arrived');
    }, config.shutdownTimeoutMs / 2);
    unanswerable.unref();
    await app.close();
    clearTimeout(unanswerable);
    await handle.close();
    await tracing?.shutdown(SPAN_FLUSH_AT_EXIT_MS);
    app.log.info('stopped');
    await logs.finish(LOG_FLUSH_AT_EXIT_MS);
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));

  if (workers) {
    // "Server listening at" is the primary's to say, once every worker listens.
    const address = await app.listen({ host: config.host, port: config.port, listenTextResolver: (at) => `worker listening at ${at}` });
    workers.listening(address);
    return;
  }
  const address = await app.listen({ host: config.host, port: config.port });
  const issued = config.bootstrap ? await bootstrapIfEmpty(handle, new Date()) : null;
  if (issued) process.stderr.write(bootstrapBanner(issued, address));
  // The start is complete (the first-start token, if any, is printed): what a supervisor or a
  // test waits for, rather than for a while.
  app.log.info({ first_start_token_printed: issued !== null }, 'started');
}
