// One migration set on both dialects; instances starting together must not both migrate.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Migrator, sql } from '../src/db/kysely.ts';
import { BACKENDS, POSTGRES_URL, createTestDatabase } from './helpers/backends.ts';
import { openDatabase } from '../src/db/database.ts';
import { MIGRATION_LOCK_KEY, MIGRATION_NAMES, migrateToLatest, migrationsFor } from '../src/db/migrate.ts';
import pg from 'pg';
import { runUgs } from './helpers/processes.ts';
import { forEachBackend, startTestApp } from './helpers/harness.ts';

forEachBackend('migrations', (backend) => {
  it('three processes migrating one empty database at once apply each migration exactly once', async () => {
    const database = await createTestDatabase(backend);
    const handle = openDatabase(database.url);
    try {
      const runs = await Promise.all([0, 1, 2].map(() => runUgs(['migrate'], { DATABASE_URL: database.url })));
      for (const r of runs) assert.equal(r.code, 0, r.stderr);
      const appliers = runs.filter((r) => r.stdout.includes('applied: 0001-initial'));
      assert.equal(appliers.length, 1, `exactly one process applied it:\n${runs.map((r) => r.stdout).join('')}`);
      const rows = await sql<{ name: string }>`select name from kysely_migration`.execute(handle.db);
      assert.deepEqual(
        rows.rows.map((r) => r.name),
        MIGRATION_NAMES,
        'every migration of the index, in order',
      );
      const again = await migrateToLatest(handle);
      assert.deepEqual(again.applied, [], 'a later start finds nothing to do');
    } finally {
      await handle.close();
      await database.drop();
    }
  });

  it('PostgreSQL: a start while another process holds the migration lock past the lock and statement timeouts waits for it, then migrates', {
    skip: backend !== 'postgres' && 'PostgreSQL only: SQLite waits for its write lock (MIGRATION_LOCK_WAIT_MS)',
  }, async () => {
    const database = await createTestDatabase(backend);
    const handle = openDatabase(database.url);
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    try {
      // What another process's long migration on a loaded host looks like: the lock, held
      // past the lock_timeout and the 5 s statement timeout of the service's sessions
      // (src/db/database.ts).
      await holder.query('begin');
      await holder.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      let settled: string | undefined;
      const migrating = migrateToLatest(handle).then(
        (result) => {
          settled = 'migrated';
          return result;
        },
        (err: Error) => {
          settled = `failed: ${err.message}`;
          throw err;
        },
      );
      // The scenario is the time the lock is held, not a wait for a condition.
      await new Promise((resolve) => setTimeout(resolve, 6500));
      assert.equal(settled, undefined, 'the start did not wait for the lock');
      await holder.query('commit');
      const result = await migrating;
      assert.deepEqual(result.applied.slice(0, 1), ['0001-initial']);
    } finally {
      await holder.end();
      await handle.close();
      await database.drop();
    }
  });

  it('0012 says who acted in the history written before it: a token id is api_token; the first start, the command-line tool and the service are told apart', async () => {
    const database = await createTestDatabase(backend);
    const handle = openDatabase(database.url);
    try {
      const before = Object.fromEntries(Object.entries(migrationsFor(handle.dialect)).filter(([name]) => name < '0012'));
      const migrated = await new Migrator({ db: handle.db, provider: { getMigrations: async () => before } }).migrateToLatest();
      assert.equal(migrated.error, undefined);
      // What a database of the previous version holds: the first start's account and token, a token ugs issued, one issued over HTTP.
      const at = '2026-11-20T10:00:00.000Z';
      // Inserted in order into new tables: the ids are 1, 2, 3…
      await sql`insert into accounts (slug, created_at) values ('default', ${at}), ('acme', ${at})`.execute(handle.db);
      const token = (id: number, account: number, name: string) =>
        sql`insert into api_tokens (account_id, name, token_hash, token_start, scopes, default_environment, created_at)
            values (${account}, ${name}, ${`hash-${id}`}, 'ugs_api_xx', 'read', 'Customer', ${at})`.execute(handle.db);
      await token(1, 1, 'bootstrap');
      await token(2, 1, 'support');
      await token(3, 2, 'bootstrap'); // named like the first start's, but not the first token of default
      await token(4, 2, 'from-http');
      const entry = (_id: number, account: number, type: string, subject: number, action: string, actorTokenId: number | null) =>
        sql`insert into audit_log (account_id, subject_type, subject_id, action, actor_token_id, created_at)
            values (${account}, ${type}, ${String(subject)}, ${action}, ${actorTokenId}, ${at})`.execute(handle.db);
      await entry(1, 1, 'api_token', 1, 'api_token.issue', null);
      await entry(2, 1, 'api_token', 2, 'api_token.issue', null);
      await entry(3, 2, 'api_token', 3, 'api_token.issue', null);
      await entry(4, 2, 'api_token', 4, 'api_token.issue', 3);
      await entry(5, 2, 'webhook_endpoint', 9, 'webhook_endpoint.disable', null);
      await entry(6, 2, 'user_group', 7, 'user_group.create', 4);

      assert.equal((await migrateToLatest(handle)).applied[0], '0012-audit-actor');
      const actors = await sql<{ id: number; actor: string }>`select id, actor from audit_log order by id`.execute(handle.db);
      assert.deepEqual(
        actors.rows.map((row) => [Number(row.id), row.actor]),
        [
          [1, 'first_start'],
          [2, 'command_line'],
          [3, 'command_line'],
          [4, 'api_token'],
          [5, 'service'],
          [6, 'api_token'],
        ],
      );
    } finally {
      await handle.close();
      await database.drop();
    }
  });

  it('a column added while an instance serves does not break its lookups (hot reads name their columns)', async () => {
    const t = await startTestApp(backend);
    try {
      const { token } = await t.issueToken();
      const created = await t.request('GET', '/api/user', { token, body: { user_group_id: 'before-migration' } });
      assert.equal(created.status, 201);
      const tokenBefore = await t.request('GET', '/api/embed/context', { headers: { authorization: `Bearer ${created.body.user_group.token}` } });
      assert.equal(tokenBefore.status, 200);
      // What a later migration run by another instance would do; the lookups above are prepared already.
      await sql`alter table user_groups add column later_column text`.execute(t.handle.db);
      await sql`alter table api_tokens add column later_column text`.execute(t.handle.db);
      const again = await t.request('GET', '/api/user', { token, body: { user_group_id: 'before-migration' } });
      assert.equal(again.status, 200, again.text);
      assert.equal(again.body.user_group.token, created.body.user_group.token);
      assert.equal((await t.request('GET', '/api/embed/context', { headers: { authorization: `Bearer ${created.body.user_group.token}` } })).status, 200);
    } finally {
      await t.close();
    }
  });
});

describe('PostgreSQL suite', () => {
  it('runs when TEST_POSTGRES_URL is set', {
    skip: POSTGRES_URL ? false : 'SKIPPED: TEST_POSTGRES_URL is not set, so the PostgreSQL half of every suite did not run',
  }, () => {
    assert.ok(BACKENDS.includes('postgres'));
  });
});

if (!POSTGRES_URL) {
  process.stderr.write('\n*** PostgreSQL suite SKIPPED: set TEST_POSTGRES_URL=postgres://user@host:port/db to run every suite on PostgreSQL too. ***\n\n');
}
