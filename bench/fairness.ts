// `npm run bench:fairness [-- options]` (also `npm run bench -- --scenarios fairness`): whether
// one tenant's bulk work moves another tenant's latencies (docs/performance.md, "Fairness
// between tenants"). In one run, on one backend:
//
// 1. A fresh database (as bench/run.ts makes it) and the real compiled server (one instance, or
//    two on one PostgreSQL database).
// 2. Two accounts. The attacker's groups, --groups of them, all carrying one tag, are created
//    through the bulk upsert. The victim has a webhook endpoint at a receiver in this process,
//    which answers at once.
// 3. Quiet: the victim creates groups (POST /api/user) at --rate a second for --duration
//    seconds, open loop; each create's latency is measured, and so is each group's
//    user_group.created delivery, from the create's answer to the delivery's arrival.
// 4. Attacked: the attacker (bench/fairness-attacker.ts, a process of its own) opens 20 event
//    streams, points 16 webhook endpoints at a receiver that never answers, and loops two
//    upserts of 600 changed groups, a rename of the tag on every group, and an export. After
//    --warmup seconds the victim is measured again exactly as in 3.
// 5. The table: the victim's create and delivery latencies (median, 99th percentile), quiet and
//    attacked, and what the attacker's loops did (how many ran, how many were refused, and with
//    which code).
import { cleanUp, gitDescription, onCleanUp, wasInterrupted } from './cleanup.ts';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { issueApiToken } from '../src/api-tokens/api-tokens.service.ts';
import { createBenchDatabase, type BenchDatabase } from './seed.ts';
import { REPO_ROOT, httpRequest, startNodeProcess, type RunningProcess } from './processes.ts';
import type { AttackPlan, LoopReport } from './fairness-attacker.ts';

const USAGE = `npm run bench:fairness -- [options]
  --database-url <url>  postgres://… : a fresh database is created next to this one and dropped
                        afterwards (default: a fresh SQLite file in the temp directory)
  --instances <1|2>     server instances on the same database (default 1; 2 needs PostgreSQL);
                        the victim and the attacker send to them in turn
  --rate <n>            the victim's creates per second (default 20)
  --duration <s>        measured seconds, quiet and attacked each (default 30)
  --warmup <s>          seconds of attack before the victim is measured (default 10)
  --groups <n>          the attacker's groups, every one carrying the renamed tag (default 20000)
  --drain <s>           after the last create, how long to wait for its delivery (default 60)
  --log-level <level>   the servers' LOG_LEVEL (default info; their stdout goes nowhere)
  --label <text>        prefixes the result file's name and is kept in it
  --results-dir <dir>   where the JSON goes (default bench/results)`;

/** The goal (docs/performance.md): attacked, the victim's p99s stay within this of their quiet values. */
const GOAL_MS = 1000;
const UPSERT_ITEMS = 600;
const UPSERT_LOOPS = 2;
const STREAMS = 20;
const ENDPOINTS = 16;
const TAG = 'fairness';

interface Options {
  databaseUrl: string | undefined;
  instances: number;
  rate: number;
  duration: number;
  warmup: number;
  groups: number;
  drain: number;
  logLevel: string;
  label: string | undefined;
  resultsDir: string;
}

function parseOptions(argv = process.argv.slice(2)): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      'database-url': { type: 'string' },
      instances: { type: 'string', default: '1' },
      rate: { type: 'string', default: '20' },
      duration: { type: 'string', default: '30' },
      warmup: { type: 'string', default: '10' },
      groups: { type: 'string', default: '20000' },
      drain: { type: 'string', default: '60' },
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
  const options: Options = {
    databaseUrl: values['database-url'],
    instances: integer('instances', values.instances!, 1),
    rate: integer('rate', values.rate!, 1),
    duration: integer('duration', values.duration!, 1),
    warmup: integer('warmup', values.warmup!, 0),
    groups: integer('groups', values.groups!, UPSERT_ITEMS * UPSERT_LOOPS),
    drain: integer('drain', values.drain!, 0),
    logLevel: values['log-level']!,
    label: values.label,
    resultsDir: path.resolve(values['results-dir']!),
  };
  if (options.instances > 2) throw new Error('--instances must be 1 or 2');
  if (options.instances === 2 && !options.databaseUrl?.startsWith('postgres')) throw new Error('--instances 2 needs --database-url postgres://…');
  return options;
}

