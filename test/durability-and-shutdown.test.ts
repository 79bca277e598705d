// What a process's end does to data: an acknowledged write survives SIGKILL, and SIGTERM stops
// accepting, finishes what is in flight and exits 0 (docs/api.md, "Concurrency and
// durability", "Limits and timeouts").
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { forEachBackend } from './helpers/harness.ts';
import { httpRequest, requestsInFlight, spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';
import { listAll, slowPost, tryConnect } from './helpers/requests.ts';
import { Scrape } from './helpers/prometheus.ts';
import { eventually } from './helpers/wait.ts';
import { serverClosedConnection } from './helpers/sockets.ts';
import SQLite from 'better-sqlite3';
import pg from 'pg';

forEachBackend('durability and shutdown', (backend) => {
  let database: TestDatabase;
  let env: Record<string, string>;
  let token: string;
  const running: ServerProcess[] = [];

  async function start(): Promise<ServerProcess> {
    const server = await spawnServer(env);
    running.push(server);
    return server;
  }

  before(async () => {
    database = await createTestDatabase(backend);
    env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    const issued = await issueTokenWithCli({ DATABASE_URL: database.url });
    token = issued.token;
  });

  after(async () => {
    await Promise.all(running.map((s) => s.stop('SIGKILL')));
    await database?.drop();
  });

  it('every write acknowledged before a SIGKILL is there after a restart', async () => {
    const server = await start();
    // 20 groups that the killed batch will update.
    const seeded = await Promise.all(
      Array.from({ length: 20 }, (_, i) => httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: `dur-upd-${i}`, name: 'v1' } })),
    );
    for (const r of seeded) assert.equal(r.status, 201);

    // 50 writes (30 creates, 20 updates) sent at once; SIGKILL the instant the 35th is
    // acknowledged, while the rest may still be in flight.
    const acknowledged: { kind: 'create' | 'update'; id: string; team_id: number; name: string }[] = [];
    let killed: Promise<unknown> | undefined;
    const writes = Array.from({ length: 50 }, (_, i) => {
      const isCreate = i < 30;
      const id = isCreate ? `dur-new-${i}` : `dur-upd-${i - 30}`;
      const name = isCreate ? `created ${i}` : `v2 ${i}`;
      return httpRequest(server.baseUrl, isCreate ? 'POST' : 'PUT', '/api/user', { token, body: { user_group_id: id, name } }).then(
        (r) => {
          if (killed) return; // arrived after the kill was ordered: not counted
          assert.equal(r.status, isCreate ? 201 : 200, JSON.stringify(r.body));
          assert.equal(r.body.success, 1);
          acknowledged.push({ kind: isCreate ? 'create' : 'update', id, team_id: r.body.user_group.team_id, name });
          if (acknowledged.length === 35) {
            killed = server.stop('SIGKILL'); // sends the signal synchronously
          }
        },
        () => undefined, // the connection died with the process
      );
    });
    await Promise.all(writes);
    assert.ok(killed, 'the server was killed');
    const ended = await killed;
    assert.deepEqual(ended, { code: null, signal: 'SIGKILL' });
    assert.equal(acknowledged.length, 35);

    const restarted = await start();
    const stored = await listAll(restarted.baseUrl, token);
    for (const write of acknowledged) {
      const group = stored.get(write.id);
      assert.ok(group, `acknowledged ${write.kind} of ${write.id} was lost`);
      assert.equal(group.team_id, write.team_id);
      assert.equal(group.name, write.name, `acknowledged ${write.kind} of ${write.id} was lost`);
    }
    // The restarted instance still opens the stored tokens (same key, same database).
    const one = await httpRequest(restarted.baseUrl, 'GET', '/api/user', { token, body: { user_group_id: 'dur-upd-0' } });
    assert.equal(one.status, 200);
    assert.equal(one.body.user_group.token, seeded[0].body.user_group.token);
    await restarted.stop('SIGTERM');
  });

  /** Holds the database's write lock (SQLite) or user_groups' (PostgreSQL) until release() is called. */
  async function holdWrites(): Promise<{ release(): Promise<void> }> {
    if (backend === 'sqlite') {
      const connection = new SQLite(database.url.slice('sqlite:'.length));
      connection.exec('begin immediate');
      return {
        async release() {
          connection.exec('rollback');
          connection.close();
        },
      };
    }
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    await client.query('begin');
    await client.query('lock table user_groups in share row exclusive mode');
    return {
      async release() {
        await client.query('rollback');
        await client.end();
      },
    };
  }

  /**
   * Resolves once a write on `server` that began after the call waits for the lock holdWrites()
   * holds: one more BEGIN refused (SQLite), a session waiting for a lock (PostgreSQL).
   */
  async function writeIsWaiting(server: ServerProcess): Promise<void> {
    if (backend === 'sqlite') {
      const refusedBegins = async () =>
        new Scrape((await httpRequest(server.baseUrl, 'GET', '/metrics')).text).value('ugs_db_query_duration_seconds_count', {
          operation: 'begin',
          outcome: 'error',
        });
      const before = await refusedBegins();
      await eventually('a write waiting for the SQLite write lock', async () => (await refusedBegins()) > before);
      return;
    }
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      await eventually('a write waiting for the table lock', async () => {
        const { rows } = await client.query("select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'");
        return rows[0].n > 0;
      });
    } finally {
      await client.end();
    }
  }

  it('a create whose client hangs up before the answer still commits, and its one log line says so (status 201, client_gone)', async () => {
    const server = await start();
    const hold = await holdWrites();
    const payload = JSON.stringify({ user_group_id: 'gone-client' });
    const req = http.request(new URL('/api/user', server.baseUrl), {
      method: 'POST',
      agent: false,
      headers: { authorization: `Token ${token}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) },
    });
    req.on('error', () => undefined); // the hang-up below
    const clientPort = new Promise<number>((resolve) => req.once('socket', (socket) => socket.once('connect', () => resolve(socket.localPort!))));
    const waiting = writeIsWaiting(server);
    req.end(payload);
    await requestsInFlight(server.baseUrl, 1);
    await waiting; // the create is waiting for the database
    req.destroy();
    const port = await clientPort;
    await eventually('the server closed the connection of the client that hung up', () => serverClosedConnection(server.child.pid!, port));
    await hold.release();
    await eventually(
      () => `the create committed:\n${server.output()}`,
      async () => (await listAll(server.baseUrl, token)).has('gone-client'),
    );
    const line = await eventually(
      () => `the request line of the create:\n${server.output()}`,
      () =>
        server
          .output()
          .split('\n')
          .filter((text) => text.startsWith('{'))
          .map((text) => JSON.parse(text) as Record<string, unknown>)
          .find((entry) => entry.msg === 'request' && entry.method === 'POST' && entry.route === '/api/user'),
    );
    assert.equal(line.status, 201);
    assert.equal(line.client_gone, true);
    await server.stop('SIGTERM');
  });

  it('SIGTERM finishes in-flight requests, refuses new connections, and exits 0', async () => {
    const server = await start();
    const closed = new Promise((resolve) => server.child.once('close', resolve));

    // Requests surely in flight: headers and part of the body are on the server.
    const slow = Array.from({ length: 10 }, (_, i) => slowPost(server.baseUrl, token, { user_group_id: `term-slow-${i}` }));
    // And a burst of ordinary requests, answered before the signal.
    const burst = await Promise.all(
      Array.from({ length: 40 }, (_, i) => httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: `term-burst-${i}` } })),
    );
    for (const r of burst) assert.equal(r.status, 201);
    await requestsInFlight(server.baseUrl, slow.length); // the slow requests' headers are on the server

    assert.equal(server.child.kill('SIGTERM'), true);
    await server.waitForOutput(/"msg":"shutting down: finishing in-flight requests"/);
    assert.equal(server.child.exitCode, null, 'the process waits for its in-flight requests');
    assert.equal(await tryConnect(server.baseUrl), 'ECONNREFUSED', 'a new connection is refused while shutting down');

    const answers = await Promise.all(slow.map((s) => s.finish()));
    for (const [i, r] of answers.entries()) {
      assert.equal(r.status, 201, `in-flight request ${i}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.user_group.provided_id, `term-slow-${i}`);
    }

    const ended = await server.stop('SIGTERM');
    await closed;
    assert.deepEqual(ended, { code: 0, signal: null }, server.output());
    assert.match(server.output(), /"msg":"stopped"/);
    assert.equal(await tryConnect(server.baseUrl), 'ECONNREFUSED', 'nothing listens after the exit');

    // What the in-flight requests wrote was committed before the exit.
    const restarted = await start();
    const stored = await listAll(restarted.baseUrl, token);
    for (const [i, r] of answers.entries()) assert.equal(stored.get(`term-slow-${i}`)?.team_id, r.body.user_group.team_id);
    await restarted.stop('SIGTERM');
  });

  it("SIGTERM exits 0 within seconds even when nobody reads the server's log output", async () => {
    const server = await start();
    // Stop reading its standard output: once the pipe's buffer (64 KiB) is full, every log write waits.
    server.child.stdout!.pause();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 20 });
    const get = () =>
      new Promise<void>((resolve, reject) => {
        const req = http.get(new URL('/healthz', server.baseUrl), { agent }, (res) => {
          res.resume();
          res.on('end', resolve);
        });
        req.on('error', reject);
      });
    // ~2,000 request log lines: several times what the pipe holds.
    for (let round = 0; round < 100; round++) await Promise.all(Array.from({ length: 20 }, get));
    agent.destroy();
    const started = Date.now();
    const ended = await server.stop('SIGTERM');
    assert.deepEqual(ended, { code: 0, signal: null });
    assert.ok(Date.now() - started < 8000, `exited after ${Date.now() - started} ms`);
  });

  it('SIGTERM on an idle server with an open keep-alive connection exits 0', async () => {
    const server = await start();
    const warm = await httpRequest(server.baseUrl, 'GET', '/api/users', { token });
    assert.equal(warm.status, 200); // leaves an idle keep-alive connection open
    const ended = await server.stop('SIGTERM');
    assert.deepEqual(ended, { code: 0, signal: null }, server.output());
  });
});
