// Each account's heavy operations, a few at a time on every instance together (docs/api.md,
// "Heavy operations"): their slots are rows of the database, so the slots another instance
// holds (written here as that instance would write them) count here too. With every slot of
// an account held, its next bulk upsert or tag rename waits, then answers 429
// too_many_heavy_operations with Retry-After, having changed nothing; a slot given back
// meanwhile lets it run; a slot whose lease lapsed (its instance died) does not count; and
// another account is not held up at all.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, forEachBackend, issueTestToken, openTestDatabase, type BuiltApp, type OpenDatabase } from './helpers/harness.ts';

forEachBackend('heavy operations: a few per account, on every instance together', (backend) => {
  let database: OpenDatabase;
  let built: BuiltApp;
  let token: string;
  let accountId: number;

  before(async () => {
    database = await openTestDatabase(backend);
    built = await buildTestApp(database); // UGS_HEAVY_OPERATIONS_PER_ACCOUNT: 2, the default
    token = (await issueTestToken(database.handle, { account: 'heavy' })).token;
    accountId = Number((await database.handle.db.selectFrom('accounts').select('id').where('slug', '=', 'heavy').executeTakeFirstOrThrow()).id);
  });

  after(async () => {
    await built?.app.close();
    await database?.close();
  });

  /** What another instance writes while it runs `count` heavy operations of the account (leases `leaseMs` from now). */
  async function heldElsewhere(count: number, leaseMs: number): Promise<void> {
    const now = Date.now();
    for (let slot = 0; slot < count; slot++) {
      await database.handle.db
        .insertInto('heavy_operations')
        .values({
          account_id: accountId,
          slot,
          holder: `another-instance-${slot}`,
          operation: 'upsert',
          started_at: new Date(now).toISOString(),
          lease_until: new Date(now + leaseMs).toISOString(),
        })
        .execute();
    }
  }

  async function release(slot: number): Promise<void> {
    await database.handle.db.deleteFrom('heavy_operations').where('account_id', '=', accountId).where('slot', '=', slot).execute();
  }

  it("heavy operations: with every slot of the account held on another instance, a bulk upsert and a tag rename wait, then answer 429 too_many_heavy_operations with Retry-After, and change nothing; another account's upsert runs at once", async () => {
    assert.equal((await built.request('POST', '/api/user', { token, body: { user_group_id: 'tagged', group_tags: ['old'] } })).status, 201);
    await heldElsewhere(2, 120_000);
    try {
      const other = (await issueTestToken(database.handle, { account: 'heavy-neighbour' })).token;
      const [upsert, rename, neighbour] = await Promise.all([
        built.request('POST', '/api/users/upsert', { token, body: { user_groups: [{ user_group_id: 'waited' }] } }),
        built.request('POST', '/api/group_tags/rename', { token, body: { name: 'old', new_name: 'new' } }),
        built.request('POST', '/api/users/upsert', { token: other, body: { user_groups: [{ user_group_id: 'neighbour' }] } }),
      ]);
      assert.equal(neighbour.status, 200, neighbour.text);
      for (const [what, res] of [
        ['upsert', upsert],
        ['rename', rename],
      ] as const) {
        assert.equal(res.status, 429, `${what}: ${res.text}`);
        assert.equal(res.body.error.code, 'too_many_heavy_operations', what);
        assert.ok(Number(res.headers['retry-after']) > 0, `${what}: Retry-After`);
      }
      const waited = await built.request('GET', '/api/user/lookup', { token, query: { user_group_id: 'waited' } });
      assert.equal(waited.status, 404, 'the refused upsert created nothing');
      const tagged = await built.request('GET', '/api/user/lookup', { token, query: { user_group_id: 'tagged' } });
      assert.deepEqual(tagged.body.user_group.group_tags, ['old'], 'the refused rename changed nothing');
    } finally {
      await release(0);
      await release(1);
    }
  });

  it('heavy operations: a slot given back on another instance while a call waits lets it run', async () => {
    await heldElsewhere(2, 120_000);
    try {
      const waiting = built.request('POST', '/api/users/upsert', { token, body: { user_groups: [{ user_group_id: 'after-release' }] } });
      // The call is waiting: nothing of it is written until a slot frees.
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal((await built.request('GET', '/api/user/lookup', { token, query: { user_group_id: 'after-release' } })).status, 404);
      await release(1);
      const res = await waiting;
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.results[0].status, 'created');
    } finally {
      await release(0);
      await release(1);
    }
    // Its own slot is given back when it ends.
    const left = await database.handle.db.selectFrom('heavy_operations').select('slot').where('account_id', '=', accountId).execute();
    assert.deepEqual(left, []);
  });

  it('heavy operations: the slots of an instance that died, whose leases lapsed, do not count', async () => {
    await heldElsewhere(2, -1000);
    try {
      const res = await built.request('POST', '/api/users/upsert', { token, body: { user_groups: [{ user_group_id: 'after-lapse' }] } });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.results[0].status, 'created');
    } finally {
      await release(0);
      await release(1);
    }
  });
});
