// The database goes away mid-run and comes back: the service answers 503 unavailable with
// Retry-After (never a hang, never a 500 with driver text), /readyz fails, and it recovers
// by itself once the database is reachable again. Its background loops log the outage now and
// then, not on every pass, and say when it is over.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { POSTGRES_URL, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { onConnection } from '../scripts/scratch-database.ts';
import { httpRequest, spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';
import { startTcpProxy, type TcpProxy } from './helpers/tcp-proxy.ts';
import { openSse } from './helpers/sse.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
import { GENEROUS_WAIT_MS } from './helpers/wait.ts';

describe('[postgres] database outage', { skip: POSTGRES_URL ? false : 'TEST_POSTGRES_URL is not set' }, () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let server: ServerProcess;
  let token: string;

  before(async () => {
    database = await createTestDatabase('postgres');
    const target = new URL(database.url);
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    const viaProxy = new URL(database.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    const env = { DATABASE_URL: viaProxy.toString(), UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    const issued = await issueTokenWithCli(env);
    token = issued.token;
    server = await spawnServer(env);
  });

  after(async () => {
    if (process.env.DEBUG_OUTAGE) console.error(server?.output());
    await server?.stop('SIGKILL');
    await proxy?.close();
    await database?.drop();
  });

  it('answers 503 unavailable with Retry-After while the database is unreachable, then recovers without a restart', async () => {
    const before = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=g1', { token: token });
    assert.equal(before.status, 201);

    await proxy.cut();
    const started = Date.now();
    const during = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=g2', { token });
    assert.equal(during.status, 503, JSON.stringify(during.body));
    assert.equal(during.body.success, 0);
    assert.equal(during.body.error.code, 'unavailable');
    assert.ok(Number(during.headers['retry-after']) > 0, 'Retry-After is set');
    assert.ok(during.body.error.request_id, 'the envelope carries the request id');
    assert.doesNotMatch(JSON.stringify(during.body), /ECONNREFUSED|terminated|pg|postgres/i, 'no driver text leaks');
    assert.ok(Date.now() - started < 20_000, 'the failure is bounded, not a hang');

    const ready = await httpRequest(server.baseUrl, 'GET', '/readyz');
    assert.equal(ready.status, 503);
    assert.equal(ready.body.error.code, 'unavailable');
    const alive = await httpRequest(server.baseUrl, 'GET', '/healthz');
    assert.equal(alive.status, 200, 'the process itself stays alive');

    await proxy.restore();
    let recovered = false;
    for (let i = 0; i < GENEROUS_WAIT_MS / 250 && !recovered; i++) {
      const after = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=g1', { token });
      recovered = after.status === 200;
      if (!recovered) await new Promise((resolve) => setTimeout(resolve, 250));
    }
    assert.ok(recovered, 'requests succeed again once the database is back');
    const readyAgain = await httpRequest(server.baseUrl, 'GET', '/readyz');
    assert.equal(readyAgain.status, 200);
  });

  it('an in-flight request cut off mid-way gets 503, not 500', async () => {
    // Many requests in flight while the connection drops: each ends as 2xx or 503, never 500.
    const inFlight = Array.from({ length: 20 }, (_, i) => httpRequest(server.baseUrl, 'GET', `/api/user?user_group_id=cut-${i}`, { token }));
    await proxy.cut();
    const results = await Promise.all(inFlight);
    for (const r of results) assert.ok(r.status === 201 || r.status === 200 || r.status === 503, `status ${r.status}: ${JSON.stringify(r.body)}`);
    await proxy.restore();
  });

  it('an outage of 12 s: each background loop logs a warning without a stack at most every 10 s, and one line when it is over', async () => {
    // Every loop works: the service answers, and a stream is open (its reads fail too during the outage).
    let healthy = false;
    for (let i = 0; i < 80 && !healthy; i++) {
      healthy = (await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=g1', { token })).status === 200;
      if (!healthy) await sleep(250);
    }
    assert.ok(healthy, 'the service answers before the outage');
    const stream = await openSse(server.baseUrl, '/api/events/stream', { token });
    assert.equal(stream.status, 200);
    await sleep(1500);
    const from = server.output().length;

    await proxy.cut();
    await sleep(12_000);
    await proxy.restore();
    const loopLines = () =>
      server
        .output()
        .slice(from)
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { level: number; msg: string; loop?: string; err?: { stack?: string }; suppressed?: number });
    const failing = ['event sequencer', 'webhook dispatcher', 'event streams'];
    const deadline = Date.now() + 30_000;
    const over = (loop: string) => loopLines().some((line) => line.loop === loop && /works again/.test(line.msg));
    while (!failing.every(over) && Date.now() < deadline) await sleep(100);
    stream.close();

    const lines = loopLines();
    const failures = lines.filter((line) => /failed; will try again/.test(line.msg));
    for (const loop of failing) {
      const ofLoop = failures.filter((line) => line.loop === loop);
      assert.ok(ofLoop.length >= 1 && ofLoop.length <= 3, `${loop}: ${ofLoop.length} failure lines in 12 s (at most one every 10 s)`);
      assert.ok(over(loop), `${loop} says when the outage is over`);
    }
    assert.ok(failures.length <= 4 * 3, `${failures.length} failure lines in all:\n${failures.map((line) => JSON.stringify(line)).join('\n')}`);
    for (const line of failures) {
      assert.equal(line.level, 40, `a warning: ${JSON.stringify(line)}`);
      assert.ok(!line.err?.stack, `no stack for an outage: ${JSON.stringify(line)}`);
    }
    assert.ok(
      failures.some((line) => (line.suppressed ?? 0) > 0),
      'a repeated line says how many it held back',
    );
  });
});

/** One statement on a connection of its own to the server's first database (a database cannot be dropped from a connection to it). */
function onAdminConnection(statement: string): Promise<void> {
  return onConnection(POSTGRES_URL, statement);
}

describe('[postgres] the database is dropped under a running server', { skip: POSTGRES_URL ? false : 'TEST_POSTGRES_URL is not set' }, () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let env: Record<string, string>;
  let token: string;
  let groupToken: string;
  let operations: { method: string; path: string }[];

  const databaseName = () => new URL(database.url).pathname.slice(1);
  /** Every operation of the API description, with a token and a body where it takes one; the path's ids are 1. */
  const callEach = () =>
    Promise.all(
      operations.map(async ({ method, path }) => {
        const authorization = path === '/api/embed/context' ? `Bearer ${groupToken}` : `Token ${token}`;
        const body = method === 'POST' || method === 'PUT' || method === 'PATCH' ? { user_group_id: 'dropped' } : undefined;
        const res = await httpRequest(server.baseUrl, method, path.replaceAll(/\{[^}]+\}/g, '1'), { body, headers: { authorization } });
        return { operation: `${method} ${path}`, ...res };
      }),
    );

  /**
   * The answers that are not 503 storage_unavailable with Retry-After and a request id, but for
   * a 200 from a route outside /api/ that needs no data (/healthz, /metrics, the docs).
   */
  const unexpectedAnswers = (answers: Awaited<ReturnType<typeof callEach>>) =>
    answers
      .filter(
        (res) =>
          !(res.status === 200 && !res.operation.includes(' /api/')) &&
          !(res.status === 503 && res.body.error?.code === 'storage_unavailable' && Number(res.headers['retry-after']) > 0 && res.headers['x-request-id']),
      )
      .map((res) => `${res.operation}: ${res.status} ${res.text.slice(0, 200)}`);

  before(async () => {
    database = await createTestDatabase('postgres');
    env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'), UGS_API_TOKEN_CACHE_MS: '0' };
    token = (await issueTokenWithCli(env)).token;
    server = await spawnServer(env);
    const created = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'before-the-drop' } });
    assert.equal(created.status, 201, created.text);
    groupToken = created.body.user_group.token;
    const description = await httpRequest(server.baseUrl, 'GET', '/openapi.json');
    operations = Object.entries((JSON.parse(description.text) as { paths: Record<string, Record<string, unknown>> }).paths).flatMap(([path, methods]) =>
      Object.keys(methods)
        .map((method) => ({ method: method.toUpperCase(), path }))
        // A stream answers for as long as it is open; its start is what every other read does.
        .filter(({ path }) => path !== '/api/events/stream'),
    );
  });

  after(async () => {
    await server?.stop('SIGKILL');
    await database?.drop();
  });

  it('database dropped: every route that needs the data answers 503 storage_unavailable with Retry-After, /readyz 503, none 500', async () => {
    await onAdminConnection(`drop database ${databaseName()} with (force)`);
    assert.deepEqual(unexpectedAnswers(await callEach()), []);
    const ready = await httpRequest(server.baseUrl, 'GET', '/readyz');
    assert.equal(ready.status, 503, ready.text);
    assert.equal((await httpRequest(server.baseUrl, 'GET', '/healthz')).status, 200, 'the process stays alive');
  });

  it('database created again empty: still 503 storage_unavailable and /readyz 503 (no tables is not a fresh start), none 500', async () => {
    await onAdminConnection(`create database ${databaseName()}`);
    assert.deepEqual(unexpectedAnswers(await callEach()), []);
    assert.equal((await httpRequest(server.baseUrl, 'GET', '/readyz')).status, 503, 'an empty database is not ready');
  });

  it('database set up again (here by the command-line tool): the running server serves it without a restart', async () => {
    const fresh = await issueTokenWithCli(env);
    let res = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=after-the-restore', { token: fresh.token });
    for (let i = 0; i < 40 && res.status !== 201; i++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      res = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=after-the-restore', { token: fresh.token });
    }
    assert.equal(res.status, 201, res.text);
    assert.equal((await httpRequest(server.baseUrl, 'GET', '/readyz')).status, 200);
    const old = await httpRequest(server.baseUrl, 'GET', '/api/users', { token });
    assert.equal(old.status, 401, 'a token of the dropped database is gone with it');
  });
});

