// Real server processes on real sockets, for what inject cannot show: races between
// processes, kill -9, SIGTERM, and the command-line tool.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fs from 'node:fs';
import crypto from 'node:crypto';
import { after, before } from 'node:test';
import { createTestDatabase, type Backend, type TestDatabase } from './backends.ts';
import { parseBody, type ResponseBody } from './harness.ts';
import { GENEROUS_WAIT_MS, PROCESS_START_MS, eventually } from './wait.ts';
import { runUgsHere } from './ugs-in-process.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The tests' own build of the service (scripts/build-for-tests.mjs, which `npm test` runs
 * first): a tree shaped like the checkout, so that a test run never rebuilds the dist/ that a
 * running `npm start` or `npx ugs` uses. UGS_TEST_BUILD names another folder of .tmp/ for it,
 * so that two runs side by side (CI's, .ci/run) never rebuild each other's.
 */
export const TEST_BUILD = path.join(ROOT, '.tmp', testBuildName(process.env.UGS_TEST_BUILD));

/** The folder of .tmp/ that holds the tests' build: UGS_TEST_BUILD (a plain name), else test-build. */
export function testBuildName(given: string | undefined): string {
  if (given === undefined || given === '') return 'test-build';
  if (!/^test-build[a-z0-9-]*$/.test(given))
    throw new Error(`UGS_TEST_BUILD is a folder name of .tmp/ that starts with test-build, not ${JSON.stringify(given)}`);
  return given;
}

/** The server as production runs it: the compiled JavaScript, of the tests' own build. */
export const SERVER_ENTRY = path.join(TEST_BUILD, 'dist', 'server.js');

/** `ugs` as `npx ugs` runs it (bin/ugs.js, which loads the compiled tool beside it), of the tests' own build. */
export const UGS_ENTRY = path.join(TEST_BUILD, 'bin', 'ugs.js');

/** Fails at once, saying what to run, when the tests' build is not there (a test file run alone). */
export function requireTestBuild(): void {
  if (!fs.existsSync(SERVER_ENTRY) || !fs.existsSync(UGS_ENTRY)) {
    throw new Error(`${path.relative(ROOT, TEST_BUILD)}/ is not built: run npm run build:tests (npm test runs it first)`);
  }
}

const living = new Set<ChildProcess>();
// A test that fails half-way (a second server that did not start, an assertion before the
// cleanup) must not leave its processes running: they would keep this test file alive, and
// the whole run with it (CI once waited 85 minutes). Whatever is still running when this
// process exits is killed; `npm test` exits each file when its tests are done (--test-force-exit),
// and fails a test that runs over 5 minutes (--test-timeout).
process.once('exit', () => {
  for (const child of living) child.kill('SIGKILL');
});

/** Kills `child` if this process exits while it is still running. */
export function reapOnExit<T extends ChildProcess>(child: T): T {
  living.add(child);
  child.once('exit', () => living.delete(child));
  return child;
}

export interface ServerProcess {
  baseUrl: string;
  child: ChildProcess;
  /** Everything the process printed so far (stdout and stderr). */
  output(): string;
  /**
   * The first match of `pattern` in the output, as soon as the process prints it (log lines
   * come in batches), or an error with the output so far after `timeoutMs` or when it exits.
   */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /**
   * Resolves once every log line of what happened before the call is in output(): lines are
   * written in batches, in order, so this makes a request with its own X-Request-Id and waits
   * for that request's line.
   */
  logsUpToNow(): Promise<void>;
  /** Sends a signal and resolves with how the process ended. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with how the process ended, when it ends on its own. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * `openFiles`: the open-files limit the server runs under (`ulimit -n`), as a host may set it.
 * `nodeArgs`: options for Node itself, before the server's script (`--expose-gc`, `--import`).
 * `listening`: the line that says the server takes requests, with its URL as the first group:
 * the start's "Server listening at" unless told (one worker's line, while another starts).
 * `root`: another build of the service to run (a previous release: helpers/previous-release.ts).
 * `cwd`: where this code's build runs (relative paths, ./data/), the repository by default.
 */
export async function spawnServer(
  env: Record<string, string>,
  options: { openFiles?: number; nodeArgs?: string[]; listening?: RegExp; root?: string; cwd?: string } = {},
): Promise<ServerProcess> {
  // Another build runs its own dist/ from its directory; this code runs from the tests' own build.
  if (options.root === undefined) requireTestBuild();
  const nodeArgs = [...(options.nodeArgs ?? []), options.root === undefined ? SERVER_ENTRY : 'dist/server.js'];
  const [command, args] =
    options.openFiles === undefined
      ? [process.execPath, nodeArgs]
      : ['/bin/sh', ['-c', `ulimit -n ${options.openFiles} && exec "$0" "$@"`, process.execPath, ...nodeArgs]];
  const child = reapOnExit(
    spawn(command, args, {
      cwd: options.root ?? options.cwd ?? ROOT,
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', UGS_BOOTSTRAP: 'false', LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let output = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not print its listening line within ${PROCESS_START_MS / 1000} s of its start:\n${output}`));
    }, PROCESS_START_MS);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = (options.listening ?? /Server listening at (http:\/\/127\.0\.0\.1:\d+)/).exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', () => {
      clearTimeout(timer);
      reject(new Error(`server exited before listening:\n${output}`));
    });
  });
  return {
    baseUrl,
    child,
    output: () => output,
    waitForOutput: (pattern, timeoutMs = GENEROUS_WAIT_MS) => waitForOutput(child, () => output, pattern, timeoutMs),
    async logsUpToNow() {
      const marker = `log-marker-${++logMarkers}-${process.pid}`;
      await httpRequest(baseUrl, 'GET', '/healthz', { headers: { 'x-request-id': marker } });
      await waitForOutput(child, () => output, new RegExp(`"request_id":"${marker}"`), GENEROUS_WAIT_MS);
    },
    exited,
    stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

let logMarkers = 0;

/**
 * Resolves once `count` requests are in flight on the server (0: none is), by its
 * `ugs_http_requests_in_flight` gauge (the scrape that reads it not counted): their headers
 * have arrived, and the server works on them. What a test waits for before it signals, hangs
 * up or blocks something.
 */
export async function requestsInFlight(baseUrl: string, count: number): Promise<void> {
  await eventually(`${count} requests in flight on ${baseUrl}`, async () => {
    const text = (await httpRequest(baseUrl, 'GET', '/metrics')).text;
    const gauge = /^ugs_http_requests_in_flight (\d+)$/m.exec(text);
    const others = gauge === null ? -1 : Number(gauge[1]) - 1;
    return count === 0 ? others === 0 : others >= count;
  });
}

function waitForOutput(child: ChildProcess, output: () => string, pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      child.stdout!.off('data', check);
      child.stderr!.off('data', check);
      child.off('exit', exited);
    };
    const check = () => {
      const match = pattern.exec(output());
      if (match) {
        done();
        resolve(match);
      }
    };
    const fail = (why: string) => {
      done();
      reject(new Error(`${pattern} ${why}; the output so far:\n${output()}`));
    };
    const exited = () => setImmediate(() => (pattern.exec(output()) ? check() : fail('was not printed before the process exited')));
    const timer = setTimeout(() => fail(`was not printed within ${timeoutMs} ms`), timeoutMs);
    // Added after spawnServer's own listeners: `output()` already holds the chunk that fired this.
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.on('exit', exited);
    check();
    if (child.exitCode !== null || child.signalCode !== null) exited();
  });
}