/** A victim's create not answered by then counts as failed (status `-1`, "timeout"), with this as its latency. */
const REQUEST_TIMEOUT_MS = 60_000;

const log = (message: string) => process.stderr.write(`${message}\n`);

/** `promise`, or a rejection with "timeout" after `ms` (the request itself is left to end or not). */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), ms);
    }),
  ]);
}
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

interface Latencies {
  count: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

function summarize(values: readonly number[]): Latencies {
  const sorted = [...values].sort((a, b) => a - b);
  const round = (n: number | null) => (n === null ? null : Math.round(n));
  return { count: sorted.length, p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)), max: round(sorted.at(-1) ?? null) };
}

/** The victim's webhook receiver: answers at once, and notes when each group's user_group.created arrived. */
async function startReceiver(): Promise<{ url: string; arrivals: Map<string, number>; close(): Promise<void> }> {
  const arrivals = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const at = performance.now();
      res.writeHead(204).end();
      try {
        const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { type: string; data?: { user_group_id?: string } };
        const group = event.data?.user_group_id;
        if (event.type === 'user_group.created' && typeof group === 'string' && !arrivals.has(group)) arrivals.set(group, at);
      } catch {
        // not an event: ignored
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/victim`,
    arrivals,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface PhaseResult {
  planned: number;
  ok: number;
  /** Answers other than 201, by status (0: a network error; -1: no answer within a minute). */
  failed: Record<string, number>;
  createMs: Latencies;
  deliveryMs: Latencies;
  /** Acknowledged creates whose delivery had not arrived when the drain ended. */
  undelivered: number;
}

/** The victim's creates at `rate` a second for `seconds`, open loop (each at its time, whatever the others' answers), then the drain. */
async function measureVictim(
  urls: string[],
  token: string,
  receiver: { arrivals: Map<string, number> },
  phase: string,
  options: Options,
): Promise<PhaseResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const planned = options.rate * options.duration;
  const interval = 1000 / options.rate;
  const sent: { group: string; sentAt: number; ackAt?: number; status?: number }[] = [];
  const inFlight: Promise<void>[] = [];
  const started = performance.now();
  for (let i = 0; i < planned; i++) {
    const due = started + i * interval;
    if (due > performance.now()) await sleep(due - performance.now());
    const change = { group: `victim-${phase}-${i}`, sentAt: performance.now() } as (typeof sent)[number];
    sent.push(change);
    inFlight.push(
      withTimeout(
        httpRequest(
          urls[i % urls.length],
          {
            method: 'POST',
            path: '/api/user',
            headers: { authorization: `Token ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ user_group_id: change.group, properties: { phase } }),
          },
          agent,
        ),
        REQUEST_TIMEOUT_MS,
      ).then(
        (res) => {
          change.ackAt = performance.now();
          change.status = res.status;
        },
        (err: Error) => {
          change.ackAt = performance.now();
          change.status = err.message === 'timeout' ? -1 : 0;
        },
      ),
    );
  }
  await Promise.all(inFlight);
  agent.destroy();
  const acked = sent.filter((c) => c.status === 201);
  const drainUntil = performance.now() + options.drain * 1000;
  while (acked.some((c) => !receiver.arrivals.has(c.group)) && performance.now() < drainUntil) await sleep(100);
  const failed: Record<string, number> = {};
  for (const c of sent) if (c.status !== 201) failed[String(c.status)] = (failed[String(c.status)] ?? 0) + 1;
  const delivered = acked.filter((c) => receiver.arrivals.has(c.group));
  return {
    planned,
    ok: acked.length,
    failed,
    createMs: summarize(sent.map((c) => c.ackAt! - c.sentAt)),
    deliveryMs: summarize(delivered.map((c) => receiver.arrivals.get(c.group)! - c.ackAt!)),
    undelivered: acked.length - delivered.length,
  };
}

