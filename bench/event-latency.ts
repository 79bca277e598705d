// `npm run bench:events [-- options]`: how soon a change reaches the readers of change events
// (docs/api.md, "Change events"), and what the events cost the writes (docs/performance.md,
// "Change events: latency and write cost").
//
// Seeds a fresh database (as bench/run.ts does), starts the real compiled server (one instance,
// or two on the same database), then makes --rate changes per second for --duration seconds
// (PUT /api/user on instance A, spread evenly in time, one change in flight per group at a
// time) and measures, per reader, the time from the PUT's 2xx answer to the event's arrival:
//   - stream:  GET /api/events/stream (Server-Sent Events) on instance B (A with one instance);
//   - webhook: a webhook endpoint pointing to a node:http receiver in this process;
//   - feed:    GET /api/events on instance B polled every --poll-ms (100) ms, the baseline.
// A reader whose route answers 404 is skipped with a note (the script runs on a commit without it).
// Events are matched to changes by data.user_group_id and position: the k-th event of a group
// is its k-th acknowledged change (a group is changed again only once its last change was
// answered, and two changes to one group come in the order they were made).
// Before and after, a closed-loop run of PUT /api/user at full speed (autocannon, bench/load.ts,
// the `update` scenario) gives the write throughput without and with those readers attached.
import { cleanUp, gitDescription, onCleanUp, wasInterrupted } from './cleanup.ts';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Keyring } from '../src/crypto/keyring.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { issueApiToken } from '../src/api-tokens/api-tokens.service.ts';
import { createBenchDatabase, seedDatabase, type BenchDatabase } from './seed.ts';
import { REPO_ROOT, httpRequest, residentMemoryKb, runLoad, startNodeProcess, type RunningProcess } from './processes.ts';
import type { ScenarioData } from './scenarios.ts';
import type { LoadResult } from './load.ts';

const USAGE = `npm run bench:events -- [options]
  --database-url <url>  postgres://… : a fresh database is created next to this one and dropped
                        afterwards (default: a fresh SQLite file in the temp directory)
  --rate <n>            changes per second during the latency run (default 500)
  --duration <s>        seconds of changes (default 10)
  --instances <1|2>     server instances on the same database (default 1); with 2 the changes
                        go to A and the stream and the feed are read on B
  --groups <n>          groups the changes go to (default 300; as many again are seeded for the
                        throughput runs)
  --poll-ms <ms>        the feed reader's polling interval (default 100)
  --drain <s>           after the last answer, how long to wait for the readers to catch up (default 60)
  --connections <n>     autocannon connections of the throughput runs (default 50)
  --write-duration <s>  measured seconds of each throughput run; 0 skips them (default 10)
  --warmup <s>          warm-up seconds before each throughput run (default 2)
  --log-level <level>   the servers' LOG_LEVEL (default info; their stdout goes nowhere)
  --label <text>        prefixes the result file's name and is kept in it (e.g. before-<commit>, for
                        a run of an earlier commit's tree)
  --results-dir <dir>   where the JSON goes (default bench/results)`;

interface Options {
  databaseUrl: string | undefined;
  rate: number;
  duration: number;
  instances: 1 | 2;
  groups: number;
  pollMs: number;
  drainSeconds: number;
  connections: number;
  writeDuration: number;
  warmup: number;
  logLevel: string;
  label: string | undefined;
  resultsDir: string;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      'database-url': { type: 'string' },
      rate: { type: 'string', default: '500' },
      duration: { type: 'string', default: '10' },
      instances: { type: 'string', default: '1' },
      groups: { type: 'string', default: '300' },
      'poll-ms': { type: 'string', default: '100' },
      drain: { type: 'string', default: '60' },
      connections: { type: 'string', default: '50' },
      'write-duration': { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
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
  const instances = integer('instances', values.instances!, 1);
  if (instances > 2) throw new Error(`--instances must be 1 or 2, got ${instances}`);
  return {
    databaseUrl: values['database-url'],
    rate: integer('rate', values.rate!, 1),
    duration: integer('duration', values.duration!, 1),
    instances: instances as 1 | 2,
    groups: integer('groups', values.groups!, 1),
    pollMs: integer('poll-ms', values['poll-ms']!, 1),
    drainSeconds: integer('drain', values.drain!, 0),
    connections: integer('connections', values.connections!, 1),
    writeDuration: integer('write-duration', values['write-duration']!, 0),
    warmup: integer('warmup', values.warmup!, 0),
    logLevel: values['log-level']!,
    label: values.label,
    resultsDir: path.resolve(values['results-dir']!),
  };
}

// ---------------------------------------------------------------------------------------------
// Changes and what the readers received

/** The event object (docs/api.md, "Change events"): the same in the feed, the stream and a webhook delivery. */
interface ChangeEvent {
  id: number;
  type: string;
  occurred_at: string;
  account: string;
  data: { user_group_id?: string; [key: string]: unknown };
}

interface Change {
  group: string;
  sentAt: number;
  ackAt?: number;
  status?: number;
  /** Network error: whether it committed is unknown, so its group is left out of the results. */
  error?: string;
}

type ReaderName = 'stream' | 'webhook' | 'feed';

/** What one reader received: per measured group, the arrival times of its events in order. */
class Reader {
  skipped: string | undefined;
  /** Set when the reader stopped before the end (stream closed, poll failing). */
  failure: string | undefined;
  readonly arrivals = new Map<string, number[]>();
  readonly seenIds = new Set<number>();
  duplicates = 0;
  /** Events outside the measurement: other types, other groups, ids at or below the starting point. */
  ignored = 0;
  matched = 0;
  /** Whether events are counted (the latency run and its drain); after that they are only ignored. */
  active = false;

