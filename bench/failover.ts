// `npm run bench:failover [-- options]` (also `npm run bench -- --scenarios failover`): what
// callers see when the primary of a highly available PostgreSQL is lost, and what reading from
// its replica is worth (docs/performance.md, "Failover"). In one run, on the cluster of
// scripts/ha-cluster.ts (etcd, two Patroni nodes in synchronous mode, HAProxy's read-write and
// read-only ports; Debian's patroni, etcd-server and haproxy):
//
// 1. Node loss, with a replica: two instances of the compiled server on the read-write port,
//    UGS_DATABASE_READ_URL on the read-only one, under --page-views page views and --creates
//    creates a second (scripts/failover-load.ts); after --warmup seconds, kill -9 of the
//    primary's Patroni and postmaster; the load goes on until both instances acknowledge creates
//    again, then --after seconds more. The lost node then rejoins as a replica.
// 2. Node loss, the primary alone: the same, the instances without UGS_DATABASE_READ_URL.
// 3. Page-view throughput: page views as fast as --connections callers get answers, for
//    --duration seconds, with reads on the replica first (UGS_DATABASE_READ_FROM=replica) and
//    then on the primary alone.
//
// For each node loss: the share of page views answered 2xx while the primary was away, how long
// creates failed, and how long each 503 took to come.
import { cleanUp, gitDescription, onCleanUp, wasInterrupted } from './cleanup.ts';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { issueApiToken } from '../src/api-tokens/api-tokens.service.ts';
import { onConnection } from '../scripts/scratch-database.ts';
import { haClusterMissing, startHaCluster, type HaCluster } from '../scripts/ha-cluster.ts';
import {
  countPageViews,
  countWriteErrors,
  request,
  sentBetween,
  startLoad,
  type Answer,
  type ExistingGroup,
  type PageViewCount,
  type WriteErrors,
} from '../scripts/failover-load.ts';
import { REPO_ROOT, startNodeProcess, type RunningProcess } from './processes.ts';

const USAGE = `npm run bench:failover -- [options]
  --page-views <n>      page views a second during the node losses (default 40)
  --creates <n>         creates a second during the node losses (default 10)
  --warmup <s>          seconds of load before the primary is killed (default 10)
  --after <s>           seconds of load after both instances take writes again (default 5)
  --connections <n>     concurrent callers of the throughput measurement (default 16)
  --duration <s>        measured seconds of throughput, with the replica and without (default 20)
  --groups <n>          existing groups the page views are of (default 500)
  --redis-url <url>     the Redis the instances keep their write positions in (default redis://127.0.0.1:6379)
  --log-level <level>   the servers' LOG_LEVEL (default info; their stdout goes nowhere)
  --label <text>        prefixes the result file's name and is kept in it
  --results-dir <dir>   where the JSON goes (default bench/results)`;

/** The goal (docs/performance.md, "Failover"): page views answered while the primary is away, with a replica. */
const GOAL_PERCENT = 99;
const DATABASE = 'ugs';

interface Options {
  pageViews: number;
  creates: number;
  warmup: number;
  after: number;
  connections: number;
  duration: number;
  groups: number;
  redisUrl: string;
  logLevel: string;
  label: string | undefined;
  resultsDir: string;
}

function parseOptions(argv = process.argv.slice(2)): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      'page-views': { type: 'string', default: '40' },
      creates: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '10' },
      after: { type: 'string', default: '5' },
      connections: { type: 'string', default: '16' },
      duration: { type: 'string', default: '20' },
      groups: { type: 'string', default: '500' },
      'redis-url': { type: 'string', default: 'redis://127.0.0.1:6379' },
      'log-level': { type: 'string', default: 'info' },
      label: { type: 'string' },
      'results-dir': { type: 'string', default: path.join(REPO_ROOT, 'bench/results') },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const integer = (name: string, raw: string, min: number) => {
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be an integer >= ${min}, got "${raw}"`);
    return value;
  };
  return {
    pageViews: integer('page-views', values['page-views']!, 1),
    creates: integer('creates', values.creates!, 1),
    warmup: integer('warmup', values.warmup!, 1),
    after: integer('after', values.after!, 0),
    connections: integer('connections', values.connections!, 1),
    duration: integer('duration', values.duration!, 1),
    groups: integer('groups', values.groups!, 1),
    redisUrl: values['redis-url']!,
    logLevel: values['log-level']!,
    label: values.label,
    resultsDir: path.resolve(values['results-dir']!),
  };
}

const log = (message: string) => process.stderr.write(`${message}\n`);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: not seen within ${timeoutMs} ms`);
    await sleep(100);
  }
}

