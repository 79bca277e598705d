// The primary process of an instance with several workers (UGS_WORKERS above 1;
// docs/operations.md, "Workers"). It serves no request itself. It makes the start's checks once
// (the key file, the migrations, the keys every stored secret needs), starts the workers, which
// share its port through Node's cluster (round-robin: the primary accepts each connection and
// hands it to the next worker), says "Server listening at" once all of them listen, and prints
// the first start's banner. Then it keeps the count of workers: one that dies having served is
// replaced, at the start as later (only a worker that exits before it could serve fails the
// start); if they keep dying, everything stops with exit code 1. It tells the workers whether
// every one of them serves, which their /readyz answers. On SIGTERM every worker finishes its
// in-flight requests and the primary exits 0 when all have.
//
// For the workers it keeps what must be one for the whole instance: the rate limits' counters
// (without Redis), the sum of their metrics, which worker watches for other instances' events,
// and the news of the events each numbers.
import cluster, { type Worker } from 'node:cluster';
import { pino } from 'pino';
import type { Config } from '../../config.ts';
import { openMigratedDatabase } from '../runtime.ts';
import { bootstrapBanner, bootstrapIfEmpty } from '../bootstrap.ts';
import { createLogStream } from '../log-stream.ts';
import { durabilityLine, keysForStart, startWarnings, StartRefused } from '../startup.ts';
import { Channel } from './channel.ts';
import { RATE_LIMIT_CHECKS, RateLimitCounters } from './shared-rate-limits.ts';
import { METRICS_TEXT, MetricsAcrossWorkers } from './shared-metrics.ts';
import { EVENTS, EVERY_WORKER_SERVES, LISTENING, WATCHER } from './worker-link.ts';

const LOG_FLUSH_AT_EXIT_MS = 2000;
/** Workers that die within this window count together. */
const DEATH_WINDOW_MS = 60_000;
/** How long past the workers' own shutdown timeout (and their 2 s flush) the primary waits before it kills what is left. */
const SHUTDOWN_MARGIN_MS = 5000;

/** More deaths than this within DEATH_WINDOW_MS: the workers keep dying, and the instance stops. */
export function deathsTolerated(workers: number): number {
  return Math.max(5, 2 * workers);
}

interface Member {
  worker: Worker;
  channel: Channel;
  listening: boolean;
}