  constructor(
    readonly name: ReaderName,
    readonly where: string,
    private readonly measured: ReadonlySet<string>,
    private readonly startSeq: () => number,
  ) {}

  receive(event: ChangeEvent, at: number): void {
    const group = event.data?.user_group_id;
    if (!this.active || event.type !== 'user_group.updated' || typeof group !== 'string' || !this.measured.has(group) || event.id <= this.startSeq()) {
      this.ignored++;
      return;
    }
    if (this.seenIds.has(event.id)) {
      this.duplicates++;
      return;
    }
    this.seenIds.add(event.id);
    this.matched++;
    const list = this.arrivals.get(group);
    if (list) list.push(at);
    else this.arrivals.set(group, [at]);
  }
}

function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

interface LatencySummary {
  count: number;
  p50: number | null;
  p90: number | null;
  p99: number | null;
  max: number | null;
  mean: number | null;
  min: number | null;
}

function summarize(values: number[]): LatencySummary {
  const sorted = [...values].sort((a, b) => a - b);
  const round = (n: number | null) => (n === null ? null : Number(n.toFixed(2)));
  return {
    count: sorted.length,
    p50: round(percentile(sorted, 50)),
    p90: round(percentile(sorted, 90)),
    p99: round(percentile(sorted, 99)),
    max: round(sorted.at(-1) ?? null),
    mean: round(sorted.length ? sorted.reduce((a, b) => a + b, 0) / sorted.length : null),
    min: round(sorted[0] ?? null),
  };
}

// ---------------------------------------------------------------------------------------------
// The readers

/** The event-loop delay histogram records each timer interval whole: the delay is what exceeds this. */
const LOOP_RESOLUTION_MS = 10;
const loopMs = (ns: number) => Number(Math.max(0, ns / 1e6 - LOOP_RESOLUTION_MS).toFixed(2));

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Opens the SSE stream; resolves once its answer's headers are in: a skip reason, or null when it streams. */
function openStream(baseUrl: string, token: string, reader: Reader, onClose: () => void): { request: http.ClientRequest; opened: Promise<string | null> } {
  let request!: http.ClientRequest;
  const opened = new Promise<string | null>((resolve) => {
    request = http.get(
      new URL('/api/events/stream', baseUrl),
      { headers: { authorization: `Token ${token}`, accept: 'text/event-stream' }, agent: false },
      (res) => {
        if (res.statusCode !== 200) {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () =>
            resolve(
              res.statusCode === 404
                ? 'GET /api/events/stream answers 404: the stream route is not there'
                : `GET /api/events/stream answered ${res.statusCode}: ${body.slice(0, 300)}`,
            ),
          );
          return;
        }
        resolve(null);
        let buffer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          const at = performance.now();
          buffer += chunk.replace(/\r\n?/g, '\n');
          for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let type = 'message';
            const data: string[] = [];
            for (const line of block.split('\n')) {
              if (line.startsWith(':')) continue; // a comment: heartbeat
              const colon = line.indexOf(':');
              const field = colon === -1 ? line : line.slice(0, colon);
              const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
              if (field === 'event') type = value;
              else if (field === 'data') data.push(value);
            }
            if (data.length === 0 || type === 'shutdown') continue;
            try {
              reader.receive(JSON.parse(data.join('\n')) as ChangeEvent, at);
            } catch {
              reader.failure ??= `an event's data is not JSON: ${data.join('\n').slice(0, 200)}`;
            }
          }
        });
        res.on('close', onClose);
      },
    );
    request.on('error', (err) => {
      reader.failure ??= `the stream failed: ${err.message}`;
      resolve(`GET /api/events/stream failed: ${err.message}`);
    });
  });
  return { request, opened };
}

