// While the primary cannot be reached, requests learn it at once (docs/operations.md, "When the
// primary cannot be reached"): after a first connection fails, the pool's breaker answers
// everything that needs the database 503 unavailable with Retry-After without trying a
// connection of its own, /readyz says so without waiting, and one probe finds the primary again,
// after which the service works without a restart. The database sits behind a proxy the test
// switches between forwarding, holding connections (HAProxy with no primary: accepted, never
// answered) and refusing them. And the start says whether the primary commits synchronously.
// A connection that was opening while the process itself could not run (starved of CPU, its
// loop blocked) is not taken for an outage: its connect timeout counts the time the process ran.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { POSTGRES_URL, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { httpRequest, issueTokenWithCli, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { startSwitchProxy, type SwitchProxy } from './helpers/switch-proxy.ts';
import { eventually } from './helpers/wait.ts';
import { startInterceptingProxy } from './helpers/intercepting-proxy.ts';
import { buildTestApp, issueTestToken, openTestDatabase, type BuiltApp, type OpenDatabase } from './helpers/harness.ts';
import { CONNECT_TIMEOUT_MS } from '../src/db/postgres-pool.ts';
import type pg from 'pg';

const skip = POSTGRES_URL ? false : 'TEST_POSTGRES_URL is not set';

type Answer = Awaited<ReturnType<typeof httpRequest>>;
/** What /readyz says of the database. */
const databaseOf = (answer: Answer) => (answer.body as unknown as { database?: unknown }).database;

function assertUnavailable(answer: Answer, what: string) {
  assert.equal(answer.status, 503, `${what}: ${answer.status} ${answer.text}`);
  assert.equal(answer.body.error?.code, 'unavailable', `${what}: ${answer.text}`);
  assert.ok(Number(answer.headers['retry-after']) > 0, `${what}: Retry-After ${answer.headers['retry-after']}`);
}

describe('[postgres] the primary cannot be reached: the breaker', { skip }, () => {
  let database: TestDatabase;
  let proxy: SwitchProxy;
  let server: ServerProcess;
  let token: string;
  let groupToken: string;

  const lookup = (id: string) => httpRequest(server.baseUrl, 'GET', `/api/user?user_group_id=${id}`, { token });
  const create = (id: string) => httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id } });
  const ready = () => httpRequest(server.baseUrl, 'GET', '/readyz');
  /** What every kind of request answers while the primary is away: creates, lookups, the embed context, a mint. */
  const everyKind = (n: number) =>
    Promise.all(
      Array.from({ length: n }, (_, i) => {
        switch (i % 4) {
          case 0:
            return create(`away-${crypto.randomUUID()}`);
          case 1:
            return lookup('before');
          case 2:
            return httpRequest(server.baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${groupToken}` } });
          default:
            return httpRequest(server.baseUrl, 'POST', '/api/embed_token', { token, body: { user_group_id: 'before' } });
        }
      }),
    );
  /** The service works again, by itself: a create succeeds. */
  const recovered = () => eventually('a create succeeds once the database is back', async () => (await create(`back-${crypto.randomUUID()}`)).status === 201);

  before(async () => {
    database = await createTestDatabase('postgres');
    const target = new URL(database.url);
    proxy = await startSwitchProxy(target.hostname, Number(target.port || 5432));
    const viaProxy = new URL(database.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    const env = { DATABASE_URL: viaProxy.toString(), UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    token = (await issueTokenWithCli(env)).token;
    server = await spawnServer(env);
    const created = await create('before');
    assert.equal(created.status, 201, created.text);
    groupToken = created.body.user_group.token;
  });

  after(async () => {
    if (process.env.DEBUG_BREAKER) console.error(server?.output());
    await server?.stop('SIGKILL');
    await proxy?.close();
    await database?.drop();
  });

  it('a proxy that holds connections (no primary behind it): every request answers 503 with Retry-After, and after the first none waits for a connection of its own; once the database is back the service recovers without a restart', async () => {
    const readyBefore = await ready();
    assert.equal(readyBefore.status, 200, readyBefore.text);
    assert.deepEqual(databaseOf(readyBefore), { primary: 'reachable', writable: true });

    await proxy.hold();
    // The first request finds out: its connection is held until the connect timeout.
    assertUnavailable(await create(`first-${crypto.randomUUID()}`), 'the first create');
    const notReady = await ready();
    assertUnavailable(notReady, '/readyz');
    assert.deepEqual(databaseOf(notReady), { primary: 'unreachable', writable: false });

    // 40 requests at once: with the breaker open none tries a connection; only the probe holds one at a time.
    proxy.resetHeldMax();
    const acceptedBefore = proxy.accepted();
    const answers = await everyKind(40);
    answers.forEach((answer, i) => assertUnavailable(answer, `request ${i}`));
    // (Connections tried before the breaker opened, by the loops or the first request, may still be held: not counted.)
    assert.ok(
      proxy.heldMax() <= 2,
      `connections opened during the 40 requests and held at once: ${proxy.heldMax()} (the probe's, one at a time, not one per request)`,
    );
    assert.ok(proxy.accepted() - acceptedBefore < 40, `${proxy.accepted() - acceptedBefore} connections for 40 requests`);
    // And one after the other, each after the last was answered: a request does not try a connection of its own.
    const acceptedBeforeSequence = proxy.accepted();
    for (let i = 0; i < 20; i++) assertUnavailable(await create(`one-by-one-${i}`), `create ${i} of 20, one by one`);
    const tried = proxy.accepted() - acceptedBeforeSequence;
    assert.ok(tried < 10, `connections tried while 20 creates were answered one by one: ${tried} (the probe's, not one per create)`);
    assertUnavailable(await ready(), '/readyz, again');
    assert.match((await httpRequest(server.baseUrl, 'GET', '/metrics')).text, /^ugs_db_pool_breaker_open 1$/m, 'the gauge says the breaker is open');

    await proxy.forward();
    await recovered();
    const readyAgain = await ready();
    assert.equal(readyAgain.status, 200, readyAgain.text);
    assert.deepEqual(databaseOf(readyAgain), { primary: 'reachable', writable: true });
    assert.equal((await lookup('before')).status, 200);
    assert.match((await httpRequest(server.baseUrl, 'GET', '/metrics')).text, /^ugs_db_pool_breaker_open 0$/m, 'and closed again');

    // One line when the breaker opened, one when it closed, in that order; none per request.
    await server.logsUpToNow();
    const lines = server.output();
    const opened = lines.indexOf('database primary unreachable');
    const closed = lines.indexOf('database primary reachable again', opened);
    assert.ok(opened >= 0 && closed > opened, 'the log says when the primary went away, then when it came back');
  });

  it('a port that refuses connections: every request answers 503 with Retry-After, /readyz says unreachable, and the service recovers once the port listens again', async () => {
    await proxy.refuse();
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(...(await everyKind(4)));
    answers.forEach((answer, i) => assertUnavailable(answer, `request ${i}`));
    const notReady = await ready();
    assertUnavailable(notReady, '/readyz');
    assert.deepEqual(databaseOf(notReady), { primary: 'unreachable', writable: false });
    assert.equal((await httpRequest(server.baseUrl, 'GET', '/healthz')).status, 200, 'the process stays alive');

    await proxy.forward();
    await recovered();
    assert.equal((await ready()).status, 200);
  });

  it('no 500 was answered or logged through either outage', async () => {
    await server.logsUpToNow();
    assert.doesNotMatch(server.output(), /"statusCode":500|unexpected error/);
  });

  it('the start says in one line whether the primary commits synchronously: a plain server does not, and what an acknowledged write survives', () => {
    const line = server
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; synchronous?: boolean; synchronous_commit?: string; synchronous_standby_names?: string })
      .filter((l) => /commits? synchronously/.test(l.msg));
    assert.equal(line.length, 1, 'one line');
    assert.equal(line[0].synchronous, false);
    assert.equal(line[0].synchronous_standby_names, '');
    assert.match(line[0].msg, /does not commit synchronously/);
    assert.match(line[0].msg, /not the loss of the primary's node/);
  });
});