async function post(url: string, token: string, path: string, body: unknown): Promise<{ status: number; body: string }> {
  return httpRequest(url, {
    method: 'POST',
    path,
    headers: { authorization: `Token ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** Waits until the account's feed stops growing: the sequencer has moved what the seeding wrote. */
async function settled(url: string, token: string): Promise<void> {
  let last = -1;
  for (let waited = 0; waited < 120_000; waited += 1000) {
    let head = 0;
    for (;;) {
      const res = await httpRequest(url, { method: 'GET', path: `/api/events?after=${head}&limit=500`, headers: { authorization: `Token ${token}` } });
      if (res.status !== 200) throw new Error(`GET /api/events answered ${res.status}: ${res.body.slice(0, 200)}`);
      const page = JSON.parse(res.body) as { events: unknown[]; next_cursor: string };
      head = Math.max(head, Number(page.next_cursor));
      if (page.events.length < 500) break;
    }
    if (head === last) return;
    last = head;
    await sleep(1000);
  }
}

/** Starts the attacker's process; resolves once it says it is attacking. Its stop() answers what its loops did. */
async function startAttacker(plan: AttackPlan): Promise<{ stop(): Promise<Record<string, LoopReport>> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/fairness-attacker.ts'], {
    cwd: REPO_ROOT,
    env: { ...process.env, FAIRNESS_ATTACK: JSON.stringify(plan) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-8192)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  onCleanUp(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  for (let waited = 0; !stdout.includes('attacking\n'); waited += 100) {
    if (child.exitCode !== null) throw new Error(`the attacker exited before attacking:\n${stderr}`);
    if (waited > 120_000) throw new Error(`the attacker did not start within 120 s:\n${stderr}`);
    await sleep(100);
  }
  return {
    async stop() {
      child.kill('SIGTERM');
      await exited;
      const line = stdout.trim().split('\n').at(-1) ?? '';
      try {
        return JSON.parse(line) as Record<string, LoopReport>;
      } catch {
        throw new Error(`the attacker's report is not JSON: ${line.slice(0, 300)}\n${stderr}`);
      }
    },
  };
}

