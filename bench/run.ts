// `npm run bench [-- options]`: seeds a fresh database, starts the real server and the ceiling
// (bench/ceiling.ts) as separate processes, drives every scenario against both with
// autocannon from a third process (bench/load.ts), prints a table and writes it as JSON to
// bench/results/. See docs/performance.md.
import { cleanUp, gitDescription, onCleanUp, wasInterrupted } from './cleanup.ts';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Keyring } from '../src/crypto/keyring.ts';
import type { EmbedSigningAlgorithm } from '../src/config.ts';
import type { DatabaseHandle } from '../src/db/database.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { rotateSigningKey } from '../src/embed/signing-keys.ts';
import { createBenchDatabase, cursorAfter, plannerStatistics, seedDatabase, type BenchDatabase } from './seed.ts';
import {
  REPO_ROOT,
  httpRequest,
  mintEmbedTokens,
  pageThroughEveryGroup,
  primeGroups,
  cpuSeconds,
  processTree,
  requestsAnswered,
  residentMemoryKb,
  runLoad,
  signingAlgorithmOf,
  startNodeProcess,
  type ProbeResponse,
  type RunningProcess,
} from './processes.ts';
import { SCENARIO_NAMES, benchLayout, scenarioByName, type ScenarioData } from './scenarios.ts';
import { makePlainIndex, PLAIN_INDEX, startDatabaseCpu, statementsSent } from './database-cost.ts';
import type { LoadResult } from './load.ts';

const USAGE = `npm run bench -- [options]
  --groups <n>          user groups to seed (default 100000; 1000000 for the scale run)
  --connections <n>     autocannon connections (default 50)
  --duration <s>        measured seconds per scenario and target (default 10)
  --warmup <s>          warm-up seconds before each measurement (default 2)
  --rounds <n>          measure each scenario n times, ceiling then server each time, each
                        round visiting every scenario, and report the round with the median
                        ratio (default 1; 3 or 5 on a noisy machine, where one 10 s pair can
                        be off by 10 points either way)
  --scenarios <list>    comma-separated, from: ${SCENARIO_NAMES.join(', ')} (default all);
                        --scenarios fairness alone runs bench/fairness.ts instead (npm run bench:fairness),
                        --scenarios failover bench/failover.ts on a Patroni cluster (npm run bench:failover)
  --workers <n>         the server's UGS_WORKERS: its processes sharing the port (default 1; the
                        ceiling stays one process)
  --rate-limited        count every request against a rate limit too high to refuse any (by
                        default the limits are off): what counting costs, with --workers above 1
                        a question to the primary per turn of a worker
  --database-url <url>  postgres://… : a fresh database is created next to this one and dropped
                        afterwards (default: a fresh SQLite file in the temp directory)
  --log-level <level>   the server's LOG_LEVEL (default info; its stdout goes nowhere)
  --analyze             PostgreSQL: ANALYZE the tables after seeding (by default they are measured
                        as the API leaves them, without statistics)
  --plain-index         make the index an operator adds first, (account_id, environment, team_id) on
                        user_groups, on the live table once the server runs and is primed: what it
                        does to the plans (docs/operations.md, "Indexes you may add")
  --no-prime            skip priming (by default every seeded group is asked for once before
                        measuring, as a long-running instance has: its opened-token cache is warm)
  --results-dir <dir>   where the JSON goes (default bench/results)`;

const EMBED_SAMPLE = 10_000;
/** --rate-limited: a limit no run reaches (the most UGS_RATE_LIMIT_MAX takes). */
const UNREACHABLE_LIMIT = 100_000_000;
/** Embed tokens of each algorithm the embed-jws-* and introspect scenarios pick from: each is verified once, then remembered. */
const JWS_SAMPLE = 2_000;
const ROTATE_GROUPS_PER_CONNECTION = 4; // each stop of autocannon strands up to one group per connection