/** Keeps this process from doing anything else for `ms`: what a host starved of CPU does to a server. */
function blockTheProcess(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe('[postgres] a connection opened while the process could not run', { skip }, () => {
  let database: OpenDatabase;
  let built: BuiltApp;
  let token: string;
  before(async () => {
    database = await openTestDatabase('postgres');
    built = await buildTestApp(database);
    token = (await issueTestToken(database.handle)).token;
  });
  after(() => database?.close());

  it('is not taken for an unreachable primary: a request whose connection was opening while the process was blocked past the connect timeout answers, and the breaker stays closed', async () => {
    const pool = database.handle.pool as pg.Pool;
    // Every idle connection held, so that the request must open one of its own.
    const held = await Promise.all(Array.from({ length: pool.idleCount }, () => pool.connect()));
    let created: { status: number; text: string };
    try {
      const opened = pool.totalCount;
      const answer = built.request('POST', '/api/user', { token, body: { user_group_id: 'while-blocked' } });
      await eventually('the request opens a connection', async () => pool.totalCount > opened);
      // The connection's answer arrives meanwhile; the process sees it only once it runs again.
      blockTheProcess(CONNECT_TIMEOUT_MS * 2);
      created = await answer;
    } finally {
      for (const client of held) client.release();
    }
    assert.equal(created.status, 201, created.text);
    assert.equal(database.handle.primaryStatus?.(), 'reachable');
    assert.equal((await built.request('GET', '/readyz')).status, 200);
  });
});

/**
 * A proxy in front of PostgreSQL that, once armed, closes every connection it has and resets
 * each new one at its first simple query (a new connection's session settings), with RST.
 */
async function startResetAtFirstQuery(target: URL) {
  let armed = false;
  const proxy = await startInterceptingProxy(target, {
    toServer: (chunk, connection) => (armed && chunk[0] === 0x51 ? connection.close({ reset: true }) : connection.forward(chunk)),
  });
  return {
    url: proxy.url,
    arm: () => {
      armed = true;
      proxy.closeAll();
    },
    disarm: () => {
      armed = false;
    },
    close: proxy.close,
  };
}

describe('[postgres] a connection reset while its session is being set up', { skip }, () => {
  it('answers 503 and the process lives on: the reset fails the connect, it is not an error nobody listens to', async () => {
    const database = await createTestDatabase('postgres');
    const proxy = await startResetAtFirstQuery(new URL(database.url));
    let server: ServerProcess | undefined;
    try {
      const env = { DATABASE_URL: proxy.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
      const token = (await issueTokenWithCli(env)).token;
      server = await spawnServer(env);
      const create = (id: string) => httpRequest(server!.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id } });
      assert.equal((await create('before-reset')).status, 201);
      proxy.arm();
      const during = await Promise.all(Array.from({ length: 5 }, (_, i) => create(`during-reset-${i}`)));
      for (const answer of during) assert.equal(answer.status, 503, answer.text);
      proxy.disarm();
      await eventually('a create succeeds once connections set up again', async () => (await create(`after-reset-${crypto.randomUUID()}`)).status === 201);
      assert.equal(server.child.exitCode, null, 'the server process still runs');
      assert.doesNotMatch(server.output(), /uncaught exception/);
    } finally {
      await server?.stop('SIGKILL');
      await proxy.close();
      await database.drop();
    }
  });
});
