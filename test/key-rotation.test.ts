import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, forEachBackend, issueTestToken, newSecretKey, openTestDatabase, type BuiltApp, type OpenDatabase } from './helpers/harness.ts';
import { runUgs } from './helpers/processes.ts';
import { Keyring } from '../src/crypto/keyring.ts';
import { reencryptUserGroupTokens, swapCiphertext } from '../src/crypto/reencrypt.ts';

const b64 = (key: Buffer) => key.toString('base64');

forEachBackend('secret key rotation without downtime', (backend) => {
  let db: OpenDatabase;
  let token: string;
  const keyA = newSecretKey();
  const keyB = newSecretKey();
  const idA = new Keyring([keyA]).currentKeyId;
  const idB = new Keyring([keyB]).currentKeyId;
  const groupTokens = new Map<string, string>();
  const ids = ['g1', 'g2', 'g3', 'g4', 'g5'];

  async function withApp<T>(keys: Buffer[], work: (t: BuiltApp) => Promise<T>): Promise<T> {
    const t = await buildTestApp(db, { keys });
    try {
      await t.app.ready();
      return await work(t);
    } finally {
      await t.app.close();
    }
  }

  async function assertEveryTokenReadable(t: BuiltApp): Promise<void> {
    for (const [id, expected] of groupTokens) {
      const res = await t.request('GET', '/api/user', { token, query: { user_group_id: id } });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.user_group.token, expected, `token of ${id}`);
    }
  }

  const ugs = (args: string[], keys: Buffer[]) => runUgs(args, { DATABASE_URL: db.url, UGS_SECRET_KEY: keys.map(b64).join(',') });

  before(async () => {
    db = await openTestDatabase(backend);
    token = (await issueTestToken(db.handle)).token;
  });
  after(() => db.close());

  it('tokens sealed under key A', async () => {
    await withApp([keyA], async (t) => {
      for (const id of ids) {
        const res = await t.request('POST', '/api/user', { token, body: { user_group_id: id } });
        assert.equal(res.status, 201);
        groupTokens.set(id, res.body.user_group.token);
      }
      // The first embed token creates the embed signing key, its private half sealed under A.
      assert.equal((await t.request('POST', '/api/embed_token', { token, body: { user_group_id: 'g1' } })).status, 200);
    });
    const status = await ugs(['keys', 'status', '--json'], [keyA]);
    assert.equal(status.code, 0, status.stderr);
    assert.deepEqual(JSON.parse(status.stdout).keys, [{ key_id: idA, tokens: 5, state: 'current' }]);
  });

  it('restarted with keys "B,A": every token still works, new ones are sealed under B', async () => {
    await withApp([keyB, keyA], async (t) => {
      await assertEveryTokenReadable(t);
      const created = await t.request('POST', '/api/user', { token, body: { user_group_id: 'g-new' } });
      assert.equal(created.status, 201);
      groupTokens.set('g-new', created.body.user_group.token);
      const rotated = await t.request('POST', '/api/user', { token, body: { current_token: groupTokens.get('g1') } });
      assert.equal(rotated.status, 200);
      groupTokens.set('g1', rotated.body.user_group.token);
      await assertEveryTokenReadable(t);
    });
    const status = await ugs(['keys', 'status', '--json'], [keyB, keyA]);
    assert.equal(status.code, 0, status.stderr);
    const parsed = JSON.parse(status.stdout);
    assert.equal(parsed.current_key_id, idB);
    assert.deepEqual(
      [...parsed.keys].sort((x: { state: string }, y: { state: string }) => (x.state < y.state ? -1 : 1)),
      [
        { key_id: idB, tokens: 2, state: 'current' },
        { key_id: idA, tokens: 4, state: 'old' },
      ],
    );
  });

  it('ugs keys reencrypt re-seals every token under B, in batches', async () => {
    const run = await ugs(['keys', 'reencrypt', '--batch-size', '2', '--json'], [keyB, keyA]);
    assert.equal(run.code, 0, run.stderr);
    const outcome = JSON.parse(run.stdout);
    assert.equal(outcome.examined, 6);
    assert.equal(outcome.resealed, 4);
    assert.deepEqual(outcome.unreadable, []);
    assert.deepEqual(outcome.embed_signing_keys, { resealed: 1, unreadable: [] }, 'the embed signing key moves to B too');
    const status = await ugs(['keys', 'status', '--json'], [keyB, keyA]);
    assert.deepEqual(JSON.parse(status.stdout).keys, [
      { key_id: idB, tokens: 6, state: 'current' },
      { key_id: idA, tokens: 0, state: 'old' },
    ]);
    const again = await ugs(['keys', 'reencrypt', '--json'], [keyB, keyA]);
    assert.equal(JSON.parse(again.stdout).resealed, 0);
  });

  it('restarted with only key B: every token still works, and embed tokens are still signed', async () => {
    await withApp([keyB], async (t) => {
      await assertEveryTokenReadable(t);
      const embed = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: 'g3' } });
      assert.equal(embed.status, 200, embed.text);
      const rotated = await t.request('POST', '/api/user', { token, body: { current_token: groupTokens.get('g2') } });
      assert.equal(rotated.status, 200);
      groupTokens.set('g2', rotated.body.user_group.token);
      await assertEveryTokenReadable(t);
    });
  });

  it("reencrypt with keys that are not the database's (it seals under B) refuses in one line and re-seals nothing", async () => {
    const keyC = newSecretKey();
    const run = await ugs(['keys', 'reencrypt', '--json'], [keyC]);
    assert.equal(run.code, 1);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, new RegExp(`^ugs: refusing to write: this database seals its secrets under key ${idB}, which the configured keys`));
    const status = await ugs(['keys', 'status', '--json'], [keyB]);
    assert.deepEqual(JSON.parse(status.stdout).keys, [{ key_id: idB, tokens: 6, state: 'current' }]);
  });

  it('reencrypt without the key a stored token needs reports the unreadable tokens and exits 1', async () => {
    const row = await db.handle.db.selectFrom('user_groups').select(['team_id', 'token_ciphertext']).where('provided_id', '=', 'g4').executeTakeFirstOrThrow();
    assert.ok(await swapCiphertext(db.handle.db, row, new Keyring([keyA]).seal(new Keyring([keyB]).open(row.token_ciphertext))), 'g4 sealed under A again');
    const run = await ugs(['keys', 'reencrypt', '--json'], [keyB]);
    assert.equal(run.code, 1);
    const outcome = JSON.parse(run.stdout);
    assert.equal(outcome.resealed, 0);
    assert.deepEqual(outcome.unreadable, [{ team_id: row.team_id, key_id: idA }]);
    assert.ok(!run.stdout.includes('ugs_grp_') && !run.stderr.includes('ugs_grp_'), 'the tool printed a token');
    const moved = await ugs(['keys', 'reencrypt', '--json'], [keyB, keyA]);
    assert.equal(JSON.parse(moved.stdout).resealed, 1);
  });

  it('compare-and-swap: a row rotated after it was read is not overwritten', async () => {
    const keyring = new Keyring([keyA, keyB]);
    const row = await db.handle.db.selectFrom('user_groups').select(['team_id', 'token_ciphertext']).where('provided_id', '=', 'g3').executeTakeFirstOrThrow();
    const stale = keyring.seal(keyring.open(row.token_ciphertext));
    await withApp([keyB], async (t) => {
      const rotated = await t.request('POST', '/api/user', { token, body: { current_token: groupTokens.get('g3') } });
      assert.equal(rotated.status, 200);
      groupTokens.set('g3', rotated.body.user_group.token);
    });
    assert.equal(await swapCiphertext(db.handle.db, row, stale), false);
    await withApp([keyB], (t) => assertEveryTokenReadable(t));
  });

  it('reencrypt while tokens are being rotated: every group keeps its newest token', async () => {
    // Put everything under A again, then rotate to A first while rotations run.
    await reencryptUserGroupTokens(db.handle, new Keyring([keyA, keyB]));
    await withApp([keyA, keyB], async (t) => {
      const rotations = (async () => {
        for (let round = 0; round < 3; round++) {
          for (const id of ids) {
            const res = await t.request('POST', '/api/user', { token, body: { current_token: groupTokens.get(id) } });
            assert.equal(res.status, 200, res.text);
            groupTokens.set(id, res.body.user_group.token);
          }
        }
      })();
      const sweeps = (async () => {
        for (let i = 0; i < 3; i++) await reencryptUserGroupTokens(db.handle, new Keyring([keyB, keyA]), { batchSize: 1 });
      })();
      await Promise.all([rotations, sweeps]);
      await assertEveryTokenReadable(t);
    });
  });
});
