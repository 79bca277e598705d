// The hot reads run beside Kysely (src/db/direct-reads.ts): on SQLite on a connection of their
// own. Whatever connection they use, they must see committed rows only. No HTTP request can
// hold a transaction open on cue, so these tests drive the repository on a real database.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { openMigratedDatabase } from '../src/runtime.ts';
import type { DatabaseHandle } from '../src/db/database.ts';
import { inTransaction } from '../src/db/transaction.ts';
import { ensureAccount } from '../src/accounts/accounts.repository.ts';
import { findUserGroup, insertUserGroupIfAbsent, type UserGroupKey } from '../src/user-groups/user-groups.repository.ts';

for (const backend of BACKENDS) {
  describe(`[${backend}] hot reads`, () => {
    let database: TestDatabase;
    let handle: DatabaseHandle;
    let accountId: number;

    before(async () => {
      database = await createTestDatabase(backend);
      handle = (await openMigratedDatabase({ databaseUrl: database.url })).handle;
      accountId = (await ensureAccount(handle.db, 'acme', new Date())).account.id;
    });
    after(async () => {
      await handle.close();
      await database.drop();
    });

    /** Inserts a group in a transaction held open until `finish` is called; resolves once the row is written. */
    async function openInsert(providedId: string) {
      let finish!: (outcome: 'commit' | 'rollback') => void;
      const decided = new Promise<'commit' | 'rollback'>((resolve) => (finish = resolve));
      let written!: () => void;
      const wasWritten = new Promise<void>((resolve) => (written = resolve));
      const at = new Date().toISOString();
      const done = inTransaction(handle, async (trx) => {
        await insertUserGroupIfAbsent(trx, {
          account_id: accountId,
          environment: 'Customer',
          provided_id: providedId,
          name: providedId,
          mapping: null,
          properties: null,
          is_demo_group: 0,
          token_hash: crypto.randomBytes(32).toString('hex'),
          token_ciphertext: 'not-read-here',
          created_at: at,
          updated_at: at,
        });
        written();
        if ((await decided) === 'rollback') throw new Error('rolled back on purpose');
      }).catch((err: Error) => err);
      await wasWritten;
      return { finish, done };
    }

    const key = (providedId: string): UserGroupKey => ({ accountId, environment: 'Customer', providedId });

    it('a lookup does not see a group inserted by a transaction that is still open, and sees it once committed', async () => {
      const insert = await openInsert('open-then-commit');
      assert.equal(await findUserGroup(handle.db, key('open-then-commit')), undefined);
      insert.finish('commit');
      assert.equal(await insert.done, undefined);
      assert.equal((await findUserGroup(handle.db, key('open-then-commit')))?.provided_id, 'open-then-commit');
    });

    it('a lookup never sees a group whose transaction rolled back', async () => {
      const insert = await openInsert('open-then-rollback');
      assert.equal(await findUserGroup(handle.db, key('open-then-rollback')), undefined);
      insert.finish('rollback');
      assert.match(String(await insert.done), /rolled back on purpose/);
      assert.equal(await findUserGroup(handle.db, key('open-then-rollback')), undefined);
    });
  });
}