interface NodeLoss {
  /** From the kill until the read-write port reached a new primary, in seconds. */
  noPrimarySeconds: number;
  /** From the kill until both instances had acknowledged a create sent after the new primary took writes. */
  outageSeconds: number;
  pageViewsDuringOutage: PageViewCount;
  pageViewsOverall: PageViewCount;
  writes: WriteErrors;
  /** Answers that were neither a success nor a 503 (a 500, or none at all), by status and code. */
  otherFailures: Record<string, number>;
}

interface Throughput {
  pageViewsPerSecond: number;
  answered: number;
  failed: number;
  p50Ms: number;
  p99Ms: number;
}

export async function main(argv?: string[]) {
  const options = parseOptions(argv);
  const missing = haClusterMissing();
  if (missing) throw new Error(`the failover benchmark needs ${missing}`);
  const startedAt = new Date();
  const loadBefore = os.loadavg();
  const secret = crypto.randomBytes(32).toString('base64');
  const prefix = `ugs-bench-failover-${process.pid}-${crypto.randomBytes(3).toString('hex')}`;

  log('starting the cluster: etcd, two Patroni nodes, HAProxy…');
  const cluster: HaCluster = await startHaCluster();
  onCleanUp(() => cluster.stop());
  log(`cluster: read-write ${cluster.rwUrl()}, read-only ${cluster.roUrl()}`);
  await onConnection(cluster.rwUrl(), `create database ${DATABASE}`);
  const databaseUrl = cluster.rwUrl(DATABASE);
  const { handle } = await openMigratedDatabase({ databaseUrl });
  const issued = await issueApiToken(
    handle,
    { accountSlug: 'bench', scopes: ['read', 'write'], allowedEnvironment: null, defaultEnvironment: 'Customer', expiresAt: null, name: 'failover bench' },
    { kind: 'command_line', tokenId: null, requestId: null },
    new Date(),
  );
  await handle.close();
  const apiToken = issued.token;

  const baseEnv = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_URL: databaseUrl,
    UGS_SECRET_KEY: secret,
    UGS_BOOTSTRAP: 'false',
    REDIS_URL: options.redisUrl,
    UGS_DATABASE_READ_REDIS_PREFIX: `${prefix}:wal:`,
    UGS_RATE_LIMIT_REDIS_PREFIX: `${prefix}:rl:`,
    LOG_LEVEL: options.logLevel,
  };
  const withReplica = { UGS_DATABASE_READ_URL: cluster.roUrl(DATABASE) };

  const startInstances = async (extra: Record<string, string>): Promise<{ urls: string[]; stop(): Promise<void> }> => {
    const servers: RunningProcess[] = [];
    for (let i = 0; i < 2; i++) {
      const server = await startNodeProcess('dist/server.js', { ...baseEnv, ...extra }, /Server listening at (https?:\/\/[^"\s]+)/);
      onCleanUp(() => server.stop());
      servers.push(server);
    }
    return {
      urls: servers.map((s) => s.url),
      async stop() {
        for (const server of servers) if (server.child.exitCode !== null) throw new Error(`a server exited during the run:\n${server.stderrTail()}`);
        await Promise.all(servers.map((s) => s.stop()));
      },
    };
  };

  // The groups the page views are of, with their tokens (for the embed context).
  const existing: ExistingGroup[] = [];
  {
    const seeding = await startInstances({});
    for (let start = 0; start < options.groups; start += 500) {
      const items = Array.from({ length: Math.min(500, options.groups - start) }, (_, i) => ({ user_group_id: `viewed-${start + i}` }));
      const answer = await request(seeding.urls[0], 'POST', '/api/users/upsert', {
        headers: { authorization: `Token ${apiToken}` },
        body: { user_groups: items },
      });
      if (answer.status !== 200) throw new Error(`seeding answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 300)}`);
      for (const result of answer.body.results as { user_group_id: string; token: string }[]) existing.push({ id: result.user_group_id, token: result.token });
    }
    await seeding.stop();
    log(`${existing.length} groups to view`);
  }

  const nodeLoss = async (name: string, extra: Record<string, string>): Promise<NodeLoss> => {
    await cluster.restoreNodes();
    const instances = await startInstances(extra);
    log(`${name}: ${options.pageViews} page views and ${options.creates} creates a second; the primary is killed after ${options.warmup} s`);
    const load = startLoad({
      instances: instances.urls,
      apiToken,
      existing,
      run: `${name}-${Date.now()}`,
      pageViewsPerSecond: options.pageViews,
      createsPerSecond: options.creates,
    });
    let answers: Answer[] = [];
    let killedAt = 0;
    let primaryAt = 0;
    try {
      await sleep(options.warmup * 1000);
      killedAt = Date.now();
      const lost = await cluster.killPrimary();
      const primary = await cluster.waitForPrimary();
      primaryAt = Date.now();
      log(`  ${lost.name} lost; ${primary.name} took writes after ${((primaryAt - killedAt) / 1000).toFixed(1)} s`);
      await until(
        'both instances acknowledging creates again',
        () => [0, 1].every((i) => load.answers.some((a) => a.instance === i && a.kind === 'create' && a.status === 201 && a.start >= primaryAt)),
        120_000,
      );
      await sleep(options.after * 1000);
    } finally {
      // Every request sent has its answer in the record once the load has stopped.
      answers = await load.stop();
      await instances.stop();
    }
    const refused = answers.filter((a) => a.kind === 'create' && a.status !== 201 && a.start >= killedAt);
    const outageEnd = Math.max(primaryAt, ...refused.map((a) => a.end));
    const other: Record<string, number> = {};
    for (const a of answers) {
      if (a.status === 0 || (a.status >= 500 && a.status !== 503)) {
        const key = `${a.status} ${a.code ?? ''}`.trim();
        other[key] = (other[key] ?? 0) + 1;
      }
    }
    const result: NodeLoss = {
      noPrimarySeconds: (primaryAt - killedAt) / 1000,
      outageSeconds: (outageEnd - killedAt) / 1000,
      pageViewsDuringOutage: countPageViews(sentBetween(answers, killedAt, outageEnd)),
      pageViewsOverall: countPageViews(answers),
      writes: countWriteErrors(answers),
      otherFailures: other,
    };
    log(`  ${nodeLossLine(result)}`);
    return result;
  };

  const throughput = async (name: string, extra: Record<string, string>): Promise<Throughput> => {
    await cluster.restoreNodes();
    const instances = await startInstances(extra);
    const run = (seconds: number) => {
      const load = startLoad({
        instances: instances.urls,
        apiToken,
        existing,
        run: `${name}-${Date.now()}`,
        pageViewsPerSecond: 0,
        createsPerSecond: 0,
        pageViewWorkers: options.connections,
      });
      return sleep(seconds * 1000).then(() => load.stop());
    };
    await run(3); // warm-up: connections opened, caches filled
    const started = Date.now();
    const answers = await run(options.duration);
    const elapsed = (Date.now() - started) / 1000;
    await instances.stop();
    const ok = answers.filter((a) => a.status >= 200 && a.status < 300);
    const latencies = ok.map((a) => a.end - a.start).sort((x, y) => x - y);
    const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)] ?? Number.NaN;
    const result = { pageViewsPerSecond: ok.length / elapsed, answered: ok.length, failed: answers.length - ok.length, p50Ms: at(50), p99Ms: at(99) };
    log(`  ${name}: ${result.pageViewsPerSecond.toFixed(0)} page views/s (p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, ${result.failed} failed)`);
    return result;
  };

  const lossWithReplica = await nodeLoss('node loss, with a replica', withReplica);
  const lossPrimaryAlone = await nodeLoss('node loss, the primary alone', {});
  log(`throughput: ${options.connections} callers, ${options.duration} s each`);
  const throughputReplica = await throughput('reads on the replica first', { ...withReplica, UGS_DATABASE_READ_FROM: 'replica' });
  const throughputPrimary = await throughput('the primary alone', {});
  await cleanUp();

  const report = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    label: options.label ?? null,
    commit: gitDescription(REPO_ROOT),
    options: {
      pageViewsPerSecond: options.pageViews,
      createsPerSecond: options.creates,
      warmupSeconds: options.warmup,
      afterSeconds: options.after,
      connections: options.connections,
      durationSeconds: options.duration,
      groups: options.groups,
    },
    machine: {
      node: process.version,
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? 'unknown',
      loadAverageBefore: loadBefore.map((n) => Number(n.toFixed(2))),
      loadAverageAfter: os.loadavg().map((n) => Number(n.toFixed(2))),
    },
    nodeLoss: { withReplica: lossWithReplica, primaryAlone: lossPrimaryAlone },
    throughput: { replicaFirst: throughputReplica, primaryAlone: throughputPrimary },
  };
  printReport(report);
  fs.mkdirSync(options.resultsDir, { recursive: true });
  const file = path.join(options.resultsDir, `${options.label ? `${options.label}-` : ''}failover-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`\nwritten: ${path.relative(process.cwd(), file)}`);
}

function nodeLossLine(loss: NodeLoss): string {
  const during = loss.pageViewsDuringOutage;
  const t = loss.writes.timeTo503Ms;
  return (
    `no primary for ${loss.noPrimarySeconds.toFixed(1)} s; page views answered during the outage ${during.answered2xx}/${during.total} (${during.percent.toFixed(1)} %)` +
    `; creates failed over ${loss.writes.spanSeconds.toFixed(1)} s (${loss.writes.failed} of ${loss.writes.creates})` +
    (t ? `; time to 503 p50 ${t.p50} ms, p90 ${t.p90} ms, p99 ${t.p99} ms, max ${t.max} ms` : '') +
    (Object.keys(loss.otherFailures).length ? `; other failures ${JSON.stringify(loss.otherFailures)}` : '')
  );
}

function printReport(report: {
  nodeLoss: { withReplica: NodeLoss; primaryAlone: NodeLoss };
  throughput: { replicaFirst: Throughput; primaryAlone: Throughput };
  machine: { loadAverageBefore: number[]; cpus: number };
}) {
  const { withReplica, primaryAlone } = report.nodeLoss;
  const row = (name: string, cells: string[]) => `${name.padEnd(30)}${cells.map((c) => c.padStart(24)).join('')}`;
  const cells = (loss: NodeLoss) => {
    const t = loss.writes.timeTo503Ms;
    return [
      `${loss.pageViewsDuringOutage.percent.toFixed(1)} %`,
      `${loss.writes.spanSeconds.toFixed(1)} s`,
      t ? `${t.p50} / ${t.p99} / ${t.max}` : '-',
      `${loss.noPrimarySeconds.toFixed(1)} s`,
    ];
  };
  console.log('\nfailover: the primary node lost (kill -9 of its Patroni and postmaster), two instances under load');
  console.log(row('', ['page views 2xx', 'write errors', '503 in ms p50/p99/max', 'no primary']));
  console.log(row('with a replica', cells(withReplica)));
  console.log(row('the primary alone', cells(primaryAlone)));
  console.log(
    `goal: at least ${GOAL_PERCENT} % of page views answered during the outage with a replica: ${withReplica.pageViewsDuringOutage.percent >= GOAL_PERCENT ? 'met' : 'NOT met'}`,
  );
  console.log(`with a replica: ${nodeLossLine(withReplica)}`);
  console.log(`the primary alone: ${nodeLossLine(primaryAlone)}`);
  const { replicaFirst, primaryAlone: primary } = report.throughput;
  console.log('\npage-view throughput (two instances)');
  console.log(row('', ['page views/s', 'p50 ms', 'p99 ms', 'failed']));
  for (const [name, t] of [
    ['reads on the replica first', replicaFirst],
    ['the primary alone', primary],
  ] as const) {
    console.log(row(name, [t.pageViewsPerSecond.toFixed(0), String(t.p50Ms), String(t.p99Ms), String(t.failed)]));
  }
  console.log(
    `load average before: ${report.machine.loadAverageBefore.join(' ')} on ${report.machine.cpus} CPUs${report.machine.loadAverageBefore[0] > report.machine.cpus * 0.25 ? ' (busy: figures are not comparable)' : ''}`,
  );
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('bench/failover.ts')) {
  main().catch(async (err) => {
    if (!wasInterrupted()) console.error(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : err}`);
    await cleanUp();
    process.exit(wasInterrupted() ? 130 : 1);
  });
}
