// One migration set on both dialects; instances starting together must not both migrate.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from '../src/db/kysely.ts';
import { BACKENDS, POSTGRES_URL, createTestDatabase } from './helpers/backends.ts';
import { openDatabase } from '../src/db/database.ts';
import { MIGRATION_NAMES, migrateToLatest } from '../src/db/migrate.ts';
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
