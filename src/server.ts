// The process: read config, open and migrate the database, build the app, listen, and on
// SIGTERM stop accepting, finish in-flight requests, close the database and exit 0.
// First, before any other module is evaluated: on an unsupported Node.js, say so and stop.
import './node-version.ts';
import { loadConfig, ConfigError, publicUrlWarning } from './config.ts';
import { buildApp } from './app.ts';
import { keyFileExposure, loadKeyring } from './crypto/keyring.ts';
import { openMigratedDatabase } from './runtime.ts';
import { bootstrapBanner, bootstrapIfEmpty } from './bootstrap.ts';
import { createMetrics } from './metrics/metrics.ts';
import { createLogStream } from './log-stream.ts';
import { missingKeysMessage, missingSealingKeys } from './crypto/stored-keys.ts';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { trackConnections } from './http/connections.ts';
import type { Tracing } from './tracing/trace-context.ts';

/** How long the exit waits for buffered log lines to be written. */
const LOG_FLUSH_AT_EXIT_MS = 2000;
/** How long the exit waits for buffered spans to be exported. */
const SPAN_FLUSH_AT_EXIT_MS = 2000;

/** What the operator reads when the SQLite file went away (docs/operations.md, "The database file was deleted or replaced"). */
const DATABASE_FILE_GONE_ADVICE =
  'writes answer 503 storage_unavailable and /readyz 503. What this process wrote is still in the files it holds open (open_database, open_wal): ' +
  'copy them before stopping it, or put the files back where they were (writes then resume); see docs/operations.md';

/** A start that must not go on; its message says why and what to do. */
class StartRefused extends Error {}

async function main(): Promise<void> {
  const config = loadConfig();
  const { keyring, createdKeyFile } = loadKeyring(config.secretKeys, config.keyFile);
  const metrics = createMetrics();
  const logs = createLogStream();
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
    const { version } = createRequire(import.meta.url)('../package.json') as { version: string };
    tracing = startTracing({ ...config, serviceVersion: version, dbSystem: config.databaseUrl.startsWith('sqlite:') ? 'sqlite' : 'postgresql' });
  }
  let log: { warn: (obj: object | string, msg?: string) => void; error: (obj: object, msg: string) => void } = {
    warn: (obj, msg) => console.error(msg, obj),
    error: (obj, msg) => console.error(msg, obj),
  };
  const { handle, migrations } = await openMigratedDatabase(config, {
    waitMs: 30_000,
    onWait: (err) => log.warn({ code: (err as { code?: string }).code }, 'database not reachable yet; retrying'),
    onPoolError: (err) => log.warn({ code: (err as { code?: string }).code, message: err.message }, 'idle database connection failed'),
    onQuery: metrics.observeQuery,
    onFileChange: (problem) => {
      const { database: open_database, wal: open_wal } = problem?.openCopies ?? {};
      if (problem) log.error({ open_database, open_wal }, `${problem.what}: ${DATABASE_FILE_GONE_ADVICE}`);
      else log.warn('the SQLite database files are back where they were: writes and /readyz work again');
    },
    tracing,
  });

  // Keys that cannot open the stored tokens would answer every existing group with a 500:
  // better not to start at all, and say which keys are missing.
  const missing = await missingSealingKeys(handle.db, keyring, new Date());
  if (missing.length > 0) {
    if (createdKeyFile) fs.rmSync(config.keyFile); // leave things as they were
    await handle.close();
    const source =
      config.secretKeys.length > 0
        ? 'from UGS_SECRET_KEY'
        : `from the key file ${config.keyFile}${createdKeyFile ? ', which did not exist: this database was first used with another key' : ''}`;
    throw new StartRefused(missingKeysMessage(missing, keyring, source));
  }

  const app = await buildApp({
    database: handle,
    keyring,
    config,
    metrics,
    tracing,
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
  if (tracing) {
    const { origin, pathname } = new URL(config.otlpTracesUrl); // never credentials a URL may carry
    app.log.info({ endpoint: `${origin}${pathname}`, protocol: config.otlpProtocol }, 'exporting traces over OTLP');
  }
  if (createdKeyFile)
    app.log.warn({ keyFile: config.keyFile }, 'created a new secret key file (mode 0600); back it up: without it stored user group tokens cannot be read');
  const unreachable = publicUrlWarning(config);
  if (unreachable) app.log.warn({ iss: config.publicUrl }, unreachable);
  const exposure = config.secretKeys.length === 0 ? keyFileExposure(config.keyFile) : null;
  if (exposure) app.log.warn(`the key file ${config.keyFile} can be read by other users (mode ${exposure}): chmod 600 it`);

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

  const address = await app.listen({ host: config.host, port: config.port });
  const issued = config.bootstrap ? await bootstrapIfEmpty(handle, new Date()) : null;
  if (issued) process.stderr.write(bootstrapBanner(issued, address));
  // The start is complete (the first-start token, if any, is printed): what a supervisor or a
  // test waits for, rather than for a while.
  app.log.info({ first_start_token_printed: issued !== null }, 'started');
}

main().catch((err) => {
  if (err instanceof ConfigError) {
    console.error(`configuration error: ${err.message}`);
  } else if (err instanceof StartRefused) {
    console.error(err.message);
  } else {
    console.error('failed to start:', err instanceof Error ? err.message : err);
  }
  process.exit(1);
});
