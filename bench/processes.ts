// The benchmark's child processes: the real server, the ceiling and the load generator,
// each a separate process (the server compiled, the others through tsx), plus one plain HTTP request for probes.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchRequest } from './scenarios.ts';
import type { LoadJob, LoadResult } from './load.ts';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface RunningProcess {
  child: ChildProcess;
  url: string;
  pid: number;
  /** The last few kilobytes of stderr, for error reports. */
  stderrTail(): string;
  stop(): Promise<void>;
}

/**
 * Starts `node <script>` (`--import tsx` for TypeScript) and waits until a line of its stdout matches
 * `listening` (group 1: the URL). After that, stdout is drained and discarded, so that the
 * process pays for writing its log lines but nobody keeps them.
 */
export function startNodeProcess(script: string, env: NodeJS.ProcessEnv, listening: RegExp, timeoutMs = 60_000): Promise<RunningProcess> {
  // TypeScript through tsx (the ceiling); the server as production runs it, compiled.
  const args = script.endsWith('.ts') ? ['--import', 'tsx', script] : [script];
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-8192);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const handle = (url: string): RunningProcess => ({
    child,
    url,
    pid: child.pid!,
    stderrTail: () => stderr,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      }
    },
  });

  return new Promise((resolve, reject) => {
    let buffered = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${script} did not start listening within ${timeoutMs} ms\n${stderr}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const match = listening.exec(buffered);
      if (match) {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        child.stdout!.resume(); // drain: flowing with no listener discards
        child.off('exit', onExit);
        resolve(handle(match[1]));
      } else if (buffered.length > 1_000_000) {
        buffered = buffered.slice(-10_000);
      }
    };
    const onExit = (code: number | null, signal: string | null) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (code ${code}, signal ${signal}) before listening\n${stderr}`));
    };
    child.stdout!.on('data', onData);
    child.once('exit', onExit);
  });
}

/**
 * A process's resident memory in kB, from /proc/<pid>/status (Linux only): VmRSS, its peak
 * VmHWM, and VmRSS split into anonymous memory (heap, stacks: what the process itself uses)
 * and file pages (mostly the memory-mapped SQLite file: the operating system's shared,
 * reclaimable page cache).
 */
export function residentMemoryKb(pid: number): { rssKb: number; peakRssKb: number; anonKb: number; fileKb: number } | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)\\s+kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rssKb: field('VmRSS'), peakRssKb: field('VmHWM'), anonKb: field('RssAnon'), fileKb: field('RssFile') };
  } catch {
    return null;
  }
}

/** A process and its children (with UGS_WORKERS above 1: the primary and its workers), Linux only. */
export function processTree(pid: number): number[] {
  try {
    const children = fs
      .readdirSync(`/proc/${pid}/task`)
      .flatMap((task) => fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/))
      .filter(Boolean)
      .map(Number);
    return [pid, ...children];
  } catch {
    return [pid];
  }
}

/** The kernel's clock ticks per second, in which /proc/<pid>/stat counts CPU time (USER_HZ: 100 on Linux). */
const CLOCK_TICKS_PER_SECOND = 100;

/** CPU seconds (user and system) each process has used so far, from /proc/<pid>/stat; a process that is gone is left out. */
export function cpuSeconds(pids: number[]): Map<number, number> {
  const used = new Map<number, number>();
  for (const pid of pids) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      // The fields after the command name, which is in parentheses and may hold spaces: utime and stime are the 12th and 13th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      used.set(pid, (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND);
    } catch {
      // gone
    }
  }
  return used;
}

/** Requests the server has answered so far, every route and status, as its /metrics counts them (all workers together). */
export async function requestsAnswered(baseUrl: string): Promise<number> {
  const metrics = await httpRequest(baseUrl, { method: 'GET', path: '/metrics', headers: {} });
  let total = 0;
  for (const line of metrics.body.split('\n')) if (line.startsWith('ugs_http_requests_total{')) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  return total;
}

/** Runs bench/load.ts on a job in its own process and returns what it printed. */
export function runLoad(jobFile: string, job: LoadJob): Promise<LoadResult> {
  fs.writeFileSync(jobFile, JSON.stringify(job));
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'bench/load.ts'), jobFile], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => (out += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      try {
        if (code !== 0) throw new Error(`exit code ${code}`);
        resolve(JSON.parse(line) as LoadResult);
      } catch (err) {
        reject(new Error(`load generator failed (${(err as Error).message}): ${out.slice(-2000)}`));
      }
    });
  });
}

export interface ProbeResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const HOP_HEADERS = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);

/** One request (GET bodies included, which fetch() refuses to send). */
export function httpRequest(baseUrl: string, request: BenchRequest, agent?: http.Agent): Promise<ProbeResponse> {
  const url = new URL(request.path, baseUrl);
  const body = request.body === undefined ? undefined : Buffer.from(request.body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: request.method,
        path: url.pathname + url.search,
        agent,
        headers: { ...request.headers, ...(body ? { 'content-length': String(body.length) } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const headers: Record<string, string> = {};
          for (const [name, value] of Object.entries(res.headers)) {
            if (value !== undefined && !HOP_HEADERS.has(name)) headers[name] = Array.isArray(value) ? value.join(', ') : value;
          }
          resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * One get-or-create per seeded group (`bench-0` … `bench-<groups-1>`), `concurrency` at a time:
 * what an instance that has served every group once has done, so that a run measures that
 * steady state (the opened-token cache holds the groups' tokens) rather than its first
 * minutes. Returns the number of answers other than 200.
 */
export async function primeGroups(baseUrl: string, apiToken: string, groups: number, concurrency = 50): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  let next = 0;
  let failures = 0;
  const worker = async () => {
    while (next < groups) {
      const i = next++;
      const res = await httpRequest(
        baseUrl,
        { method: 'GET', path: `/api/user?user_group_id=bench-${i}`, headers: { authorization: `Token ${apiToken}` } },
        agent,
      );
      if (res.status !== 200) failures++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  return failures;
}

/**
 * One client paging through every group of the benchmark's account, `limit` at a time,
 * following next_cursor, and starting over at the end, one request at a time, until stop()
 * is called: what a nightly sync or `ugs export` does beside the page views. Answers how many
 * pages it read and how many times it went through every group.
 */
export function pageThroughEveryGroup(baseUrl: string, apiToken: string, limit: number): { stop(): Promise<{ pages: number; passes: number }> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let stopping = false;
  const paging = (async () => {
    let cursor: string | null = null;
    let pages = 0;
    let passes = 0;
    while (!stopping) {
      const path = `/api/users?limit=${limit}${cursor === null ? '' : `&cursor=${cursor}`}`;
      const res = await httpRequest(baseUrl, { method: 'GET', path, headers: { authorization: `Token ${apiToken}` } }, agent);
      if (res.status !== 200) throw new Error(`the pager's GET ${path} answered ${res.status}: ${res.body.slice(0, 300)}`);
      cursor = (JSON.parse(res.body) as { next_cursor: string | null }).next_cursor;
      pages++;
      if (cursor === null) passes++;
    }
    return { pages, passes };
  })();
  return {
    async stop() {
      stopping = true;
      try {
        return await paging;
      } finally {
        agent.destroy();
      }
    },
  };
}

