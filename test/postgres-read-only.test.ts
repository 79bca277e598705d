// A PostgreSQL that cannot take writes now (a hot standby, a primary restarting in recovery or
// demoted, a database set to default_transaction_read_only) is an outage that passes, not a
// fault: writes answer 503 unavailable with Retry-After and change nothing, reads keep
// answering, and a connection that met it leaves the pool, so that the first write after the
// database takes writes again succeeds (docs/api.md, "Errors"; docs/operations.md, "When the
// primary cannot be reached").
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { sql } from '../src/db/kysely.ts';
import { POSTGRES_URL, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { onConnection } from '../scripts/scratch-database.ts';
import { openTestDatabase, type OpenDatabase } from './helpers/harness.ts';
import { inTransaction } from '../src/db/transaction.ts';
import { isDatabaseUnavailable } from '../src/db/errors.ts';
import { httpRequest, issueTokenWithCli, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { eventually } from './helpers/wait.ts';

const skip = POSTGRES_URL ? false : 'TEST_POSTGRES_URL is not set';

/** The answer of a write refused by a read-only node: 503 unavailable, Retry-After, a request id, no driver text. */
function assertRefusedAsUnavailable(answer: { status: number; text: string; headers: Record<string, unknown>; body: { error?: { code?: string } } }) {
  assert.equal(answer.status, 503, answer.text);
  assert.equal(answer.body.error?.code, 'unavailable', answer.text);
  assert.ok(Number(answer.headers['retry-after']) > 0, `Retry-After: ${answer.headers['retry-after']}`);
  assert.doesNotMatch(answer.text, /25006|cannot execute|read-only transaction/i, 'no driver text leaks');
}

describe('[postgres] the database turns read-only under a running server', { skip }, () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let token: string;
  const name = () => new URL(database.url).pathname.slice(1);
  const admin = (statement: string) => onConnection(POSTGRES_URL, statement);
  /** Ends every session of the scratch database but the caller's: what a restart of the node does to them. */
  const terminateSessions = () => admin(`select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name()}' and pid <> pg_backend_pid()`);
  const create = (id: string) => httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id } });

  before(async () => {
    database = await createTestDatabase('postgres');
    const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    token = (await issueTokenWithCli(env)).token;
    server = await spawnServer(env);
  });

  after(async () => {
    await server?.stop('SIGKILL');
    if (database) await admin(`alter database ${name()} reset default_transaction_read_only`).catch(() => undefined);
    await database?.drop();
  });

  it('default_transaction_read_only and its sessions cut: creates answer 503 with Retry-After (never 500), reads answer, embed tokens do not 500; once reset, the next create succeeds', async () => {
    const existing = await create('before-read-only');
    assert.equal(existing.status, 201, existing.text);

    await admin(`alter database ${name()} set default_transaction_read_only = on`);
    await terminateSessions();

    // Every write while the database is read-only: 503, never 500 (a cut session answers 503 too).
    for (let i = 0; i < 20; i++) assertRefusedAsUnavailable(await create(`during-read-only-${i}`));
    const concurrent = await Promise.all(Array.from({ length: 20 }, (_, i) => create(`during-read-only-concurrent-${i}`)));
    for (const answer of concurrent) assertRefusedAsUnavailable(answer);

    // Reads of what exists keep answering from the read-only database.
    const lookup = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=before-read-only', { token });
    assert.equal(lookup.status, 200, lookup.text);
    assert.equal(lookup.body.user_group.team_id, existing.body.user_group.team_id);
    const context = await httpRequest(server.baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${existing.body.user_group.token}` } });
    assert.equal(context.status, 200, context.text);
    // Minting an embed token for an existing group: never a 500.
    const minted = await httpRequest(server.baseUrl, 'POST', '/api/embed_token', { token, body: { user_group_id: 'before-read-only' } });
    assert.ok(minted.status === 200 || minted.status === 503, `embed token: ${minted.status} ${minted.text}`);
    if (minted.status === 503) assertRefusedAsUnavailable(minted);

    await admin(`alter database ${name()} reset default_transaction_read_only`);
    // The first write after the reset succeeds: no read-only session was kept in the pool.
    const afterReset = await create('after-read-only');
    assert.equal(afterReset.status, 201, afterReset.text);
    for (let i = 0; i < 20; i++) assert.equal((await create(`after-read-only-${i}`)).status, 201);

    // A write refused so changed nothing: none of the refused creates exists, and the ids are free.
    const listed = await httpRequest(server.baseUrl, 'GET', '/api/users?q=during-read-only&limit=500', { token });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.body.user_groups, []);
    assert.equal((await create('during-read-only-0')).status, 201);
    assert.doesNotMatch(server.output(), /"level":50[^\n]*unexpected error/, 'no 500 was logged');
  });
});

describe('[postgres] a pooled session made read-only', { skip }, () => {
  let database: OpenDatabase;

  before(async () => {
    // One connection and no app (whose background loops would write on it first): the session
    // made read-only is the one the next write gets, unless the pool dropped it.
    database = await openTestDatabase('postgres', { poolSize: 1 });
  });

  after(async () => {
    await database?.close();
  });

  const insertAccount = (slug: string) =>
    inTransaction(database.handle, (trx) => trx.insertInto('accounts').values({ slug, created_at: new Date().toISOString() }).execute());
  const accountExists = async (slug: string) =>
    (await database.handle.db.selectFrom('accounts').select('id').where('slug', '=', slug).executeTakeFirst()) !== undefined;

  it('a session set read-only while pooled: the write it refuses is an outage (503) and changes nothing; the session leaves the pool and the next write succeeds', async () => {
    await insertAccount('warm-up');
    // What a demotion without a restart, or SET SESSION CHARACTERISTICS, leaves: a live session that refuses writes.
    const sessionPid = await database.handle.db.connection().execute(async (connection) => {
      await sql`set session characteristics as transaction read only`.execute(connection);
      return (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(connection)).rows[0].pid;
    });

    const refused = await insertAccount('refused').then(
      () => undefined,
      (err: unknown) => err,
    );
    assert.equal((refused as { code?: string })?.code, '25006', `the write was refused by the read-only session: ${refused}`);
    assert.ok(isDatabaseUnavailable(refused), 'answered 503 unavailable');

    await insertAccount('accepted');
    const nowPid = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(database.handle.db)).rows[0].pid;
    assert.notEqual(nowPid, sessionPid, 'the read-only session is not handed out again');
    await eventually('the read-only session was closed', async () => {
      const rows = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where pid = ${sessionPid}`.execute(database.handle.db);
      return rows.rows[0].n === 0;
    });
    assert.equal(await accountExists('refused'), false, 'the refused write changed nothing');
    assert.equal(await accountExists('accepted'), true);
  });
});
