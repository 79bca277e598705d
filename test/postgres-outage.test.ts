// The database goes away mid-run and comes back: the service answers 503 unavailable with
// Retry-After (never a hang, never a 500 with driver text), /readyz fails, and it recovers
// by itself once the database is reachable again. Its background loops log the outage now and
// then, not on every pass, and say when it is over.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { POSTGRES_URL, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { httpRequest, spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';
import { startTcpProxy, type TcpProxy } from './helpers/tcp-proxy.ts';
import { openSse } from './helpers/sse.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
    for (let i = 0; i < 40 && !recovered; i++) {
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

  it('an outage of 12 s: each background loop logs a warning without a stack at most every 10 s, and one line when it is over', {
    timeout: 90_000,
  }, async () => {
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