/** Whether a Standard Webhooks signature header holds a `v1,` signature of this message under the secret. */
function signatureValid(secret: string, id: string, timestamp: string, body: string, header: string): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = Buffer.from(crypto.createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64'));
  return header.split(' ').some((candidate) => {
    if (!candidate.startsWith('v1,')) return false;
    const given = Buffer.from(candidate.slice(3));
    return given.length === expected.length && crypto.timingSafeEqual(given, expected);
  });
}

interface WebhookReceiver {
  url: string;
  deliveries: number;
  badSignatures: number;
  /** Deliveries whose webhook-id had come before (a retry of a delivery already received). */
  repeatedIds: number;
  secret: string | undefined;
  close(): Promise<void>;
}

async function startWebhookReceiver(reader: Reader): Promise<WebhookReceiver> {
  const ids = new Set<string>();
  const receiver: WebhookReceiver = { url: '', deliveries: 0, badSignatures: 0, repeatedIds: 0, secret: undefined, close: async () => undefined };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const at = performance.now();
      res.writeHead(204).end();
      receiver.deliveries++;
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(req.headers['webhook-id'] ?? '');
      if (ids.has(id)) receiver.repeatedIds++;
      ids.add(id);
      if (
        receiver.secret &&
        !signatureValid(receiver.secret, id, String(req.headers['webhook-timestamp'] ?? ''), body, String(req.headers['webhook-signature'] ?? ''))
      ) {
        receiver.badSignatures++;
      }
      try {
        reader.receive(JSON.parse(body) as ChangeEvent, at);
      } catch {
        reader.failure ??= `a delivery's body is not JSON: ${body.slice(0, 200)}`;
      }
    });
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ugs-webhooks`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return receiver;
}

/** One page of the feed after `after`; null when the route answers 404. */
async function feedPage(
  baseUrl: string,
  token: string,
  after: number,
  agent: http.Agent,
  types?: string,
): Promise<{ events: ChangeEvent[]; nextCursor: number; at: number } | null> {
  const query = `after=${after}&limit=500${types ? `&types=${types}` : ''}`;
  const res = await httpRequest(baseUrl, { method: 'GET', path: `/api/events?${query}`, headers: { authorization: `Token ${token}` } }, agent);
  const at = performance.now();
  if (res.status === 404) return null;
  if (res.status !== 200) throw new Error(`GET /api/events?${query} answered ${res.status}: ${res.body.slice(0, 300)}`);
  const page = JSON.parse(res.body) as { events: ChangeEvent[]; next_cursor: string };
  return { events: page.events, nextCursor: Number(page.next_cursor), at };
}

/** The newest event id in the feed (pages through it); null without a feed. */
async function feedHead(baseUrl: string, token: string, agent: http.Agent): Promise<number | null> {
  let cursor = 0;
  for (;;) {
    const page = await feedPage(baseUrl, token, cursor, agent);
    if (!page) return null;
    cursor = Math.max(cursor, page.nextCursor);
    if (page.events.length < 500) return cursor;
  }
}

/** Waits until the feed's head stops moving (the sequencer has moved the outbox): the starting point of the measurement. */
async function quietHead(baseUrl: string, token: string, agent: http.Agent): Promise<number | null> {
  let last = await feedHead(baseUrl, token, agent);
  if (last === null) return null;
  for (let waited = 0; waited < 30_000; waited += 500) {
    await sleep(500);
    const head = (await feedHead(baseUrl, token, agent))!;
    if (head === last) return head;
    last = head;
  }
  return last;
}

/** Polls the feed every pollMs (at once again after a full page) until stopped. */
function pollFeed(baseUrl: string, token: string, reader: Reader, startSeq: number, pollMs: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let stopped = false;
  let polls = 0;
  const done = (async () => {
    let cursor = startSeq;
    while (!stopped) {
      const started = performance.now();
      try {
        const page = await feedPage(baseUrl, token, cursor, agent, 'user_group.updated');
        polls++;
        if (!page) throw new Error('GET /api/events answered 404');
        for (const event of page.events) reader.receive(event, page.at);
        cursor = Math.max(cursor, page.nextCursor);
        if (page.events.length === 500) continue;
      } catch (err) {
        reader.failure ??= `polling failed: ${(err as Error).message}`;
      }
      const wait = started + pollMs - performance.now();
      if (wait > 0) await sleep(wait);
    }
  })();
  return {
    polls: () => polls,
    stop: async () => {
      stopped = true;
      await done;
      agent.destroy();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The writer: `rate` changes per second, evenly spread, one in flight per group at a time

interface WriterResult {
  planned: number;
  sent: number;
  ok: number;
  non2xx: number;
  errors: number;
  /** Changes not sent because every group had a change in flight (the server fell far behind). */
  notSentAllGroupsBusy: number;
  sendWindowSeconds: number;
  achievedRatePerSecond: number;
  ackLatencyMs: LatencySummary;
  statusCodes: Record<string, number>;
}

async function writeChanges(baseUrl: string, token: string, groups: string[], rate: number, durationSeconds: number, changes: Map<string, Change[]>) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const free = [...groups];
  const planned = rate * durationSeconds;
  const interval = 1000 / rate;
  const inFlight = new Set<Promise<void>>();
  const statusCodes: Record<string, number> = {};
  let sent = 0;
  let notSent = 0;
  let counter = 0;
  const send = () => {
    const group = free.shift();
    if (group === undefined) {
      notSent++;
      return;
    }
    const change: Change = { group, sentAt: performance.now() };
    changes.get(group)!.push(change);
    sent++;
    const body = JSON.stringify({ user_group_id: group, properties: { region: 'emea', plan: 'pro', seats: 1, bench_change: counter++ } });
    const request = httpRequest(
      baseUrl,
      { method: 'PUT', path: '/api/user', headers: { authorization: `Token ${token}`, 'content-type': 'application/json' }, body },
      agent,
    ).then(
      (res) => {
        change.ackAt = performance.now();
        change.status = res.status;
        statusCodes[res.status] = (statusCodes[res.status] ?? 0) + 1;
      },
      (err: Error) => {
        change.ackAt = performance.now();
        change.error = err.message;
      },
    );
    const tracked = request.finally(() => {
      inFlight.delete(tracked);
      // A group whose change failed on the network is not changed again: its events can no longer be matched.
      if (!change.error) free.push(group);
    });
    inFlight.add(tracked);
  };
  const started = performance.now();
  let index = 0;
  await new Promise<void>((resolve) => {
    const pump = () => {
      const now = performance.now();
      while (index < planned && started + index * interval <= now) {
        send();
        index++;
      }
      if (index >= planned) return resolve();
      setTimeout(pump, Math.max(0, started + index * interval - performance.now()));
    };
    pump();
  });
  const sendWindowSeconds = (performance.now() - started) / 1000;
  while (inFlight.size > 0) await Promise.all([...inFlight]);
  agent.destroy();
  const all = [...changes.values()].flat();
  const ok = all.filter((c) => c.status !== undefined && c.status >= 200 && c.status < 300);
  const result: WriterResult = {
    planned,
    sent,
    ok: ok.length,
    non2xx: all.filter((c) => c.status !== undefined && (c.status < 200 || c.status >= 300)).length,
    errors: all.filter((c) => c.error).length,
    notSentAllGroupsBusy: notSent,
    sendWindowSeconds: Number(sendWindowSeconds.toFixed(3)),
    achievedRatePerSecond: Number((ok.length / Math.max(sendWindowSeconds, interval / 1000)).toFixed(1)),
    ackLatencyMs: summarize(all.filter((c) => c.ackAt !== undefined).map((c) => c.ackAt! - c.sentAt)),
    statusCodes,
  };
  return result;
}

// ---------------------------------------------------------------------------------------------

interface ReaderOutcome {
  name: ReaderName;
  where: string;
  skipped?: string;
  failure?: string;
  /** Acknowledged changes of the measured groups (those with no network error). */
  expected?: number;
  received?: number;
  missing?: number;
  /** The same event id delivered again. */
  duplicates?: number;
  /** Events of a measured group beyond its acknowledged changes. */
  unexpected?: number;
  /** From the PUT's 2xx answer to the event's arrival (negative: the event came first). */
  latencyMs?: LatencySummary;
  /** From sending the PUT to the event's arrival. */
  sendToReceiveMs?: LatencySummary;
  /** When it was complete: the last acknowledged change's event, ms after the last answer. */
  caughtUpMsAfterLastAnswer?: number | null;
  /** Events received per second, from the first arrival to the last: below the change rate, the reader fell behind. */
  arrivalRatePerSecond?: number | null;
  extra?: Record<string, number>;
}

function outcomeOf(reader: Reader, changes: Map<string, Change[]>, tainted: ReadonlySet<string>, lastAckAt: number): ReaderOutcome {
  if (reader.skipped) return { name: reader.name, where: reader.where, skipped: reader.skipped };
  const latencies: number[] = [];
  const sendToReceive: number[] = [];
  let expected = 0;
  let received = 0;
  let missing = 0;
  let unexpected = 0;
  let lastArrival = Number.NEGATIVE_INFINITY;
  let firstArrival = Number.POSITIVE_INFINITY;
  for (const [group, list] of changes) {
    if (tainted.has(group)) continue;
    const acknowledged = list.filter((c) => c.status !== undefined && c.status >= 200 && c.status < 300);
    const arrivals = reader.arrivals.get(group) ?? [];
    expected += acknowledged.length;
    received += Math.min(arrivals.length, acknowledged.length);
    missing += Math.max(0, acknowledged.length - arrivals.length);
    unexpected += Math.max(0, arrivals.length - acknowledged.length);
    for (let k = 0; k < Math.min(arrivals.length, acknowledged.length); k++) {
      latencies.push(arrivals[k] - acknowledged[k].ackAt!);
      sendToReceive.push(arrivals[k] - acknowledged[k].sentAt);
      lastArrival = Math.max(lastArrival, arrivals[k]);
      firstArrival = Math.min(firstArrival, arrivals[k]);
    }
  }
  return {
    name: reader.name,
    where: reader.where,
    ...(reader.failure ? { failure: reader.failure } : {}),
    expected,
    received,
    missing,
    duplicates: reader.duplicates,
    unexpected,
    latencyMs: summarize(latencies),
    sendToReceiveMs: summarize(sendToReceive),
    caughtUpMsAfterLastAnswer: Number.isFinite(lastArrival) ? Number((lastArrival - lastAckAt).toFixed(1)) : null,
    arrivalRatePerSecond: lastArrival > firstArrival ? Number(((received - 1) / ((lastArrival - firstArrival) / 1000)).toFixed(1)) : null,
  };
}

const log = (message: string) => process.stderr.write(`${message}\n`);
const fmt = (n: number | null | undefined, digits = 0) =>
  n === undefined || n === null || Number.isNaN(n) ? '-' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main() {
  const options = parseOptions();
  const startedAt = new Date();
  const loadBefore = os.loadavg();
  const secret = crypto.randomBytes(32);
  const keyring = new Keyring([secret]);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-bench-events-'));
  onCleanUp(async () => fs.rmSync(work, { recursive: true, force: true }));

  // 1. A fresh database: groups bench-0 … bench-<n-1> for the throughput runs, bench-<n> … bench-<2n-1> for the changes.
  const database: BenchDatabase = await createBenchDatabase(options.databaseUrl);
  onCleanUp(() => database.drop());
  log(`database: ${database.description}`);
  const seed = await seedDatabase(database.url, keyring, options.groups * 2, 1);
  const measuredGroups = Array.from({ length: options.groups }, (_, i) => `bench-${options.groups + i}`);
  const measured = new Set(measuredGroups);
  // An admin token for the webhook endpoint (the seeded one is read,write).
  const { handle } = await openMigratedDatabase({ databaseUrl: database.url });
  const admin = await issueApiToken(
    handle,
    {
      accountSlug: 'bench',
      scopes: ['read', 'write', 'admin'],
      allowedEnvironment: null,
      defaultEnvironment: 'Customer',
      expiresAt: null,
      name: 'bench admin',
    },
    { kind: 'command_line', tokenId: null, requestId: null },
    new Date(),
  );
  await handle.close();
  log(`seeded ${options.groups * 2} groups in ${seed.seconds.toFixed(1)} s`);

  // 2. The servers: A takes the writes; B (or A) is read.
  const env = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_URL: database.url,
    UGS_SECRET_KEY: secret.toString('base64'),
    UGS_BOOTSTRAP: 'false',
    UGS_RATE_LIMIT_MAX: '0',
    UGS_EMBED_RATE_LIMIT_MAX: '0',
    UGS_WEBHOOK_ALLOW_PRIVATE: 'true',
    REDIS_URL: '',
    LOG_LEVEL: options.logLevel,
  };
  const servers: RunningProcess[] = [];
  for (let i = 0; i < options.instances; i++) {
    const server = await startNodeProcess('dist/server.js', env, /Server listening at (https?:\/\/[^"\s]+)/);
    onCleanUp(() => server.stop());
    servers.push(server);
    log(`server ${'AB'[i]}: ${server.url} (pid ${server.pid})`);
  }
  const writeTo = servers[0];
  const readFrom = servers[options.instances - 1];
  const readName = options.instances === 2 ? 'B' : 'A';
  const probeAgent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  onCleanUp(async () => probeAgent.destroy());

  const scenarioData: ScenarioData = {
    groups: options.groups,
    treeSize: 0,
    childTokens: [],
    apiToken: seed.apiToken,
    embedTokens: [],
    jwsTokens: {},
    rotateTokens: [],
    deepCursor: '',
    createPrefix: '',
  };
  const throughput = async (label: string, what: string): Promise<LoadResult | null> => {
    if (options.writeDuration === 0) return null;
    log(`throughput: PUT /api/user at full speed, ${what}`);
    const result = await runLoad(path.join(work, `${label}.json`), {
      url: writeTo.url,
      scenario: 'update',
      connections: options.connections,
      durationSeconds: options.writeDuration,
      warmupSeconds: options.warmup,
      data: scenarioData,
    });
    log(
      `  writes ${label}: ${fmt(result.requestsPerSecond)} req/s (p50 ${fmt(result.latencyP50Ms)} ms, p99 ${fmt(result.latencyP99Ms)} ms, ${result.errors + result.non2xx} bad)`,
    );
    return result;
  };

  // 3. Write throughput with no reader attached (the events are written all the same, if this commit has them).
  const writesAlone = await throughput('no-readers', 'no reader attached');

  // 4. The starting point: once the sequencer has moved everything, the newest event id.
  const head = await quietHead(readFrom.url, seed.apiToken, probeAgent);
  const startSeq = head ?? 0;
  log(head === null ? 'GET /api/events answers 404: no feed' : `feed head before the run: ${startSeq}`);
  const readers: Record<ReaderName, Reader> = {
    stream: new Reader('stream', readName, measured, () => startSeq),
    webhook: new Reader('webhook', 'receiver in the bench process', measured, () => startSeq),
    feed: new Reader('feed', `${readName}, every ${options.pollMs} ms`, measured, () => startSeq),
  };
  if (head === null) readers.feed.skipped = 'GET /api/events answers 404: the feed route is not there';

  // 4a. The stream, on B.
  let streamClosedEarly = false;
  let finishing = false;
  const stream = openStream(readFrom.url, seed.apiToken, readers.stream, () => {
    if (!finishing) streamClosedEarly = true;
  });
  onCleanUp(async () => {
    finishing = true;
    stream.request.destroy();
  });
  const streamSkip = await stream.opened;
  if (streamSkip) readers.stream.skipped = streamSkip;
  // 4b. The webhook receiver and its endpoint.
  const receiver = await startWebhookReceiver(readers.webhook);
  onCleanUp(() => receiver.close());
  const created = await httpRequest(
    writeTo.url,
    {
      method: 'POST',
      path: '/api/webhook_endpoints',
      headers: { authorization: `Token ${admin.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url, description: 'bench event latency' }),
    },
    probeAgent,
  );
  let endpointId: number | undefined;
  if (created.status === 201) {
    const endpoint = (JSON.parse(created.body) as { webhook_endpoint: { id: number; secret: string } }).webhook_endpoint;
    receiver.secret = endpoint.secret;
    endpointId = endpoint.id;
    log(`webhook endpoint ${endpoint.id}: ${receiver.url}`);
  } else {
    readers.webhook.skipped =
      created.status === 404
        ? 'POST /api/webhook_endpoints answers 404: the webhook routes are not there'
        : `POST /api/webhook_endpoints answered ${created.status}: ${created.body.slice(0, 300)}`;
  }
  // 4c. The feed poller, on B.
  const poller = readers.feed.skipped ? undefined : pollFeed(readFrom.url, seed.apiToken, readers.feed, startSeq, options.pollMs);
  if (poller) onCleanUp(() => poller.stop());
  for (const reader of Object.values(readers)) {
    reader.active = true;
    if (reader.skipped) log(`skipping ${reader.name}: ${reader.skipped}`);
  }
  await sleep(500); // the stream's first read and the first polls settle

  // 5. The changes.
  log(`changes: ${options.rate}/s for ${options.duration} s to ${options.groups} groups on A`);
  const changes = new Map<string, Change[]>(measuredGroups.map((g) => [g, []]));
  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  loopDelay.enable();
  const writer = await writeChanges(writeTo.url, seed.apiToken, measuredGroups, options.rate, options.duration, changes);
  const lastAckAt = Math.max(...[...changes.values()].flat().map((c) => c.ackAt ?? 0));
  const tainted = new Set([...changes].filter(([, list]) => list.some((c) => c.error)).map(([g]) => g));
  log(
    `  sent ${writer.sent} (${writer.ok} 2xx, ${writer.non2xx} other, ${writer.errors} errors) in ${writer.sendWindowSeconds.toFixed(1)} s: ${fmt(writer.achievedRatePerSecond, 1)} changes/s; PUT p50 ${fmt(writer.ackLatencyMs.p50, 1)} ms, p99 ${fmt(writer.ackLatencyMs.p99, 1)} ms`,
  );

  // 6. Drain: until every reader has every acknowledged change's event, or --drain seconds.
  const expectedCount = [...changes]
    .filter(([g]) => !tainted.has(g))
    .reduce((n, [, list]) => n + list.filter((c) => c.status !== undefined && c.status >= 200 && c.status < 300).length, 0);
  const active = Object.values(readers).filter((r) => !r.skipped);
  const drainStarted = performance.now();
  while (performance.now() - drainStarted < options.drainSeconds * 1000 && active.some((r) => r.matched < expectedCount)) await sleep(50);
  await sleep(300); // late duplicates
  loopDelay.disable();
  for (const reader of Object.values(readers)) reader.active = false;
  if (streamClosedEarly) readers.stream.failure ??= 'the stream ended before the run did';

  const outcomes = Object.values(readers).map((r) => outcomeOf(r, changes, tainted, lastAckAt));
  const webhookOutcome = outcomes.find((o) => o.name === 'webhook')!;
  if (!webhookOutcome.skipped) {
    webhookOutcome.extra = { deliveries: receiver.deliveries, badSignatures: receiver.badSignatures, repeatedWebhookIds: receiver.repeatedIds };
  }
  const feedOutcome = outcomes.find((o) => o.name === 'feed')!;
  if (poller) feedOutcome.extra = { polls: poller.polls() };

  // 7. Write throughput with the readers attached (stream open, endpoint registered, feed polled).
  let writesWithReaders: LoadResult | null = null;
  if (active.length > 0) {
    writesWithReaders = await throughput('with-readers', 'readers attached');
  }
  // 7b. Without the webhook endpoint (deleted with its pending deliveries): the stream and the feed only.
  let writesWithoutWebhook: LoadResult | null = null;
  if (endpointId !== undefined && active.length > 1 && options.writeDuration > 0) {
    // fetch: BenchRequest has no DELETE.
    const deleted = await fetch(new URL(`/api/webhook_endpoints/${endpointId}`, writeTo.url), {
      method: 'DELETE',
      headers: { authorization: `Token ${admin.token}` },
    });
    const deletedBody = await deleted.text();
    if (deleted.status === 200) {
      writesWithoutWebhook = await throughput('stream-and-feed', 'stream and feed attached, webhook endpoint deleted');
    } else {
      log(`deleting the webhook endpoint answered ${deleted.status}: ${deletedBody.slice(0, 200)}`);
    }
  }
  for (const server of servers) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) throw new Error(`a server exited during the run:\n${server.stderrTail()}`);
  }
  const memory = servers.map((s) => residentMemoryKb(s.pid));
  finishing = true;
  await cleanUp();

  // 8. The report.
  const report = {
    kind: 'event-latency',
    label: options.label ?? null,
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    backend: database.backend,
    commit: gitDescription(REPO_ROOT),
    options: {
      rate: options.rate,
      durationSeconds: options.duration,
      instances: options.instances,
      groups: options.groups,
      feedPollMs: options.pollMs,
      drainSeconds: options.drainSeconds,
      connections: options.connections,
      writeDurationSeconds: options.writeDuration,
      warmupSeconds: options.warmup,
      logLevel: options.logLevel,
      /** The servers' UGS_EVENT_POLL_MS (how often an instance looks for other instances' events); unset: the service's default. */
      eventPollMs: process.env.UGS_EVENT_POLL_MS ?? null,
    },
    machine: {
      node: process.version,
      platform: `${os.type()} ${os.release()} ${os.arch()}`,
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? 'unknown',
      memoryMb: Math.round(os.totalmem() / 1024 / 1024),
      loadAverageBefore: loadBefore.map((n) => Number(n.toFixed(2))),
      loadAverageAfter: os.loadavg().map((n) => Number(n.toFixed(2))),
    },
    /** The bench process's event-loop delay during the changes: it writes, reads the stream and receives the webhooks, so its delay adds to every latency. */
    benchEventLoopDelayMs: {
      p50: loopMs(loopDelay.percentile(50)),
      p99: loopMs(loopDelay.percentile(99)),
      max: loopMs(loopDelay.max),
    },
    startSeq,
    writer: { ...writer, groupsLeftOutAfterNetworkErrors: tainted.size },
    readers: outcomes,
    throughput: {
      scenario: 'update',
      /** Before any reader: events written (on a commit that has them), nobody reading. */
      noReaders: writesAlone,
      /** After the latency run: the stream open, the webhook endpoint registered, the feed polled. */
      withReaders: writesWithReaders,
      /** Then with the webhook endpoint deleted: the stream open and the feed polled. */
      streamAndFeedOnly: writesWithoutWebhook,
    },
    serverRssKbAtEnd: memory.map((m) => m?.rssKb ?? null),
  };
  printReport(report.readers, writer, report.throughput, report.benchEventLoopDelayMs);
  if (loadBefore[0] > os.cpus().length * 0.25) console.log('warning: the machine was busy when the run started; numbers are not comparable');
  fs.mkdirSync(options.resultsDir, { recursive: true });
  const file = path.join(
    options.resultsDir,
    `${options.label ? `${options.label}-` : ''}events-${database.backend}${options.instances === 2 ? '-2instances' : ''}-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`,
  );
  fs.writeFileSync(file, JSON.stringify(report, null, 2) + '\n');
  console.log(`\nwritten: ${path.relative(process.cwd(), file)}`);
}