describe('[postgres] the database stops accepting the service’s role', { skip: POSTGRES_URL ? false : 'TEST_POSTGRES_URL is not set' }, () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let token: string;
  const role = `ugs_test_role_${crypto.randomBytes(4).toString('hex')}`;

  before(async () => {
    database = await createTestDatabase('postgres');
    await onAdminConnection(`create role ${role} login`);
    await onAdminConnection(`alter database ${new URL(database.url).pathname.slice(1)} owner to ${role}`);
    const asRole = new URL(database.url);
    asRole.username = role;
    const env = { DATABASE_URL: asRole.toString(), UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'), UGS_API_TOKEN_CACHE_MS: '0' };
    token = (await issueTokenWithCli(env)).token;
    server = await spawnServer(env);
  });

  after(async () => {
    await server?.stop('SIGKILL');
    await database?.drop();
    await onAdminConnection(`drop role if exists ${role}`);
  });

  it('credentials refused after the start: 503 storage_unavailable with Retry-After, never 500; served again once the role may log in', async () => {
    assert.equal((await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=r1', { token })).status, 201);
    await onAdminConnection(`alter role ${role} nologin`);
    await onAdminConnection(`select pg_terminate_backend(pid) from pg_stat_activity where usename = '${role}'`);
    // The first calls may meet a connection cut as it was terminated (503 unavailable); then every one is refused at login.
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await httpRequest(server.baseUrl, 'GET', `/api/user?user_group_id=r${i + 2}`, { token }));
    for (const res of answers) assert.equal(res.status, 503, res.text);
    const last = answers[answers.length - 1];
    assert.equal(last.body.error.code, 'storage_unavailable', last.text);
    assert.ok(Number(last.headers['retry-after']) > 0);
    assert.equal((await httpRequest(server.baseUrl, 'GET', '/readyz')).status, 503);

    await onAdminConnection(`alter role ${role} login`);
    const again = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=r1', { token });
    assert.equal(again.status, 200, again.text);
  });
});
