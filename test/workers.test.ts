// UGS_WORKERS (docs/operations.md, "Workers"): several server processes on one port, on real
// processes and sockets. One start (one migration run, one banner), rate limits and /metrics
// for the whole instance, SIGTERM to the primary alone drains every worker, a dead worker is
// replaced (also one that served while another was still starting), /readyz is 200 only while
// every worker serves, and workers that keep dying stop the instance.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { forEachBackend } from './helpers/harness.ts';
import { Scrape } from './helpers/prometheus.ts';
import { httpRequest, issueTokenWithCli, ROOT, runNode, SERVER_ENTRY, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { slowPost, tryConnect } from './helpers/requests.ts';
import { answeredBy, childPids, isRunning, logLines, waitUntil, workerPids } from './helpers/workers.ts';

const RATE_LIMIT_MAX = 12;
/** Holds one worker's start until a file exists (node --import; test/helpers/hold-worker-start.mjs). */
const HOLD_WORKER_START = path.join(ROOT, 'test/helpers/hold-worker-start.mjs');

/** A request on a connection of its own: the primary hands each new connection to the next worker. */
function onNewConnection(baseUrl: string, method: string, pathAndQuery: string, options: Parameters<typeof httpRequest>[3] = {}) {
  return httpRequest(baseUrl, method, pathAndQuery, { ...options, newConnection: true });
}

/** ugs_http_requests_total of GET `route` answered 200, as one scrape says. */
async function answered200(baseUrl: string, route: string): Promise<number> {
  const metrics = await onNewConnection(baseUrl, 'GET', '/metrics');
  assert.equal(metrics.status, 200);
  return new Scrape(metrics.text).value('ugs_http_requests_total', { method: 'GET', route, status: '200' });
}

forEachBackend('two workers', (backend) => {
  let database: TestDatabase;
  let env: Record<string, string>;
  const running: ServerProcess[] = [];

  async function start(extra: Record<string, string> = {}): Promise<ServerProcess> {
    const server = await spawnServer({ ...env, UGS_WORKERS: '2', ...extra });
    running.push(server);
    return server;
  }

  before(async () => {
    database = await createTestDatabase(backend);
    env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
  });

  after(async () => {
    await Promise.all(running.map((server) => server.stop('SIGKILL')));
    await database?.drop();
  });

  it('workers: the first start migrates once, prints one banner, and says "Server listening at" once both workers listen', async () => {
    const server = await start({ UGS_BOOTSTRAP: 'true' });
    const [first, second] = await workerPids(server, 2);
    assert.ok(first && second);
    // The banner comes on stderr, the log lines on stdout: each pipe in its own time.
    await waitUntil(
      () => /"msg":"worker listening at/.test(server.output()) && /First start on an empty database/.test(server.output()),
      'the workers’ lines and the banner',
    );
    const output = server.output();
    assert.equal(output.match(/First start on an empty database/g)?.length, 1, output);
    assert.equal(output.match(/Server listening at/g)?.length, 1, output);
    const ready = logLines(server).filter((line) => line.msg === 'database ready');
    const migrated = ready.filter((line) => (line.applied as string[]).length > 0);
    assert.equal(migrated.length, 1, 'one process applied the migrations');
    assert.equal(migrated[0].pid, server.child.pid, 'the primary, before the workers started');
    const token = /ugs_api_[0-9A-Za-z]{49}/.exec(output)![0];
    const answer = await onNewConnection(server.baseUrl, 'GET', '/api/user?user_group_id=banner', { token });
    assert.equal(answer.status, 201);
    // The pages every worker serves as one process does.
    for (const page of ['/docs', '/console', '/openapi.json']) {
      for (let i = 0; i < 2; i++) assert.equal((await onNewConnection(server.baseUrl, 'GET', page)).status, 200, page);
    }
    assert.deepEqual(await server.stop('SIGTERM'), { code: 0, signal: null });
    env.UGS_BOOTSTRAP = 'false';
  });

  it(`workers: the (max+1)th request of a window is 429 whichever worker answers, on the management API and the embed side (max ${RATE_LIMIT_MAX})`, async () => {
    const limits = { UGS_RATE_LIMIT_MAX: String(RATE_LIMIT_MAX), UGS_EMBED_RATE_LIMIT_MAX: String(RATE_LIMIT_MAX) };
    const server = await start(limits);
    const { token } = await issueTokenWithCli(env, ['--account', 'limited']);
    const groupToken = (await onNewConnection(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'limited' } })).body.user_group.token;
    for (const [what, send] of [
      ['management', () => onNewConnection(server.baseUrl, 'GET', '/api/user?user_group_id=limited', { token })],
      ['embed', () => onNewConnection(server.baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${groupToken}` } })],
    ] as const) {
      // The management budget already spent one request on the create above.
      const budget = what === 'management' ? RATE_LIMIT_MAX - 1 : RATE_LIMIT_MAX;
      const within = [];
      for (let i = 0; i < budget; i++) within.push(await send());
      assert.deepEqual(
        within.map((r) => r.status),
        within.map(() => 200),
        `${what}: every request within the budget is served`,
      );
      const beyond = [];
      for (let i = 0; i < 4; i++) beyond.push(await send());
      assert.deepEqual(
        beyond.map((r) => r.status),
        [429, 429, 429, 429],
        `${what}: every request beyond it is refused`,
      );
      assert.equal(beyond[0].body.error.code, 'rate_limited');
      const served = await answeredBy(
        server,
        [...within, ...beyond].map((r) => String(r.headers['x-request-id'])),
      );
      assert.equal(new Set(served.values()).size, 2, `${what}: both workers answered, within and beyond the budget`);
    }
  });

  it('workers: /metrics counts the requests of both workers together, and its counters do not go down when a worker dies', async () => {
    const server = await start();
    const { token } = await issueTokenWithCli(env, ['--account', 'counted']);
    const route = '/api/users';
    const before = await answered200(server.baseUrl, route);
    const answers = await Promise.all(Array.from({ length: 20 }, () => onNewConnection(server.baseUrl, 'GET', route, { token })));
    assert.ok(answers.every((r) => r.status === 200));
    const served = await answeredBy(
      server,
      answers.map((r) => String(r.headers['x-request-id'])),
    );
    assert.equal(new Set(served.values()).size, 2, 'both workers answered');
    // Whichever worker answers the scrape, it counts every request.
    for (let i = 0; i < 4; i++) assert.equal(await answered200(server.baseUrl, route), before + 20);

    const [victim] = await workerPids(server, 2);
    process.kill(victim, 'SIGKILL');
    await waitUntil(() => !childPids(server.child.pid!).includes(victim) && childPids(server.child.pid!).length === 2, 'a new worker');
    assert.equal(await answered200(server.baseUrl, route), before + 20, 'what the dead worker counted is still counted');
  });

  it('workers: SIGTERM to the primary alone: every worker finishes its in-flight requests, new connections are refused, exit 0, no process left', async () => {
    const server = await start();
    const { token } = await issueTokenWithCli(env, ['--account', 'drained']);
    const workers = await workerPids(server, 2);
    // In flight on both workers: each slow request has its own connection.
    const slow = Array.from({ length: 6 }, (_, i) => slowPost(server.baseUrl, token, { user_group_id: `drained-${i}` }));
    await new Promise((resolve) => setTimeout(resolve, 500)); // let the headers arrive
    assert.equal(server.child.kill('SIGTERM'), true);
    await waitUntil(
      () => logLines(server).filter((line) => line.msg === 'shutting down: finishing in-flight requests').length === 2,
      'both workers to begin shutting down',
    );
    assert.equal(server.child.exitCode, null, 'the primary waits for its workers');
    assert.equal(await tryConnect(server.baseUrl), 'ECONNREFUSED', 'a new connection is refused while shutting down');
    const answers = await Promise.all(slow.map((s) => s.finish()));
    assert.deepEqual(
      answers.map((r) => r.status),
      answers.map(() => 201),
    );
    const served = await answeredBy(
      server,
      answers.map((r) => r.requestId),
    );
    assert.equal(new Set(served.values()).size, 2, 'both workers had requests in flight');
    assert.deepEqual(await server.stop('SIGTERM'), { code: 0, signal: null }, server.output());
    for (const pid of workers) assert.equal(isRunning(pid), false, `worker ${pid} is gone`);
  });

  /**
   * Two workers, of which the one with cluster id `held` (3: the first replacement) does not
   * start until release(). With 1 or 2 held, the server is there once the other worker listens.
   */
  async function startHolding(held: number) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-workers-hold-'));
    const go = path.join(dir, 'go');
    const server = await spawnServer(
      { ...env, UGS_WORKERS: '2', HOLD_WORKER: String(held), HOLD_UNTIL: go },
      { nodeArgs: ['--import', HOLD_WORKER_START], listening: held <= 2 ? /worker listening at (http:\/\/127\.0\.0\.1:\d+)/ : undefined },
    );
    running.push(server);
    after(() => fs.rmSync(dir, { recursive: true, force: true }));
    return { server, release: () => fs.writeFileSync(go, '') };
  }

  /** /readyz's status on `count` new connections in a row (the primary hands them to the workers in turn). */
  async function readiness(baseUrl: string, count = 4): Promise<number[]> {
    const statuses = [];
    for (let i = 0; i < count; i++) statuses.push((await onNewConnection(baseUrl, 'GET', '/readyz')).status);
    return statuses;
  }

  it('workers: /readyz is 503 unavailable while a worker is still starting, though another serves, and 200 once both serve', async () => {
    const { server, release } = await startHolding(2);
    assert.equal((await onNewConnection(server.baseUrl, 'GET', '/healthz')).status, 200, 'one worker serves');
    const starting = await onNewConnection(server.baseUrl, 'GET', '/readyz');
    assert.equal(starting.status, 503, starting.text);
    assert.equal(starting.body.error.code, 'unavailable');
    assert.match(starting.body.error.message, /not every worker of this instance serves yet/);
    assert.ok(starting.headers['retry-after']);
    assert.deepEqual(await readiness(server.baseUrl), [503, 503, 503, 503]);

    release();
    await server.waitForOutput(/Server listening at/);
    await waitUntil(async () => (await readiness(server.baseUrl)).every((status) => status === 200), '/readyz 200 on both workers');
  });

  it('workers: kill -9 of a worker that serves while the other is still starting does not stop the instance: it is replaced and the start completes', async () => {
    const { server, release } = await startHolding(2);
    const servingPid = Number(logLines(server).find((line) => String(line.msg).startsWith('worker listening at'))?.pid);
    assert.equal((await onNewConnection(server.baseUrl, 'GET', '/healthz')).status, 200, 'it serves');
    process.kill(servingPid, 'SIGKILL');
    await server.waitForOutput(/"msg":"a worker died; starting another"/);
    release();
    // With PORT=0 the port closed when its only listener died: the start completes on a new one.
    const [, baseUrl] = await server.waitForOutput(/Server listening at (http:\/\/127\.0\.0\.1:\d+)/);
    const workers = await workerPids(server, 2);
    assert.equal(workers.includes(servingPid), false);
    await waitUntil(async () => (await readiness(baseUrl)).every((status) => status === 200), '/readyz 200 on both workers');
    assert.doesNotMatch(server.output(), /a worker exited before it could serve/);
    assert.equal(server.child.exitCode, null, 'the instance still runs');
  });

  it('workers: after a worker dies, /readyz is 503 until its replacement serves', async () => {
    const { server, release } = await startHolding(3);
    const [victim] = await workerPids(server, 2);
    await waitUntil(async () => (await readiness(server.baseUrl)).every((status) => status === 200), '/readyz 200 on both workers');
    process.kill(victim, 'SIGKILL');
    await server.waitForOutput(/"msg":"a worker died; starting another"/);
    await waitUntil(async () => (await readiness(server.baseUrl, 1))[0] === 503, '/readyz 503 on the worker left');
    assert.deepEqual(await readiness(server.baseUrl), [503, 503, 503, 503], 'while the replacement starts');
    release();
    await waitUntil(async () => (await readiness(server.baseUrl)).every((status) => status === 200), '/readyz 200 once the replacement serves');
  });

  it('workers: workers that keep dying stop the instance with exit code 1 instead of starting new ones forever', async () => {
    // A real failure: the key file goes away while the instance runs, so a new worker cannot start.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-workers-'));
    const keyFile = path.join(dir, 'secret.key');
    fs.writeFileSync(keyFile, `${env.UGS_SECRET_KEY}\n`, { mode: 0o600 }); // the key this database's tokens are sealed with
    const server = await start({ UGS_SECRET_KEY: '', UGS_KEY_FILE: keyFile });
    const workers = await workerPids(server, 2);
    fs.rmSync(keyFile);
    process.kill(workers[0], 'SIGKILL');
    assert.deepEqual(await server.exited, { code: 1, signal: null }, server.output());
    assert.match(server.output(), /"msg":"a worker died; starting another"/);
    assert.match(server.output(), /the key file [^\n]*secret\.key is gone/);
    assert.match(server.output(), /"msg":"workers keep dying: stopping the instance"/);
    for (const pid of workers) assert.equal(isRunning(pid), false, `worker ${pid} is gone`);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('workers: a worker that cannot start at first (its port taken) makes the start fail with exit code 1', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as net.AddressInfo;
    const result = await runNode([SERVER_ENTRY], { ...env, UGS_WORKERS: '2', PORT: String(port), HOST: '127.0.0.1', UGS_BOOTSTRAP: 'false' });
    taken.close();
    assert.equal(result.code, 1, result.stdout + result.stderr);
    assert.match(result.stderr, /EADDRINUSE/);
    assert.match(result.stderr, /a worker exited before it could serve/);
  });
});

it('UGS_WORKERS: anything but auto or a whole number from 1 is a configuration error at start', async () => {
  for (const value of ['0', 'two', '1.5']) {
    const result = await runNode([SERVER_ENTRY], { UGS_WORKERS: value, PORT: '0', DATABASE_URL: 'sqlite::memory:' });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /configuration error: UGS_WORKERS must be auto or an integer from 1 to 256, got/);
  }
});