function printReport(
  readers: ReaderOutcome[],
  writer: WriterResult,
  throughput: { noReaders: LoadResult | null; withReaders: LoadResult | null; streamAndFeedOnly: LoadResult | null },
  loop: { p50: number; p99: number; max: number },
) {
  console.log(
    `\nchanges: ${writer.ok} acknowledged of ${writer.planned} planned, ${fmt(writer.achievedRatePerSecond, 1)}/s achieved; ` +
      `PUT answered in p50 ${fmt(writer.ackLatencyMs.p50, 1)} ms, p99 ${fmt(writer.ackLatencyMs.p99, 1)} ms, max ${fmt(writer.ackLatencyMs.max, 1)} ms` +
      (writer.non2xx + writer.errors + writer.notSentAllGroupsBusy > 0
        ? ` (${writer.non2xx} non-2xx, ${writer.errors} errors, ${writer.notSentAllGroupsBusy} not sent: every group busy)`
        : ''),
  );
  const header = ['reader', 'where', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'received', 'missing', 'duplicates', 'unexpected', 'caught up ms', 'events/s'];
  const rows = readers.map((r) =>
    r.skipped
      ? [r.name, `skipped: ${r.skipped}`]
      : [
          r.name,
          r.where,
          fmt(r.latencyMs?.p50, 1),
          fmt(r.latencyMs?.p90, 1),
          fmt(r.latencyMs?.p99, 1),
          fmt(r.latencyMs?.max, 1),
          `${fmt(r.received)}/${fmt(r.expected)}`,
          fmt(r.missing),
          fmt(r.duplicates),
          fmt(r.unexpected),
          fmt(r.caughtUpMsAfterLastAnswer),
          fmt(r.arrivalRatePerSecond),
        ],
  );
  const widths = header.map((h, i) => Math.max(h.length, ...rows.filter((r) => r.length > 2).map((r) => r[i]?.length ?? 0)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log("\nchange-to-reader latency: the event's arrival minus the PUT's 2xx answer");
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of rows) console.log(row.length === 2 ? `${row[0].padEnd(widths[0])}  ${row[1]}` : line(row));
  for (const r of readers) {
    if (r.failure) console.log(`${r.name}: ${r.failure}`);
    if (r.extra)
      console.log(
        `${r.name}: ${Object.entries(r.extra)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
      );
  }
  console.log(`bench process event-loop delay during the changes: p50 ${loop.p50} ms, p99 ${loop.p99} ms, max ${loop.max} ms (included in every latency)`);
  const row = (label: string, r: LoadResult | null) =>
    r
      ? `  ${label.padEnd(24)} ${fmt(r.requestsPerSecond).padStart(7)} req/s  p50 ${fmt(r.latencyP50Ms)} ms  p99 ${fmt(r.latencyP99Ms)} ms  ${r.errors + r.non2xx} bad`
      : `  ${label.padEnd(24)} not measured`;
  console.log('\nwrite throughput, PUT /api/user closed loop (the update scenario):');
  console.log(row('no readers', throughput.noReaders));
  console.log(row('all readers attached', throughput.withReaders));
  console.log(row('stream and feed only', throughput.streamAndFeedOnly));
}

main().catch(async (err) => {
  if (!wasInterrupted()) console.error(`bench:events failed: ${err instanceof Error ? (err.stack ?? err.message) : err}`);
  await cleanUp();
  process.exit(wasInterrupted() ? 130 : 1);
});