export async function main(argv?: string[]) {
  const options = parseOptions(argv);
  const startedAt = new Date();
  const loadBefore = os.loadavg();
  const secret = crypto.randomBytes(32);

  // 1. The database and the accounts.
  const database: BenchDatabase = await createBenchDatabase(options.databaseUrl);
  onCleanUp(() => database.drop());
  log(`database: ${database.description}`);
  const { handle } = await openMigratedDatabase({ databaseUrl: database.url });
  const issue = (accountSlug: string) =>
    issueApiToken(
      handle,
      { accountSlug, scopes: ['read', 'write', 'admin'], allowedEnvironment: null, defaultEnvironment: 'Customer', expiresAt: null, name: 'fairness bench' },
      { kind: 'command_line', tokenId: null, requestId: null },
      new Date(),
    );
  const victim = await issue('victim');
  const attacker = await issue('attacker');
  const attackerAccountId = Number((await handle.db.selectFrom('accounts').select('id').where('slug', '=', 'attacker').executeTakeFirstOrThrow()).id);
  await handle.close();

  // 2. The servers, as deployed (limits at their defaults), with webhooks allowed to this machine's receivers.
  const env = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_URL: database.url,
    UGS_SECRET_KEY: secret.toString('base64'),
    UGS_BOOTSTRAP: 'false',
    UGS_WEBHOOK_ALLOW_PRIVATE: 'true',
    REDIS_URL: '',
    LOG_LEVEL: options.logLevel,
  };
  const servers: RunningProcess[] = [];
  for (let i = 0; i < options.instances; i++) {
    const server = await startNodeProcess('dist/server.js', env, /Server listening at (https?:\/\/[^"\s]+)/);
    onCleanUp(() => server.stop());
    servers.push(server);
    log(`server ${i + 1}: ${server.url} (pid ${server.pid})`);
  }
  const urls = servers.map((s) => s.url);

  // 3. The attacker's groups, every one carrying the tag its loop renames.
  const seedStarted = performance.now();
  for (let start = 0; start < options.groups; start += 1000) {
    const items = Array.from({ length: Math.min(1000, options.groups - start) }, (_, i) => ({ user_group_id: `attacker-${start + i}`, group_tags: [TAG] }));
    for (;;) {
      const res = await post(urls[0], attacker.token, '/api/users/upsert', { user_groups: items });
      if (res.status === 200) break;
      if (res.status !== 429 && res.status !== 503) throw new Error(`seeding answered ${res.status}: ${res.body.slice(0, 300)}`);
      await sleep(1000);
    }
  }
  await settled(urls[0], attacker.token);
  log(
    `the attacker's ${options.groups.toLocaleString('en-US')} groups, created and their events sequenced in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`,
  );
  const receiver = await startReceiver();
  onCleanUp(() => receiver.close());
  const endpoint = await post(urls[0], victim.token, '/api/webhook_endpoints', {
    url: receiver.url,
    types: ['user_group.created'],
    description: 'fairness victim',
  });
  if (endpoint.status !== 201) throw new Error(`the victim's webhook endpoint: ${endpoint.status} ${endpoint.body.slice(0, 300)}`);

  // 4. Quiet.
  log(`quiet: the victim creates ${options.rate} groups a second for ${options.duration} s`);
  const quiet = await measureVictim(urls, victim.token, receiver, 'quiet', options);
  log(`  ${phaseLine(quiet)}`);

  // 5. Attacked.
  const attack = await startAttacker({
    urls,
    token: attacker.token,
    databaseUrl: database.url,
    accountId: attackerAccountId,
    environment: 'Customer',
    groupPrefix: 'attacker-',
    upsertLoops: UPSERT_LOOPS,
    upsertItems: UPSERT_ITEMS,
    tag: TAG,
    streams: STREAMS,
    endpoints: ENDPOINTS,
    exportLoop: true,
  });
  log(
    `attacked: ${UPSERT_LOOPS} loops of ${UPSERT_ITEMS}-item upserts, a rename of a tag on ${options.groups} groups, an export loop, ${ENDPOINTS} endpoints that never answer, ${STREAMS} streams; ${options.warmup} s before measuring`,
  );
  await sleep(options.warmup * 1000);
  const attacked = await measureVictim(urls, victim.token, receiver, 'attacked', options);
  const attackerReport = await attack.stop();
  log(`  ${phaseLine(attacked)}`);
  for (const server of servers) if (server.child.exitCode !== null) throw new Error(`a server exited during the run:\n${server.stderrTail()}`);
  await cleanUp();

  const report = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    label: options.label ?? null,
    backend: database.backend,
    instances: options.instances,
    commit: gitDescription(REPO_ROOT),
    options: { rate: options.rate, durationSeconds: options.duration, warmupSeconds: options.warmup, attackerGroups: options.groups },
    machine: {
      node: process.version,
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? 'unknown',
      loadAverageBefore: loadBefore.map((n) => Number(n.toFixed(2))),
      loadAverageAfter: os.loadavg().map((n) => Number(n.toFixed(2))),
    },
    quiet,
    attacked,
    attacker: attackerReport,
  };
  printReport(report);
  fs.mkdirSync(options.resultsDir, { recursive: true });
  const file = path.join(
    options.resultsDir,
    `${options.label ? `${options.label}-` : ''}fairness-${database.backend}${options.instances > 1 ? `-${options.instances}instances` : ''}-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`,
  );
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`\nwritten: ${path.relative(process.cwd(), file)}`);
}

