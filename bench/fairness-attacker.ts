// The attacking tenant of `npm run bench:fairness` (bench/fairness.ts), in a process of its own
// so that its work never delays the victim's measurements in the bench's process. Given its
// plan as JSON in FAIRNESS_ATTACK, it opens 20 event streams, points 16 webhook endpoints at a
// receiver that accepts each request and never answers, then runs, each in a loop until
// SIGTERM: two bulk upserts of 600 groups each (every item changes its group), a rename of a
// tag that 20,000 groups carry (back and forth), and an export of its groups (what `ugs
// export` runs, in a process of its own, this script again with FAIRNESS_ROLE=export: on
// SQLite an export reads without a pause, which would hold up this process's requests). It
// prints `attacking` once everything runs, and on SIGTERM one JSON line: what each loop did.
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import type { DatabaseHandle } from '../src/db/database.ts';
import type { Environment } from '../src/db/schema.ts';

export interface AttackPlan {
  /** The instances to send to, in turn. */
  urls: string[];
  token: string;
  databaseUrl: string;
  accountId: number;
  environment: Environment;
  /** The groups the upsert loops change: `<prefix><i>`, i from 0; each loop its own range. */
  groupPrefix: string;
  upsertLoops: number;
  upsertItems: number;
  /** The tag every attacking group carries, renamed to `<tag>-b` and back. */
  tag: string;
  streams: number;
  endpoints: number;
  exportLoop: boolean;
}

export interface LoopReport {
  runs: number;
  ok: number;
  /** Answers by status other than 2xx, and refusals by error code. */
  refused: Record<string, number>;
  errors: number;
  /** The median time of a successful run, ms. */
  medianMs: number | null;
}

const plan = JSON.parse(process.env.FAIRNESS_ATTACK ?? 'null') as AttackPlan | null;
if (!plan) throw new Error('FAIRNESS_ATTACK is not set: this process is started by bench/fairness.ts');
let stopping = false;
const stopped: Promise<void>[] = [];
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
let turn = 0;
const nextUrl = () => plan.urls[turn++ % plan.urls.length];

