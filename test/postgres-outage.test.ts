// The database goes away mid-run and comes back: the service answers 503 unavailable with
// Retry-After (never a hang, never a 500 with driver text), /readyz fails, and it recovers
// by itself once the database is reachable again.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { POSTGRES_URL, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { httpRequest, spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';
import { startTcpProxy, type TcpProxy } from './helpers/tcp-proxy.ts';
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
});