interface Options {
  groups: number;
  connections: number;
  duration: number;
  warmup: number;
  rounds: number;
  scenarios: string[];
  databaseUrl: string | undefined;
  workers: number;
  rateLimited: boolean;
  logLevel: string;
  resultsDir: string;
  prime: boolean;
  analyze: boolean;
  plainIndex: boolean;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      groups: { type: 'string', default: '100000' },
      connections: { type: 'string', default: '50' },
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      rounds: { type: 'string', default: '1' },
      scenarios: { type: 'string', default: SCENARIO_NAMES.join(',') },
      'database-url': { type: 'string' },
      workers: { type: 'string', default: '1' },
      'rate-limited': { type: 'boolean', default: false },
      'log-level': { type: 'string', default: 'info' },
      'results-dir': { type: 'string', default: path.join(REPO_ROOT, 'bench/results') },
      'no-prime': { type: 'boolean', default: false },
      analyze: { type: 'boolean', default: false },
      'plain-index': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const positive = (name: string, raw: string, min = 1) => {
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be an integer >= ${min}, got "${raw}"`);
    return value;
  };
  const scenarios = values
    .scenarios!.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  scenarios.forEach(scenarioByName); // throws on an unknown name
  return {
    groups: positive('groups', values.groups!),
    connections: positive('connections', values.connections!),
    duration: positive('duration', values.duration!),
    warmup: positive('warmup', values.warmup!, 0),
    rounds: positive('rounds', values.rounds!),
    scenarios,
    databaseUrl: values['database-url'],
    workers: positive('workers', values.workers!),
    rateLimited: values['rate-limited']!,
    logLevel: values['log-level']!,
    resultsDir: path.resolve(values['results-dir']!),
    prime: !values['no-prime'],
    analyze: values.analyze!,
    plainIndex: values['plain-index']!,
  };
}

interface ScenarioOutcome {
  name: string;
  description: string;
  request: string;
  skipped?: string;
  responseStatus?: number;
  responseBytes?: number;
  server?: LoadResult;
  ceiling?: LoadResult;
  /** server requests/s divided by ceiling requests/s (of the median round, with --rounds). */
  ratio?: number;
  /** Groups written per second (scenarios that write groups: requests/s times groups per request). */
  groupsPerSecond?: number;
  /** The connections it was measured with, when fewer than --connections (the scenario's maxConnections). */
  connections?: number;
  /** With --rounds above 1: every round, in order; server, ceiling and ratio above are the median one's. */
  rounds?: Round[];
  /** CPU time of the server's processes per request answered (warm-up included), of the median round. */
  serverCpu?: ServerCpu;
  /** A mixed-load scenario (pagerLimit): the server alone and while one client pages through every group, of the median round. */
  paging?: Paging;
}

interface Paging {
  /** The same requests against the server with nothing else running. */
  alone: LoadResult;
  aloneP99Ms: number;
  /** While the pager ran (the `server` result). */
  withPagerP99Ms: number;
  /** withPagerP99Ms / aloneP99Ms: the target is at most 2. */
  p99Ratio: number;
  pagerLimit: number;
  pagerPages: number;
  pagerPasses: number;
}

interface ServerCpu {
  msPerRequest: number;
  /** With several workers: the primary's part of that CPU time (it accepts connections and counts rate limits). */
  primaryShare: number;
  /** PostgreSQL: the CPU time of the backends serving the server per request (null on SQLite, which runs inside the server, or a database on another machine). */
  databaseMsPerRequest: number | null;
  /** Statements the server sent per request: its round trips to the database (a batch counts once for all its requests). */
  statementsPerRequest: number;
  /** The ceiling's CPU time per request in the same round (warm-up included; its requests taken at the measurement's rate): rough. */
  ceilingMsPerRequest?: number;
}

/** Runs `measure` and says how much CPU the server's processes (and the database's) spent per request it answered meanwhile. */
async function withServerCpu<T>(server: RunningProcess, databaseUrl: string, measure: () => Promise<T>): Promise<[T, ServerCpu]> {
  const pids = processTree(server.pid);
  const [cpuBefore, answeredBefore, statementsBefore] = [cpuSeconds(pids), await requestsAnswered(server.url), await statementsSent(server.url)];
  const database = await startDatabaseCpu(databaseUrl);
  const result = await measure();
  const databaseSeconds = await database.stop();
  const [cpuAfter, answeredAfter, statementsAfter] = [cpuSeconds(pids), await requestsAnswered(server.url), await statementsSent(server.url)];
  const spent = (pid: number) => (cpuAfter.get(pid) ?? cpuBefore.get(pid) ?? 0) - (cpuBefore.get(pid) ?? 0);
  const total = pids.reduce((sum, pid) => sum + spent(pid), 0);
  const requests = Math.max(1, answeredAfter - answeredBefore - 2); // less the scrapes themselves
  return [
    result,
    {
      msPerRequest: (total * 1000) / requests,
      primaryShare: pids.length > 1 && total > 0 ? spent(server.pid) / total : 0,
      databaseMsPerRequest: databaseSeconds === null ? null : (databaseSeconds * 1000) / requests,
      statementsPerRequest: (statementsAfter - statementsBefore) / requests,
    },
  ];
}

/** Resident memory of the server's processes together (with several workers, the primary's and theirs). */
function serverMemoryKb(pid: number): ReturnType<typeof residentMemoryKb> {
  const each = processTree(pid)
    .map(residentMemoryKb)
    .filter((m) => m !== null);
  if (each.length === 0) return null;
  const sum = (field: keyof NonNullable<ReturnType<typeof residentMemoryKb>>) => each.reduce((total, m) => total + m[field], 0);
  return { rssKb: sum('rssKb'), peakRssKb: sum('peakRssKb'), anonKb: sum('anonKb'), fileKb: sum('fileKb') };
}

interface Round {
  ceilingRequestsPerSecond: number;
  serverRequestsPerSecond: number;
  ratio: number;
}

const log = (message: string) => process.stderr.write(`${message}\n`);
/** The connections a scenario is measured with: --connections, or fewer for one that sets its most (upsert). */
function connectionsOf(name: string, connections: number): number {
  return Math.min(connections, scenarioByName(name).maxConnections ?? Number.POSITIVE_INFINITY);
}

const fmt = (n: number | undefined, digits = 0) =>
  n === undefined || Number.isNaN(n) ? '-' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const badCount = (r: LoadResult | undefined) => (r ? r.errors + r.non2xx : undefined);

async function main() {
  const options = parseOptions();
  const startedAt = new Date();
  const loadBefore = os.loadavg();
  const runId = crypto.randomBytes(3).toString('hex');
  const secret = crypto.randomBytes(32);
  const keyring = new Keyring([secret]);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-bench-jobs-'));
  onCleanUp(async () => fs.rmSync(work, { recursive: true, force: true }));

  // 1. A fresh database, seeded.
  const database: BenchDatabase = await createBenchDatabase(options.databaseUrl);
  onCleanUp(() => database.drop());
  log(`database: ${database.description}`);
  // Every round's rotate measurement needs groups whose tokens no earlier round has rotated.
  const rotateCount = Math.min(options.connections * ROTATE_GROUPS_PER_CONNECTION, Math.max(1, Math.floor((options.groups - 2) / options.rounds)));
  const rotateSamples = rotateCount * options.rounds;
  const sampleSize = rotateSamples + 1 + EMBED_SAMPLE;
  let lastReport = 0;
  const seed = await seedDatabase(
    database.url,
    keyring,
    options.groups,
    sampleSize,
    (done) => {
      if (done - lastReport >= 100_000 || done === options.groups) {
        lastReport = done;
        log(`  seeded ${done.toLocaleString('en-US')} / ${options.groups.toLocaleString('en-US')} groups`);
      }
    },
    options.analyze,
  );
  log(`seeded ${options.groups.toLocaleString('en-US')} groups in ${seed.seconds.toFixed(1)} s`);
  const rotateTokensOfRound = (round: number) => seed.sampleTokens.slice(round * rotateCount, (round + 1) * rotateCount);
  const probeRotateToken = seed.sampleTokens[rotateSamples];
  const embedTokens = seed.sampleTokens.slice(rotateSamples + 1);
  if (embedTokens.length === 0 || probeRotateToken === undefined || rotateCount === 0) {
    throw new Error(
      `--groups ${options.groups} is too few for --connections ${options.connections} and --rounds ${options.rounds}: need more than ${rotateSamples + 1} groups`,
    );
  }
  // Create ids: unique per target and round, and of the same length for ceiling and server.
  const layout = benchLayout(options.groups);
  const jwsTokens: Partial<Record<EmbedSigningAlgorithm, string[]>> = {}; // minted by the server once it runs
  const dataFor = (target: 'c' | 's' | 'p', round: number, tokens = rotateTokensOfRound(round)): ScenarioData => ({
    groups: layout.flat,
    treeSize: layout.tree,
    childTokens: seed.childTokens,
    apiToken: seed.apiToken,
    embedTokens,
    jwsTokens,
    rotateTokens: tokens,
    deepCursor: cursorAfter(seed.deepAfterTeamId),
    createPrefix: `new-${runId}-${target}${round}-`,
  });

  // 2. The real server, as deployed: its own process, logging at LOG_LEVEL to a stdout nobody keeps.
  const server: RunningProcess = await startNodeProcess(
    'dist/server.js',
    {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: '0',
      DATABASE_URL: database.url,
      UGS_SECRET_KEY: secret.toString('base64'),
      UGS_BOOTSTRAP: 'false',
      UGS_RATE_LIMIT_MAX: options.rateLimited ? String(UNREACHABLE_LIMIT) : '0',
      UGS_EMBED_RATE_LIMIT_MAX: options.rateLimited ? String(UNREACHABLE_LIMIT) : '0',
      REDIS_URL: '',
      LOG_LEVEL: options.logLevel,
      UGS_WORKERS: String(options.workers),
    },
    /Server listening at (https?:\/\/[^"\s]+)/,
  );
  onCleanUp(() => server.stop());
  log(`server: ${server.url} (pid ${server.pid}${options.workers > 1 ? `, ${options.workers} workers` : ''})`);
  const memoryBefore = serverMemoryKb(server.pid);

  // 2b. Prime: every seeded group asked for once (see primeGroups), unless --no-prime.
  let primeSeconds: number | null = null;
  if (options.prime) {
    const primeStarted = performance.now();
    const failures = await primeGroups(server.url, seed.apiToken, options.groups);
    if (failures > 0) throw new Error(`priming: ${failures} of ${options.groups} get-or-create calls did not answer 200`);
    primeSeconds = (performance.now() - primeStarted) / 1000;
    log(`primed: every seeded group asked for once in ${primeSeconds.toFixed(1)} s`);
  }
  const memoryPrimed = serverMemoryKb(server.pid);
  // The server signs with one key at a time: a rotation whose key signs at once (what
  // `ugs keys embed rotate --alg <algorithm> --activate-in 0s` does) switches it. Every
  // earlier key stays published while its tokens live, so the tokens of each algorithm,
  // minted in turn, all stay valid for the whole run.
  let keysHandle: DatabaseHandle | undefined;
  const signWith = async (algorithm: EmbedSigningAlgorithm): Promise<void> => {
    if ((await signingAlgorithmOf(server.url, seed.apiToken)) === algorithm) return;
    if (!keysHandle) {
      keysHandle = (await openMigratedDatabase({ databaseUrl: database.url })).handle;
      const handle = keysHandle;
      onCleanUp(() => handle.close());
    }
    await rotateSigningKey(keysHandle, keyring, new Date(), 0, algorithm);
    // The server re-reads its key table when its copy is a second old.
    for (let waited = 0; (await signingAlgorithmOf(server.url, seed.apiToken)) !== algorithm; waited += 100) {
      if (waited > 10_000) throw new Error(`the server did not sign with ${algorithm} within 10 s of the rotation`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    log(`the server signs with ${algorithm}`);
  };
  const jwsAlgorithms = [...new Set(options.scenarios.map((name) => scenarioByName(name).jwsAlgorithm).filter((a) => a !== undefined))];
  for (const algorithm of jwsAlgorithms) {
    await signWith(algorithm);
    jwsTokens[algorithm] = await mintEmbedTokens(server.url, seed.apiToken, layout.flat, JWS_SAMPLE);
    log(`minted ${JWS_SAMPLE.toLocaleString('en-US')} ${algorithm} embed tokens`);
  }

  // 2c. --plain-index: the operator's index, made on the live table while the server runs.
  if (options.plainIndex) {
    const started = performance.now();
    await makePlainIndex(database.url);
    log(`made the plain index on the live table in ${((performance.now() - started) / 1000).toFixed(1)} s: ${PLAIN_INDEX}`);
  }

  // 3. One real response per scenario: what the ceiling will answer.
  const outcomes: ScenarioOutcome[] = [];
  const canned: Record<string, ProbeResponse> = {};
  for (const name of options.scenarios) {
    const scenario = scenarioByName(name);
    const outcome: ScenarioOutcome = { name, description: scenario.description, request: `${scenario.method} ${scenario.path}` };
    outcomes.push(outcome);
    if (scenario.signingAlgorithm) await signWith(scenario.signingAlgorithm);
    const runner = scenario.make(dataFor('p', 0, [probeRotateToken]));
    const request = runner.next({})!;
    const response = await httpRequest(server.url, request);
    outcome.responseStatus = response.status;
    outcome.responseBytes = Buffer.byteLength(response.body);
    if (response.status !== scenario.status) {
      outcome.skipped =
        name === 'embed' && response.status === 404
          ? 'GET /api/embed/context answers 404: the embed route is not there'
          : `a probe request answered ${response.status} instead of ${scenario.status}: ${response.body.slice(0, 300)}`;
      log(`skipping ${name}: ${outcome.skipped}`);
      continue;
    }
    canned[name] = response;
  }

  // 4. The ceiling, with those responses.
  const ceiling = await startNodeProcess('bench/ceiling.ts', { ...process.env, HOST: '127.0.0.1', PORT: '0' }, /ceiling listening at (\S+)/);
  onCleanUp(() => ceiling.stop());
  const loaded = await httpRequest(ceiling.url, {
    method: 'PUT',
    path: '/__ceiling/responses',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(canned),
  });
  if (loaded.status !== 200) throw new Error(`the ceiling refused its responses: ${loaded.status} ${loaded.body}`);
  log(`ceiling: ${ceiling.url} (pid ${ceiling.pid})`);

  // 5. Round by round, scenario by scenario: the ceiling, then the server, so both see the same
  // machine state; and each round visits every scenario, so a machine that slows down for a
  // minute weighs on every scenario's rounds alike instead of on one scenario.
  const rounds = options.rounds > 1 ? `${options.rounds} rounds × ` : '';
  log(
    `running ${outcomes.filter((o) => !o.skipped).length} scenarios × ${rounds}2 targets × (${options.warmup} s warm-up + ${options.duration} s), ${options.connections} connections`,
  );
  const measured = new Map<ScenarioOutcome, { ceiling: LoadResult; server: LoadResult; ratio: number; cpu: ServerCpu; paging?: Paging }[]>();
  for (let round = 0; round < options.rounds; round++) {
    for (const outcome of outcomes) {
      if (outcome.skipped) continue;
      const activated = await httpRequest(ceiling.url, {
        method: 'PUT',
        path: '/__ceiling/active',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ scenario: outcome.name }),
      });
      if (activated.status !== 200) throw new Error(`the ceiling could not switch to ${outcome.name}: ${activated.body}`);
      const job = {
        scenario: outcome.name,
        connections: connectionsOf(outcome.name, options.connections),
        durationSeconds: options.duration,
        warmupSeconds: options.warmup,
      };
      const ceilingCpuBefore = cpuSeconds([ceiling.pid]).get(ceiling.pid) ?? 0;
      const ceilingResult = await runLoad(path.join(work, `${outcome.name}-${round}-ceiling.json`), { ...job, url: ceiling.url, data: dataFor('c', round) });
      // Warm-up included, as for the server; its requests counted at the measurement's rate (the ceiling keeps no count).
      const ceilingCpuMsPerRequest =
        (((cpuSeconds([ceiling.pid]).get(ceiling.pid) ?? 0) - ceilingCpuBefore) * 1000) /
        Math.max(1, ceilingResult.requestsPerSecond * (job.warmupSeconds + job.durationSeconds));
      const { signingAlgorithm, pagerLimit } = scenarioByName(outcome.name);
      if (signingAlgorithm) await signWith(signingAlgorithm);
      // A mixed load: the server alone first, then the same load while one client pages through every group.
      const alone =
        pagerLimit === undefined
          ? undefined
          : await runLoad(path.join(work, `${outcome.name}-${round}-alone.json`), { ...job, url: server.url, data: dataFor('s', round) });
      const pager = pagerLimit === undefined ? undefined : pageThroughEveryGroup(server.url, seed.apiToken, pagerLimit);
      const [serverResult, cpu] = await withServerCpu(server, database.url, () =>
        runLoad(path.join(work, `${outcome.name}-${round}-server.json`), { ...job, url: server.url, data: dataFor('s', round) }),
      );
      const paged = await pager?.stop();
      const paging: Paging | undefined =
        alone && paged && pagerLimit !== undefined
          ? {
              alone,
              aloneP99Ms: alone.latencyP99Ms,
              withPagerP99Ms: serverResult.latencyP99Ms,
              p99Ratio: serverResult.latencyP99Ms / alone.latencyP99Ms,
              pagerLimit,
              pagerPages: paged.pages,
              pagerPasses: paged.passes,
            }
          : undefined;
      if (server.child.exitCode !== null || server.child.signalCode !== null) {
        throw new Error(`the server exited during ${outcome.name}:\n${server.stderrTail()}`);
      }
      const ratio = serverResult.requestsPerSecond / ceilingResult.requestsPerSecond;
      measured.set(outcome, [
        ...(measured.get(outcome) ?? []),
        { ceiling: ceilingResult, server: serverResult, ratio, cpu: { ...cpu, ceilingMsPerRequest: ceilingCpuMsPerRequest }, paging },
      ]);
      if (job.connections < options.connections) outcome.connections = job.connections;
      log(
        `  ${outcome.name}${options.rounds > 1 ? ` (round ${round + 1})` : ''}${job.connections < options.connections ? ` (${job.connections} connections)` : ''}: server ${fmt(serverResult.requestsPerSecond)} req/s ` +
          `(p99 ${fmt(serverResult.latencyP99Ms)} ms, ${badCount(serverResult)} bad, CPU ${fmt(cpu.msPerRequest, 3)} ms/request, ` +
          `${cpu.databaseMsPerRequest === null ? '' : `database CPU ${fmt(cpu.databaseMsPerRequest, 3)} ms/request, `}${fmt(cpu.statementsPerRequest, 2)} statements/request, ` +
          `load generator CPU ${fmt(serverResult.cpuMsPerRequest, 3)} ms/request), ` +
          `ceiling ${fmt(ceilingResult.requestsPerSecond)} req/s (CPU ${fmt(ceilingCpuMsPerRequest, 3)} ms/request, load generator ${fmt(ceilingResult.cpuMsPerRequest, 3)}): ${(ratio * 100).toFixed(1)} %`,
      );
      if (paging) log(`    ${pagingLine(paging)}`);
    }
  }
  for (const [outcome, results] of measured) {
    // The median round (the lower middle one for an even count): one outlier pair cannot move it.
    const median = [...results].sort((a, b) => a.ratio - b.ratio)[Math.floor((results.length - 1) / 2)];
    outcome.ceiling = median.ceiling;
    outcome.server = median.server;
    outcome.ratio = median.ratio;
    outcome.serverCpu = median.cpu;
    outcome.paging = median.paging;
    const perRequest = scenarioByName(outcome.name).groupsPerRequest;
    if (perRequest !== undefined) outcome.groupsPerSecond = median.server.requestsPerSecond * perRequest;
    if (results.length > 1) {
      outcome.rounds = results.map((m) => ({
        ceilingRequestsPerSecond: m.ceiling.requestsPerSecond,
        serverRequestsPerSecond: m.server.requestsPerSecond,
        ratio: m.ratio,
      }));
    }
  }
  const memoryAfter = serverMemoryKb(server.pid);
  const loadAfter = os.loadavg();
  const statistics = await plannerStatistics(database.url);
  await cleanUp();

  // 6. The report.
  const report = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    backend: database.backend,
    groups: options.groups,
    connections: options.connections,
    durationSeconds: options.duration,
    warmupSeconds: options.warmup,
    rounds: options.rounds,
    workers: options.workers,
    rateLimited: options.rateLimited,
    logLevel: options.logLevel,
    commit: gitDescription(REPO_ROOT),
    machine: {
      node: process.version,
      platform: `${os.type()} ${os.release()} ${os.arch()}`,
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? 'unknown',
      memoryMb: Math.round(os.totalmem() / 1024 / 1024),
      loadAverageBefore: loadBefore.map((n) => Number(n.toFixed(2))),
      loadAverageAfter: loadAfter.map((n) => Number(n.toFixed(2))),
    },
    seedSeconds: Number(seed.seconds.toFixed(1)),
    /** PostgreSQL: whether user_groups had planner statistics at the end of the run (by --analyze or autovacuum). */
    plannerStatistics: statistics,
    /** --plain-index: the index made on the live table before the probes, or null. */
    plainIndex: options.plainIndex ? PLAIN_INDEX : null,
    primed: options.prime,
    primeSeconds: primeSeconds === null ? null : Number(primeSeconds.toFixed(1)),
    serverMemory: {
      rssKbBeforeRun: memoryBefore?.rssKb ?? null,
      rssKbAfterPriming: memoryPrimed?.rssKb ?? null,
      rssKbAfterRun: memoryAfter?.rssKb ?? null,
      peakRssKb: memoryAfter?.peakRssKb ?? null,
      /** Of rssKbAfterRun: anonymous memory (the process's own) and file pages (the mapped database). */
      anonKbAfterRun: memoryAfter?.anonKb ?? null,
      fileKbAfterRun: memoryAfter?.fileKb ?? null,
    },
    scenarios: outcomes,
  };
  printTable(report.scenarios);
  console.log(
    `\nserver resident memory (VmRSS${options.workers > 1 ? `, its ${options.workers + 1} processes together` : ''}): ${fmt((memoryBefore?.rssKb ?? NaN) / 1024, 1)} MiB after seeding and start, ` +
      (options.prime ? `${fmt((memoryPrimed?.rssKb ?? NaN) / 1024, 1)} MiB after priming, ` : '') +
      `${fmt((memoryAfter?.rssKb ?? NaN) / 1024, 1)} MiB after the run (peak VmHWM ${fmt((memoryAfter?.peakRssKb ?? NaN) / 1024, 1)} MiB); ` +
      `after the run ${fmt((memoryAfter?.anonKb ?? NaN) / 1024, 1)} MiB of it anonymous (the process's own) and ` +
      `${fmt((memoryAfter?.fileKb ?? NaN) / 1024, 1)} MiB file pages (code and the memory-mapped database: the shared page cache)`,
  );
  if (statistics)
    console.log(
      `PostgreSQL planner statistics on user_groups at the end: ${statistics.analyzed ? `yes (${statistics.lastAnalyze ? 'ANALYZE' : 'autovacuum'})` : 'none (never analyzed)'}` +
        `; autovacuum ${statistics.autovacuum.server ? 'on' : 'off'} on the server, ${statistics.autovacuum.table ? 'on' : 'off'} for the bench's tables`,
    );
  console.log(
    `load average before/after: ${report.machine.loadAverageBefore.join(' ')} / ${report.machine.loadAverageAfter.join(' ')} on ${report.machine.cpus} CPUs`,
  );
  if (loadBefore[0] > os.cpus().length * 0.25) console.log('warning: the machine was busy when the run started; numbers are not comparable');

  const first = outcomes.find((o) => o.name === 'list-first')?.server;
  const deep = outcomes.find((o) => o.name === 'list-deep')?.server;
  if (first && deep) {
    console.log(
      `\nlisting: a page 90 % deep runs at ${((deep.requestsPerSecond / first.requestsPerSecond) * 100).toFixed(1)} % of the first page's requests/s ` +
        `(p50 ${fmt(deep.latencyP50Ms)} vs ${fmt(first.latencyP50Ms)} ms)`,
    );
  }

  fs.mkdirSync(options.resultsDir, { recursive: true });
  const file = path.join(
    options.resultsDir,
    `${database.backend}${statistics?.analyzed ? '-analyzed' : ''}${options.plainIndex ? '-plain-index' : ''}${options.workers > 1 ? `-${options.workers}workers` : ''}-${options.groups}-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`,
  );
  fs.writeFileSync(file, JSON.stringify(report, null, 2) + '\n');
  console.log(`\nwritten: ${path.relative(process.cwd(), file)}`);
  printScaleComparison(options.resultsDir, database.backend, options.workers);
}

function printTable(outcomes: ScenarioOutcome[]) {
  const header = [
    'scenario',
    'req/s',
    'groups/s',
    'p50 ms',
    'p99 ms',
    'errors+non-2xx',
    'ceiling req/s',
    'ceiling p99 ms',
    'vs ceiling',
    'response B',
    'CPU ms/req',
    'DB CPU ms/req',
    'stmts/req',
  ];
  const rows = outcomes.map((o) =>
    o.skipped
      ? [o.name, `skipped: ${o.skipped}`]
      : [
          o.name,
          fmt(o.server?.requestsPerSecond),
          o.groupsPerSecond === undefined ? '-' : fmt(o.groupsPerSecond),
          fmt(o.server?.latencyP50Ms),
          fmt(o.server?.latencyP99Ms),
          fmt(badCount(o.server)),
          fmt(o.ceiling?.requestsPerSecond),
          fmt(o.ceiling?.latencyP99Ms),
          o.ratio === undefined ? '-' : `${(o.ratio * 100).toFixed(1)} %`,
          fmt(o.responseBytes),
          fmt(o.serverCpu?.msPerRequest, 3),
          fmt(o.serverCpu?.databaseMsPerRequest ?? undefined, 3),
          fmt(o.serverCpu?.statementsPerRequest, 2),
        ],
  );
  const widths = header.map((h, i) => Math.max(h.length, ...rows.filter((r) => r.length > 2).map((r) => r[i]?.length ?? 0)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log('\n' + line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of rows) console.log(row.length === 2 ? `${row[0].padEnd(widths[0])}  ${row[1]}` : line(row));
  for (const o of outcomes.filter((o) => o.paging)) console.log(`${o.name}: ${pagingLine(o.paging!)}`);
  for (const o of outcomes.filter((o) => o.rounds)) {
    console.log(`${o.name}: vs ceiling by round ${o.rounds!.map((r) => `${(r.ratio * 100).toFixed(1)} %`).join(', ')} (the median is in the table)`);
  }
}

function pagingLine(paging: Paging): string {
  return (
    `p99 ${fmt(paging.aloneP99Ms)} ms alone (${fmt(paging.alone.requestsPerSecond)} req/s), ${fmt(paging.withPagerP99Ms)} ms while one client paged ` +
    `(limit=${paging.pagerLimit}: ${fmt(paging.pagerPages)} pages, ${paging.pagerPasses} passes through every group): ${paging.p99Ratio.toFixed(2)}× (target at most 2×)`
  );
}

/** The latest result (with a hit scenario) per group count for this backend: does a bigger table slow the hot paths? */
function printScaleComparison(dir: string, backend: string, workers: number) {
  const latest = new Map<number, { file: string; report: { startedAt: string; groups: number; scenarios: ScenarioOutcome[] } }>();
  for (const file of fs.readdirSync(dir).filter((f) => f.startsWith(`${backend}-`) && f.endsWith('.json'))) {
    try {
      const report = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
      // Only runs that measured a hit scenario say anything about scale; analyzed runs are another state.
      if (!report.scenarios?.some((s: ScenarioOutcome) => s.name.startsWith('hit') && s.server)) continue;
      if (report.plannerStatistics?.analyzed || report.plainIndex) continue;
      if ((report.workers ?? 1) !== workers) continue; // more processes: another machine, in effect
      const known = latest.get(report.groups);
      if (!known || known.report.startedAt < report.startedAt) latest.set(report.groups, { file, report });
    } catch {
      // not a result file
    }
  }
  if (latest.size < 2) {
    console.log(`(scale comparison: run again with another --groups to compare; e.g. --groups 1000000 against the default 100000)`);
    return;
  }
  const columns = ['hit', 'hit-query', 'embed', 'update', 'list-first', 'list-q', 'list-deep'];
  console.log(`\nscale (${backend}, server req/s; latest run per group count in ${path.relative(process.cwd(), dir) || '.'}):`);
  console.log(['groups'.padStart(10), ...columns.map((c) => c.padStart(11)), '  file'].join(''));
  for (const [groups, { file, report }] of [...latest].sort((a, b) => a[0] - b[0])) {
    const cell = (name: string) => fmt(report.scenarios.find((s) => s.name === name)?.server?.requestsPerSecond).padStart(11);
    console.log([groups.toLocaleString('en-US').padStart(10), ...columns.map(cell), `  ${file}`].join(''));
  }
}

/**
 * `--scenarios fairness` and `--scenarios failover` are not scenarios of this run (a load
 * against the server and the ceiling) but runs of their own, bench/fairness.ts and
 * bench/failover.ts: the other options go to them.
 */
function ownRunArguments(argv: string[]): { run: 'fairness' | 'failover'; args: string[] } | undefined {
  const at = argv.findIndex((arg) => arg === '--scenarios' || arg.startsWith('--scenarios='));
  if (at === -1) return undefined;
  const value = argv[at].includes('=') ? argv[at].slice('--scenarios='.length) : argv[at + 1];
  if (value !== 'fairness' && value !== 'failover') return undefined;
  return { run: value, args: argv.filter((_, i) => i !== at && !(i === at + 1 && !argv[at].includes('='))) };
}

const ownRun = ownRunArguments(process.argv.slice(2));
(ownRun?.run === 'fairness'
  ? import('./fairness.ts').then((run) => run.main(ownRun.args))
  : ownRun?.run === 'failover'
    ? import('./failover.ts').then((run) => run.main(ownRun.args))
    : main()
).catch(async (err) => {
  if (!wasInterrupted()) console.error(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : err}`);
  await cleanUp();
  process.exit(wasInterrupted() ? 130 : 1);
});