/** Embed tokens of `count` random flat groups, minted by the server as a backend would (with the key that signs now). */
export async function mintEmbedTokens(baseUrl: string, apiToken: string, flatGroups: number, count: number): Promise<string[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 20 });
  try {
    const tokens: string[] = [];
    for (let start = 0; start < count; start += 20) {
      const batch = Array.from({ length: Math.min(20, count - start) }, async () => {
        const i = Math.floor(Math.random() * flatGroups);
        const res = await httpRequest(
          baseUrl,
          {
            method: 'POST',
            path: '/api/embed_token',
            headers: { authorization: `Token ${apiToken}`, 'content-type': 'application/json' },
            body: JSON.stringify({ user_group_id: `bench-${i}` }),
          },
          agent,
        );
        if (res.status !== 200) throw new Error(`minting an embed token: ${res.status} ${res.body}`);
        return (JSON.parse(res.body) as { embed_token: string }).embed_token;
      });
      tokens.push(...(await Promise.all(batch)));
    }
    return tokens;
  } finally {
    agent.destroy();
  }
}

/** The algorithm the server signs embed tokens with now: the `alg` of one it mints for bench-0. */
export async function signingAlgorithmOf(baseUrl: string, apiToken: string): Promise<string> {
  const res = await httpRequest(baseUrl, {
    method: 'POST',
    path: '/api/embed_token',
    headers: { authorization: `Token ${apiToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user_group_id: 'bench-0', expires_in_seconds: 60 }),
  });
  if (res.status !== 200) throw new Error(`minting an embed token: ${res.status} ${res.body}`);
  const [header] = (JSON.parse(res.body) as { embed_token: string }).embed_token.split('.');
  return (JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as { alg: string }).alg;
}