function phaseLine(phase: PhaseResult): string {
  const failed = Object.entries(phase.failed)
    .map(([status, n]) => `${n} × ${status}`)
    .join(', ');
  return (
    `creates p50 ${phase.createMs.p50} ms, p99 ${phase.createMs.p99} ms; deliveries p50 ${phase.deliveryMs.p50} ms, p99 ${phase.deliveryMs.p99} ms` +
    ` (${phase.ok}/${phase.planned} created${failed ? `, ${failed}` : ''}${phase.undelivered ? `, ${phase.undelivered} undelivered` : ''})`
  );
}

function printReport(report: {
  backend: string;
  instances: number;
  quiet: PhaseResult;
  attacked: PhaseResult;
  attacker: Record<string, LoopReport>;
  machine: { loadAverageBefore: number[]; cpus: number };
}) {
  const { quiet, attacked } = report;
  const row = (name: string, cells: (number | null | string)[]) =>
    `${name.padEnd(14)}${cells.map((c) => (c === null ? '-' : typeof c === 'number' ? `${c.toLocaleString('en-US')} ms` : c).padStart(14)).join('')}`;
  console.log(
    `\nfairness, ${report.backend}${report.instances > 1 ? `, ${report.instances} instances` : ''}: the victim's latencies, quiet and while another account attacks`,
  );
  console.log(row('', ['create p50', 'create p99', 'webhook p50', 'webhook p99']));
  console.log(row('quiet', [quiet.createMs.p50, quiet.createMs.p99, quiet.deliveryMs.p50, quiet.deliveryMs.p99]));
  console.log(row('attacked', [attacked.createMs.p50, attacked.createMs.p99, attacked.deliveryMs.p50, attacked.deliveryMs.p99]));
  const worse = (a: number | null, b: number | null) => (a === null || b === null ? null : b - a);
  const createWorse = worse(quiet.createMs.p99, attacked.createMs.p99);
  const deliveryWorse = worse(quiet.deliveryMs.p99, attacked.deliveryMs.p99);
  console.log(row('p99 moved by', ['', createWorse === null ? '-' : `${createWorse} ms`, '', deliveryWorse === null ? '-' : `${deliveryWorse} ms`]));
  const met = createWorse !== null && deliveryWorse !== null && createWorse <= GOAL_MS && deliveryWorse <= GOAL_MS && attacked.undelivered === 0;
  console.log(`goal: both p99s within ${GOAL_MS} ms of their quiet values, every delivery made: ${met ? 'met' : 'NOT met'}`);
  for (const [name, phase] of [
    ['quiet', quiet],
    ['attacked', attacked],
  ] as const) {
    console.log(`${name}: ${phaseLine(phase)}`);
  }
  console.log('\nthe attacker:');
  for (const [name, loop] of Object.entries(report.attacker)) {
    const refused = Object.entries(loop.refused)
      .map(([code, n]) => `${n} × ${code}`)
      .join(', ');
    console.log(
      `  ${name.padEnd(10)} ${loop.ok}/${loop.runs} done (median ${loop.medianMs ?? '-'} ms)${refused ? `; refused: ${refused}` : ''}${loop.errors ? `; ${loop.errors} network errors` : ''}`,
    );
  }
  console.log(
    `load average before: ${report.machine.loadAverageBefore.join(' ')} on ${report.machine.cpus} CPUs${report.machine.loadAverageBefore[0] > report.machine.cpus * 0.25 ? ' (busy: figures are not comparable)' : ''}`,
  );
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('bench/fairness.ts')) {
  main().catch(async (err) => {
    if (!wasInterrupted()) console.error(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : err}`);
    await cleanUp();
    process.exit(wasInterrupted() ? 130 : 1);
  });
}
