// The service behind a real PgBouncer (Debian's pgbouncer package; CI installs it), in both
// pool modes, as docs/operations.md ("PgBouncer") describes:
// - transaction mode breaks what the service does by default, and the test shows how: a
//   named prepared statement lives on one server connection, and PgBouncer refuses the
//   statement_timeout startup parameter;
// - with UGS_PGBOUNCER_TRANSACTION_MODE=true, two instances start together on an empty
//   database through it (the migration lock is transaction-level), and races, hot reads and
//   the embed side work;
// - session mode works as the service is, once PgBouncer ignores statement_timeout.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createTestDatabase, POSTGRES_URL, type TestDatabase } from './helpers/backends.ts';
import { assertExactlyOneCreated } from './helpers/harness.ts';
import { httpRequest, issueTokenWithCli, reapOnExit, spawnServer, spawnServers } from './helpers/processes.ts';
import { PROCESS_START_MS } from './helpers/wait.ts';

const PGBOUNCER = '/usr/sbin/pgbouncer';
// Like the PostgreSQL half: CI must run it; elsewhere its absence is said loudly.
const missing = !POSTGRES_URL ? 'no TEST_POSTGRES_URL' : !fs.existsSync(PGBOUNCER) ? `no ${PGBOUNCER} (apt-get install pgbouncer)` : '';
const skip = missing && !process.env.CI ? `SKIPPED: ${missing}` : false;