/** What useServerProcesses starts: its fields are filled in by its before hook. */
export interface ServerProcesses {
  /** The new database they share. */
  database: TestDatabase;
  /** Their environment: DATABASE_URL, a UGS_SECRET_KEY of their own, and what was asked for. */
  env: Record<string, string>;
  servers: ServerProcess[];
  /** An API token of the default account, issued by `ugs` (unless asked not to). */
  token: string;
  /** The base URL of server i, round the servers: spreads calls over every process. */
  on(i: number): string;
}

/**
 * `count` server processes (2 by default) on one new database of `backend`, started at once
 * (on the empty database: they race to migrate it as well) before the current describe's
 * first test, stopped with SIGTERM and the database dropped after its last. `env`: more of
 * their environment; `issueToken: false`: no token (the suite issues its own).
 */
export function useServerProcesses(
  backend: Backend,
  { count = 2, env = {}, issueToken = true }: { count?: number; env?: Record<string, string>; issueToken?: boolean } = {},
): ServerProcesses {
  const processes: ServerProcesses = {
    database: undefined as unknown as TestDatabase, // filled in below, before the first test runs
    env: {},
    servers: [],
    token: '',
    on: (i) => processes.servers[i % processes.servers.length].baseUrl,
  };
  before(async () => {
    processes.database = await createTestDatabase(backend);
    processes.env = { DATABASE_URL: processes.database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'), ...env };
    processes.servers = await spawnServers(count, processes.env);
    if (issueToken) processes.token = (await issueTokenWithCli({ DATABASE_URL: processes.database.url })).token;
  });
  after(async () => {
    await Promise.all(processes.servers.map((server) => server.stop('SIGTERM')));
    await processes.database?.drop();
  });
  return processes;
}

/** Starts `count` servers at once; if one fails to start, the others are stopped before the error is thrown. */
export async function spawnServers(count: number, env: Record<string, string>): Promise<ServerProcess[]> {
  const started = await Promise.allSettled(Array.from({ length: count }, () => spawnServer(env)));
  const failed = started.find((result) => result.status === 'rejected');
  if (failed === undefined) return started.map((result) => (result as PromiseFulfilledResult<ServerProcess>).value);
  await Promise.all(started.map((result) => (result.status === 'fulfilled' ? result.value.stop('SIGKILL') : undefined)));
  throw failed.reason;
}

export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command <args>` in `cwd` with `env` as its whole environment (this process's unless
 * told), with nothing on its stdin; resolves on 'close', when all its output has been read.
 */
export function runCommand(
  command: string,
  args: string[],
  { cwd = ROOT, env = process.env }: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs `node <args>` in the repository (or in `cwd`); resolves on 'close', when all its output has been read. */
export function runNode(args: string[], env: Record<string, string> = {}, cwd = ROOT): Promise<CommandResult> {
  return runCommand(process.execPath, args, { cwd, env: { ...process.env, ...env } });
}

/**
 * Runs `ugs`: the tests' own build, from the repository (or from `cwd`, where its relative paths
 * and ./data/ are); or another build's (`root`: a previous release, run from its directory).
 */
export function runUgs(args: string[], env: Record<string, string>, where: { root?: string; cwd?: string } = {}): Promise<CommandResult> {
  if (where.root !== undefined) return runNode(['bin/ugs.js', ...args], env, where.root);
  requireTestBuild();
  return runNode([UGS_ENTRY, ...args], env, where.cwd);
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** An HTTP request over a real socket; unlike fetch, it can send a body with GET. */
export function httpRequest(
  baseUrl: string,
  method: string,
  pathAndQuery: string,
  /** `newConnection`: on a connection of its own, closed after it (with UGS_WORKERS, the primary hands each new connection to the next worker). */
  /** `timeoutMs`: fail when no answer has come by then. */
  options: { token?: string; body?: unknown; headers?: Record<string, string>; newConnection?: boolean; timeoutMs?: number } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: ResponseBody; text: string }> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Token ${options.token}`;
  if (payload !== undefined) {
    headers['content-type'] ??= 'application/json';
    headers['content-length'] = String(Buffer.byteLength(payload));
  }
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(pathAndQuery, baseUrl), { method, headers, agent: options.newConnection ? false : agent }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parseBody(text), text }));
      // A response cut short (its server process killed while it answered) fails, rather than never ending.
      res.on('error', reject);
    });
    req.on('error', reject);
    if (options.timeoutMs !== undefined) req.setTimeout(options.timeoutMs, () => req.destroy(new Error(`no answer in ${options.timeoutMs} ms`)));
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