export async function runPrimary(config: Config): Promise<void> {
  const logs = createLogStream({ sharedOutput: true });
  const log = pino({ level: config.logLevel }, logs.stream);
  const exit = (code: number) => void logs.finish(LOG_FLUSH_AT_EXIT_MS).then(() => process.exit(code));

  // The start's checks, once: the migrations, the keys (the key file made here on a new database).
  const { handle, migrations } = await openMigratedDatabase(config, {
    waitMs: 30_000,
    onWait: (err) => log.warn({ code: (err as { code?: string }).code }, 'database not reachable yet; retrying'),
  });
  const { createdKeyFile } = await keysForStart(handle, config, { createKeyFile: true });
  log.info({ database: handle.description, applied: migrations.applied, workers: config.workers }, 'database ready');
  const durability = await durabilityLine(handle);
  if (durability) log[durability.level](durability.fields, durability.message);
  for (const [fields, message] of startWarnings(config, createdKeyFile)) log.warn(fields, message);

  const members = new Map<number, Member>();
  const counters = new RateLimitCounters();
  const metrics = new MetricsAcrossWorkers();
  const deaths: number[] = [];
  let watcher: number | undefined;
  let started = false;
  let stopping = false;
  let reportListening: (address: string) => void = () => undefined;
  let reportStartFailure: (err: Error) => void = () => undefined;
  const listening = new Promise<string>((resolve, reject) => {
    reportListening = resolve;
    reportStartFailure = reject;
  });
  let address = '';

  const serving = () => new Map([...members].filter(([, member]) => member.listening).map(([id, member]) => [id, member.channel]));
  // Whether every worker serves, told to the workers that serve each time it may have changed:
  // /readyz is 200 only then (docs/operations.md, "Workers").
  const tellReadiness = () => {
    const everyWorkerServes = !stopping && members.size === config.workers && [...members.values()].every((member) => member.listening);
    for (const channel of serving().values()) channel.notify(EVERY_WORKER_SERVES, everyWorkerServes);
  };
  const appointWatcher = () => {
    if (watcher !== undefined && members.get(watcher)?.listening) return;
    const next = [...members.values()].find((member) => member.listening);
    watcher = next?.worker.id;
    next?.channel.notify(WATCHER);
  };

  const fork = () => {
    const worker = cluster.fork();
    const channel = new Channel((message) => {
      if (!worker.isConnected()) throw new Error('the worker is gone');
      worker.send(message, () => undefined); // a failed send fails its request (at its timeout)
    });
    const member: Member = { worker, channel, listening: false };
    members.set(worker.id, member);
    channel.handle(RATE_LIMIT_CHECKS, (checks) => counters.count(checks as Parameters<RateLimitCounters['count']>[0]));
    channel.handle(METRICS_TEXT, () => metrics.text(serving()));
    channel.handle(EVENTS, (notice) => {
      for (const [id, other] of serving()) if (id !== worker.id) other.notify(EVENTS, notice);
    });
    channel.handle(LISTENING, (at) => {
      // The first to listen, or the first after every worker that listened died: with PORT=0
      // the port closed with the last of them, and this one has a new one.
      if (serving().size === 0) address = String(at);
      member.listening = true;
      appointWatcher();
      tellReadiness();
      if (!started && [...members.values()].every((m) => m.listening)) {
        started = true;
        reportListening(address);
      }
    });
  };

  cluster.schedulingPolicy = cluster.SCHED_RR; // also where the platform's default is another (Windows)
  cluster.on('message', (worker, message) => members.get(worker.id)?.channel.receive(message));
  cluster.on('exit', (worker, code, signal) => {
    const member = members.get(worker.id);
    members.delete(worker.id);
    member?.channel.close('the worker exited');
    metrics.retire(worker.id);
    if (watcher === worker.id) watcher = undefined;
    appointWatcher();
    tellReadiness();
    const how = { worker: worker.id, worker_pid: worker.process.pid, code, signal }; // `pid` is the primary's own, in every line
    if (stopping) {
      // Stopped cleanly: it drained (exit 0), or was told to stop before it could listen.
      if (code !== 0 && signal !== 'SIGTERM') exitCode = 1;
      if (members.size === 0) finishStopping();
      return;
    }
    // Only a worker that never served fails the start (its port taken, a setting it alone
    // reads): one that served and died is replaced, even while another is still starting.
    if (!started && !member?.listening) {
      reportStartFailure(new StartRefused(`a worker exited before it could serve (exit code ${code}${signal ? `, ${signal}` : ''}): see its message above`));
      return;
    }
    const now = Date.now();
    deaths.push(now);
    while (deaths.length > 0 && deaths[0] <= now - DEATH_WINDOW_MS) deaths.shift();
    if (deaths.length > deathsTolerated(config.workers)) {
      log.fatal({ ...how, deaths: deaths.length, within_s: DEATH_WINDOW_MS / 1000 }, 'workers keep dying: stopping the instance');
      stop('workers keep dying', 1);
      return;
    }
    log.error(how, 'a worker died; starting another');
    fork();
  });

  let exitCode = 0;
  let backstop: NodeJS.Timeout | undefined;
  const finishStopping = () => {
    clearTimeout(backstop);
    log.info({ exitCode }, 'stopped');
    exit(exitCode);
  };
  function stop(reason: string, code: number) {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    log.info({ reason, workers: members.size }, 'shutting down: every worker finishes its in-flight requests');
    for (const { worker } of members.values()) worker.process.kill('SIGTERM');
    backstop = setTimeout(
      () => {
        log.error({ workers: members.size }, 'workers took too long to stop; killing them');
        for (const { worker } of members.values()) worker.process.kill('SIGKILL');
        exitCode = 1;
      },
      config.shutdownTimeoutMs + LOG_FLUSH_AT_EXIT_MS + SHUTDOWN_MARGIN_MS,
    );
    backstop.unref();
    if (members.size === 0) finishStopping();
  }
  process.on('SIGTERM', () => stop('SIGTERM', 0));
  process.on('SIGINT', () => stop('SIGINT', 0));
  const crash = (kind: string) => (err: unknown) => {
    log.fatal({ err, kind }, `${kind}: exiting`);
    for (const { worker } of members.values()) worker.process.kill('SIGTERM');
    exit(1);
  };
  process.on('uncaughtException', crash('uncaught exception'));
  process.on('unhandledRejection', crash('unhandled rejection'));

  for (let i = 0; i < config.workers; i++) fork();
  try {
    await listening;
  } catch (err) {
    console.error((err as Error).message);
    await handle.close();
    stop('a worker could not start', 1); // exits 1 once the others have stopped
    return;
  }
  log.info({ workers: config.workers }, `Server listening at ${address}`);
  const issued = config.bootstrap ? await bootstrapIfEmpty(handle, new Date()) : null;
  if (issued) process.stderr.write(bootstrapBanner(issued, address));
  // The start is complete, as a single process says it (src/server-process.ts).
  log.info({ first_start_token_printed: issued !== null }, 'started');
  await handle.close();
}