interface Bouncer {
  /** `database`'s URL through PgBouncer. */
  urlOf(databaseUrl: string): string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function startPgBouncer(mode: 'session' | 'transaction', extra: string[] = []): Promise<Bouncer> {
  assert.ok(!missing, missing);
  const upstream = new URL(POSTGRES_URL);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `ugs-pgbouncer-${mode}-`));
  fs.chmodSync(dir, 0o755); // PgBouncer refuses to run as root: it reads its file as another user
  const port = await freePort();
  const password = upstream.password ? ` password=${decodeURIComponent(upstream.password)}` : '';
  const ini = path.join(dir, 'pgbouncer.ini');
  fs.writeFileSync(
    ini,
    [
      '[databases]',
      `* = host=${upstream.hostname} port=${upstream.port || 5432} user=${decodeURIComponent(upstream.username) || 'postgres'}${password}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = any',
      `pool_mode = ${mode}`,
      // Fewer server connections than the service's pool: clients really share them.
      'default_pool_size = 3',
      'max_client_conn = 200',
      ...extra,
    ].join('\n') + '\n',
    { mode: 0o644 },
  );
  const asUser = process.getuid?.() === 0 ? ['-u', 'postgres'] : [];
  const child: ChildProcess = reapOnExit(spawn(PGBOUNCER, [...asUser, ini], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  child.stdout!.on('data', (c) => (output += c));
  child.stderr!.on('data', (c) => (output += c));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`pgbouncer did not print its listening line within ${PROCESS_START_MS / 1000} s:\n${output}`)),
      PROCESS_START_MS,
    );
    const check = () => {
      if (/listening on 127\.0\.0\.1:\d+/.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`pgbouncer exited (${code}):\n${output}`));
    });
  });
  return {
    urlOf(databaseUrl) {
      const url = new URL(databaseUrl);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      return url.toString();
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGINT');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('PgBouncer in transaction pool mode', { skip }, () => {
  let bouncer: Bouncer;
  let database: TestDatabase;
  before(async () => {
    bouncer = await startPgBouncer('transaction');
    database = await createTestDatabase('postgres');
  });
  after(async () => {
    await bouncer?.stop();
    await database?.drop();
  });

  it('pgbouncer (transaction mode): why the switch exists: a named statement lives on one server connection, and statement_timeout is refused', async () => {
    const url = bouncer.urlOf(database.url);
    const refused = new pg.Client({ connectionString: url, statement_timeout: 5000 });
    await assert.rejects(refused.connect(), /unsupported startup parameter: statement_timeout/);
    await refused.end().catch(() => undefined);

    // Two clients, each preparing "its own" statement of the same name (as each connection of
    // the service's pool would): the third server connection is never needed, they share one.
    const clients = [new pg.Client({ connectionString: url }), new pg.Client({ connectionString: url })];
    try {
      for (const client of clients) await client.connect();
      const named = { name: 'ugs_probe', text: 'select $1::int as n', values: [1] };
      await clients[0].query(named);
      await assert.rejects(clients[1].query(named), /prepared statement "ugs_probe" already exists/);
    } finally {
      for (const client of clients) await client.end().catch(() => undefined);
    }
  });

  it('pgbouncer (transaction mode, UGS_PGBOUNCER_TRANSACTION_MODE=true): two instances migrate an empty database together, then races, hot reads and embed lookups are answered', async () => {
    const env = {
      DATABASE_URL: bouncer.urlOf(database.url),
      UGS_PGBOUNCER_TRANSACTION_MODE: 'true',
      UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'),
    };
    // Both start at once on the empty database: one migrates, the other waits and finds it done.
    const servers = await spawnServers(2, env);
    try {
      const { token } = await issueTokenWithCli(env);
      const call = (i: number, method: string, url: string, body?: unknown) => httpRequest(servers[i % 2].baseUrl, method, url, { token, body });

      const race = await Promise.all(Array.from({ length: 30 }, (_, i) => call(i, 'GET', '/api/user?user_group_id=raced')));
      const created = assertExactlyOneCreated(race);

      const ids = Array.from({ length: 20 }, (_, i) => `group-${i}`);
      for (const [i, id] of ids.entries()) assert.equal((await call(i, 'POST', '/api/user', { user_group_id: id, properties: { n: i } })).status, 201);
      // Concurrent lookups: batched into one statement per turn, on whichever server connection.
      const lookups = await Promise.all(
        ids.flatMap((id, i) => [call(i, 'GET', `/api/user?user_group_id=${id}`), call(i + 1, 'GET', `/api/user?user_group_id=${id}`)]),
      );
      lookups.forEach((res, i) => {
        assert.equal(res.status, 200, res.text);
        assert.equal(res.body.user_group.provided_id, ids[Math.floor(i / 2)]);
      });
      const embeds = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          httpRequest(servers[i % 2].baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${created.body.user_group.token}` } }),
        ),
      );
      for (const res of embeds) assert.equal(res.body.user_group.provided_id, 'raced', res.text);
    } finally {
      for (const server of servers) assert.equal((await server.stop()).code, 0, server.output());
    }

    const direct = new pg.Client({ connectionString: database.url });
    await direct.connect();
    try {
      const { rows } = await direct.query('select count(*)::int as n, count(distinct name)::int as distinct_names from kysely_migration');
      assert.ok(rows[0].n > 0 && rows[0].n === rows[0].distinct_names, `each migration ran once: ${JSON.stringify(rows)}`);
      const { rows: locks } = await direct.query(
        "select count(*)::int as n from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())",
      );
      assert.equal(locks[0].n, 0, 'no advisory lock was left behind on a server connection');
    } finally {
      await direct.end();
    }
  });
});

describe('PgBouncer in session pool mode', { skip }, () => {
  let bouncer: Bouncer;
  let database: TestDatabase;
  before(async () => {
    // The one line session mode needs: PgBouncer refuses startup parameters it does not know.
    bouncer = await startPgBouncer('session', ['ignore_startup_parameters = statement_timeout']);
    database = await createTestDatabase('postgres');
  });
  after(async () => {
    await bouncer?.stop();
    await database?.drop();
  });

  it('pgbouncer (session mode, no switch, UGS_DB_POOL_SIZE within its pool): the command-line tool migrates through it, the service serves with named statements', async () => {
    // A client keeps its server connection for as long as it is connected: with more clients
    // than PgBouncer's pool (3 here), the others wait for one and time out (503). So the
    // service's pool must fit in it.
    const env = { DATABASE_URL: bouncer.urlOf(database.url), UGS_DB_POOL_SIZE: '3', UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    const { token } = await issueTokenWithCli(env); // first: it migrates, and its connection is gone before the server's come
    const server = await spawnServer(env);
    try {
      assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'session' } })).status, 201);
      const lookups = await Promise.all(Array.from({ length: 30 }, () => httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=session', { token })));
      for (const res of lookups) assert.equal(res.status, 200, res.text);
    } finally {
      assert.equal((await server.stop()).code, 0, server.output());
    }
  });
});