function post(path: string, body: unknown): Promise<{ status: number; text: string }> {
  const url = new URL(path, nextUrl());
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: { authorization: `Token ${plan!.token}`, 'content-type': 'application/json', 'content-length': String(payload.length) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

function newReport(): LoopReport & { times: number[] } {
  return { runs: 0, ok: 0, refused: {}, errors: 0, medianMs: null, times: [] };
}

/** Runs `step` again and again until SIGTERM, counting its outcomes; a refusal waits its Retry-After (at most 1 s). */
function loop(report: LoopReport & { times: number[] }, step: (n: number) => Promise<{ status: number; text: string }>): void {
  stopped.push(
    (async () => {
      for (let n = 0; !stopping; n++) {
        const started = performance.now();
        report.runs++;
        try {
          const { status, text } = await step(n);
          if (status >= 200 && status < 300) {
            report.ok++;
            report.times.push(performance.now() - started);
            // A turn of the event loop before the next: the other loops' requests go out meanwhile.
            await new Promise((resolve) => setImmediate(resolve));
            continue;
          }
          let code = String(status);
          try {
            code = `${status} ${JSON.parse(text).error.code}`;
          } catch {
            // not the error envelope
          }
          report.refused[code] = (report.refused[code] ?? 0) + 1;
        } catch {
          report.errors++;
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })(),
  );
}

/** A receiver that accepts each delivery and never answers: every attempt waits for its timeout. */
async function hangingReceiver(): Promise<{ url: string; close(): void }> {
  const server = http.createServer(() => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hangs`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

function openStream(url: string): http.ClientRequest {
  const req = http.get(
    new URL('/api/events/stream', url),
    { headers: { authorization: `Token ${plan!.token}`, accept: 'text/event-stream' }, agent: false },
    (res) => res.resume(),
  );
  req.on('error', () => undefined);
  return req;
}

async function exportLoop(report: LoopReport & { times: number[] }): Promise<DatabaseHandle> {
  const { handle } = await openMigratedDatabase({ databaseUrl: plan!.databaseUrl });
  const transfer = await import('../src/user-groups/transfer/transfer.service.ts');
  // The account's heavy operations, as `ugs export` takes one (absent in a tree before them).
  const heavy = await import('../src/accounts/heavy-operations.ts' as string).catch(() => undefined);
  const operations = heavy && new heavy.HeavyOperations(handle, { perAccount: Number(process.env.UGS_HEAVY_OPERATIONS_PER_ACCOUNT || 2), waitMs: 15_000 });
  const tenant = { accountId: plan!.accountId, environment: plan!.environment };
  loop(report, async () => {
    let lines = 0;
    try {
      for await (const _line of (transfer.exportUserGroupLines as (...args: unknown[]) => AsyncGenerator<string>)(handle, tenant, operations)) lines++;
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code) return { status: 429, text: JSON.stringify({ error: { code } }) };
      throw err;
    }
    return { status: lines > 0 ? 200 : 500, text: '' };
  });
  return handle;
}

/** The export loop alone, in this process (FAIRNESS_ROLE=export); on SIGTERM, its report as one JSON line. */
async function exportOnly() {
  const report = newReport();
  const handle = await exportLoop(report);
  process.stdout.write('attacking\n');
  await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
  stopping = true;
  await Promise.all(stopped);
  await handle.close();
  process.stdout.write(`${JSON.stringify(summaryOf({ export: report }))}\n`);
  process.exit(0);
}

/** Starts the export loop's process; resolves once it runs. Its stop() answers its report. */
async function startExporter(): Promise<{ stop(): Promise<Record<string, LoopReport>> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/fairness-attacker.ts'], {
    cwd: process.cwd(),
    env: { ...process.env, FAIRNESS_ROLE: 'export' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  process.once('exit', () => child.kill('SIGKILL'));
  while (!stdout.includes('attacking\n')) {
    if (child.exitCode !== null) throw new Error('the export loop exited before it ran');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    async stop() {
      child.kill('SIGTERM');
      await exited;
      return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, LoopReport>;
    },
  };
}

function summaryOf(reports: Record<string, LoopReport & { times: number[] }>): Record<string, LoopReport> {
  const summary: Record<string, LoopReport> = {};
  for (const [name, { times, ...report }] of Object.entries(reports)) {
    const sorted = times.sort((a, b) => a - b);
    summary[name] = { ...report, medianMs: sorted.length ? Math.round(sorted[Math.floor(sorted.length / 2)]) : null };
  }
  return summary;
}

async function main() {
  const attack = plan!;
  const receiver = await hangingReceiver();
  for (let i = 0; i < attack.endpoints; i++) {
    const created = await post('/api/webhook_endpoints', { url: receiver.url, description: `fairness attacker ${i}` });
    if (created.status !== 201) throw new Error(`creating a webhook endpoint answered ${created.status}: ${created.text.slice(0, 300)}`);
  }
  const streams = Array.from({ length: attack.streams }, () => openStream(nextUrl()));
  const reports: Record<string, LoopReport & { times: number[] }> = {};
  for (let l = 0; l < attack.upsertLoops; l++) {
    const report = (reports[`upsert ${l + 1}`] = newReport());
    const ids = Array.from({ length: attack.upsertItems }, (_, i) => `${attack.groupPrefix}${l * attack.upsertItems + i}`);
    loop(report, (n) => post('/api/users/upsert', { user_groups: ids.map((id) => ({ user_group_id: id, properties: { loop: l, run: n } })) }));
  }
  const renames = (reports.rename = newReport());
  let from = attack.tag;
  loop(renames, async () => {
    const to = from === attack.tag ? `${attack.tag}-b` : attack.tag;
    const answer = await post('/api/group_tags/rename', { name: from, new_name: to });
    if (answer.status === 200) from = to;
    return answer;
  });
  const exporter = attack.exportLoop ? await startExporter() : undefined;
  process.stdout.write('attacking\n');

  await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
  stopping = true;
  for (const stream of streams) stream.destroy();
  receiver.close();
  const exported = await exporter?.stop();
  // A step in flight (a long rename) finishes, or is left behind after 30 s: its run is not counted.
  await Promise.race([Promise.all(stopped), new Promise((resolve) => setTimeout(resolve, 30_000))]);
  agent.destroy();
  process.stdout.write(`${JSON.stringify({ ...summaryOf(reports), ...exported })}\n`);
  process.exit(0);
}

(process.env.FAIRNESS_ROLE === 'export' ? exportOnly() : main()).catch((err) => {
  process.stderr.write(`the attacker failed: ${err instanceof Error ? (err.stack ?? err.message) : err}\n`);
  process.exit(1);
});
