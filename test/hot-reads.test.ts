// The hot reads run beside Kysely (src/db/hot-reads.ts): on SQLite on a connection of their
// own, and the reads of one event-loop turn together, as one batch. Whatever connection they
// use, they must see committed rows only (no HTTP request can hold a transaction open on cue,
// so those tests drive the repository on a real database), and a batch must give every
// request its own answer (those tests send concurrent requests, which land in one batch).
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { inTransaction } from '../src/db/transaction.ts';
import { ensureAccount } from '../src/accounts/accounts.repository.ts';
import { findUserGroup, insertUserGroupIfAbsent, type GroupIdentity } from '../src/user-groups/user-groups.repository.ts';
import { forEachBackend, openTestDatabase, useTestApp, type OpenDatabase } from './helpers/harness.ts';

forEachBackend('hot reads', (backend) => {
  let database: OpenDatabase;
  let accountId: number;

  before(async () => {
    database = await openTestDatabase(backend);
    accountId = (await ensureAccount(database.handle.db, 'acme', new Date())).account.id;
  });
  after(() => database.close());

  /** Inserts a group in a transaction held open until `finish` is called; resolves once the row is written. */
  async function openInsert(providedId: string) {
    let finish!: (outcome: 'commit' | 'rollback') => void;
    const decided = new Promise<'commit' | 'rollback'>((resolve) => (finish = resolve));
    let written!: () => void;
    const wasWritten = new Promise<void>((resolve) => (written = resolve));
    const at = new Date().toISOString();
    const done = inTransaction(database.handle, async (trx) => {
      await insertUserGroupIfAbsent(trx, {
        account_id: accountId,
        environment: 'Customer',
        provided_id: providedId,
        name: providedId,
        mapping: null,
        properties: null,
        is_demo_group: 0,
        parent_team_id: null,
        hierarchy_level: null,
        group_tags: '[]',
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

  const key = (providedId: string): GroupIdentity => ({ accountId, environment: 'Customer', providedId });

  it('a lookup does not see a group inserted by a transaction that is still open, and sees it once committed', async () => {
    const insert = await openInsert('open-then-commit');
    assert.equal(await findUserGroup(database.handle.reads, key('open-then-commit')), undefined);
    insert.finish('commit');
    assert.equal(await insert.done, undefined);
    assert.equal((await findUserGroup(database.handle.reads, key('open-then-commit')))?.row.provided_id, 'open-then-commit');
  });

  it('a lookup never sees a group whose transaction rolled back', async () => {
    const insert = await openInsert('open-then-rollback');
    assert.equal(await findUserGroup(database.handle.reads, key('open-then-rollback')), undefined);
    insert.finish('rollback');
    assert.match(String(await insert.done), /rolled back on purpose/);
    assert.equal(await findUserGroup(database.handle.reads, key('open-then-rollback')), undefined);
  });
});

const flipLast = (token: string) => `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;

forEachBackend('concurrent hot reads, answered in batches', (backend) => {
  const t = useTestApp(backend);
  const groups = new Map<string, { team_id: number; token: string }>();

  before(async () => {
    for (let i = 0; i < 150; i++) {
      const res = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: `batch-${i}`, properties: { n: i } } });
      assert.equal(res.status, 201);
      groups.set(`batch-${i}`, { team_id: res.body.user_group.team_id, token: res.body.user_group.token });
    }
  });

  it('200 concurrent get-or-create calls (existing groups, the same group twice, missing groups) each get their own group', async () => {
    const ids = [
      ...Array.from({ length: 150 }, (_, i) => `batch-${i}`),
      ...Array.from({ length: 40 }, (_, i) => `batch-${i * 3}`), // asked twice within the batch
      ...Array.from({ length: 10 }, (_, i) => `batch-missing-${i}`),
    ];
    const responses = await Promise.all(ids.map((id) => t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } })));
    responses.forEach((res, i) => {
      const id = ids[i];
      const known = groups.get(id);
      assert.equal(res.body.user_group.provided_id, id);
      if (known) {
        assert.equal(res.status, 200);
        assert.equal(res.body.user_group.team_id, known.team_id);
        assert.equal(res.body.user_group.token, known.token);
        assert.deepEqual(res.body.user_group.properties, { n: Number(id.slice('batch-'.length)) });
      } else {
        assert.equal(res.status, 201);
        assert.equal(res.body.new_user_group, true);
      }
    });
  });

  it('120 concurrent embed context calls (valid, repeated and unknown tokens) each get their own group or 401', async () => {
    const known = [...groups.entries()].slice(0, 100);
    const calls = [
      ...known.map(([id, g]) => ({ id, token: g.token })),
      ...known.slice(0, 10).map(([id, g]) => ({ id, token: g.token })),
      ...Array.from({ length: 10 }, () => ({ id: undefined, token: `ugs_grp_${'0'.repeat(49)}` })),
    ];
    const responses = await Promise.all(calls.map((c) => t.request('GET', '/api/embed/context', { headers: { authorization: `Bearer ${c.token}` } })));
    responses.forEach((res, i) => {
      const { id } = calls[i];
      if (id === undefined) {
        assert.equal(res.status, 401);
        return;
      }
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.user_group.provided_id, id);
      assert.equal(res.body.variables.user_group_id, id);
      assert.equal(res.body.variables.n, Number(id.slice('batch-'.length)));
    });
  });

  it('120 concurrent embed context calls with embed tokens (their groups read by team id, in batches) each get their own group', async () => {
    const known = [...groups.keys()].slice(100, 150);
    const issued = await Promise.all(known.map((id) => t.request('POST', '/api/embed_token', { token: t.token, body: { user_group_id: id } })));
    const calls = [
      ...known.map((id, i) => ({ id, token: issued[i].body.embed_token })),
      ...known.map((id, i) => ({ id, token: issued[i].body.embed_token })), // each asked twice
      ...known.slice(0, 20).map((_id, i) => ({ id: undefined, token: flipLast(issued[i].body.embed_token) })), // altered
    ];
    const responses = await Promise.all(calls.map((c) => t.request('GET', '/api/embed/context', { headers: { authorization: `Bearer ${c.token}` } })));
    responses.forEach((res, i) => {
      const { id } = calls[i];
      if (id === undefined) return assert.equal(res.status, 401, res.text);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.user_group.provided_id, id);
      assert.equal(res.body.variables.n, Number(id.slice('batch-'.length)));
    });
  });
});