/**
 * Issues an API token with the command-line tool, as an operator does (`ugs token create …
 * --json`), run in this process (helpers/ugs-in-process.ts: the suites that use it are about
 * something else); fails the test if it cannot.
 */
export async function issueTokenWithCli(
  env: Record<string, string>,
  args: string[] = ['--account', 'acme'],
): Promise<{ id: number; token: string; [field: string]: unknown }> {
  const issued = await runUgsHere(['token', 'create', ...args, '--json'], env);
  assert.equal(issued.code, 0, issued.stderr);
  return JSON.parse(issued.stdout);
}

export interface ExampleProcess {
  url: string;
  child: ChildProcess;
  output(): string;
}

/** Starts one of the examples' scripts (plain Node) and waits for its "listening on <url>" line. */
export function startExample(script: string, env: Record<string, string>): Promise<ExampleProcess> {
  const child = reapOnExit(spawn(process.execPath, [script], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${script} did not print "listening on <url>" within ${PROCESS_START_MS / 1000} s of its start:\n${output}`)),
      PROCESS_START_MS,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ url: match[1], child, output: () => output });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code}) before listening:\n${output}`));
    });
  });
}

/** Ends an example's process and waits until it has. */
export async function stopExample(example: ExampleProcess | undefined): Promise<void> {
  if (!example || example.child.exitCode !== null) return;
  const exited = new Promise((resolve) => example.child.once('exit', resolve));
  example.child.kill('SIGTERM');
  await exited;
}

/**
 * A port nobody listens on now, for a process whose address must be known before it starts
 * (its UGS_PUBLIC_URL, the issuer of its tokens, is http://HOST:PORT).
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
