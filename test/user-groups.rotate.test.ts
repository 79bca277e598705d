// POST /api/user with current_token: rotate a user group token (docs/api.md, "POST /api/user: rotate").
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, startTestApp, useTestApp } from './helpers/harness.ts';
import { generateToken } from '../src/auth/token-format.ts';

forEachBackend('POST /api/user with current_token rotates the token', (backend) => {
  const t = useTestApp(backend);
  let n = 0;
  const uid = (label: string) => `rot-${label}-${++n}`;

  async function create(body: Record<string, unknown>, tok = t.token) {
    const res = await t.request('POST', '/api/user', { token: tok, body });
    assert.equal(res.status, 201);
    return res.body.user_group;
  }

  /** The group's current state (and token), read with get-or-create on an existing group. */
  async function current(id: string, env: 'Customer' | 'Testing' = 'Customer', tok = t.token) {
    const res = await t.request('GET', '/api/user', { token: tok, body: { user_group_id: id, api_environment_tag: env } });
    assert.equal(res.status, 200, 'the group must still exist');
    return res.body.user_group;
  }

  const rotate = (body: Record<string, unknown>, tok = t.token) => t.request('POST', '/api/user', { token: tok, body });

  it('rotate: 200 with the same group carrying a new token, which the group keeps afterwards', async () => {
    const id = uid('basic');
    const before = await create({ user_group_id: id, name: 'R', mapping: { a: 1 }, properties: { p: true }, is_demo_group: true });
    const res = await rotate({ current_token: before.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.success, 1);
    assert.equal(res.body.new_user_group, undefined);
    const g = res.body.user_group;
    assert.match(g.token, /^ugs_grp_/);
    assert.notEqual(g.token, before.token);
    for (const field of ['team_id', 'name', 'provided_id', 'mapping', 'properties', 'api_environment_tag', 'is_demo_group', 'created_at'] as const) {
      assert.deepEqual(g[field], before[field], field);
    }
    assert.equal((await current(id)).token, g.token);
  });

  it('rotate: the old token can no longer be rotated (404 token_not_found), the new one can', async () => {
    const id = uid('chain');
    const created = await create({ user_group_id: id });
    const first = await rotate({ current_token: created.token });
    assert.equal(first.status, 200);
    const old = await rotate({ current_token: created.token });
    assert.equal(old.status, 404);
    assert.equal(old.body.success, 0);
    assert.equal(old.body.error.code, 'token_not_found');
    assert.equal((await current(id)).token, first.body.user_group.token, 'a refused rotation changes nothing');
    const second = await rotate({ current_token: first.body.user_group.token });
    assert.equal(second.status, 200);
    assert.notEqual(second.body.user_group.token, first.body.user_group.token);
  });

  it('rotate: with a grace period the old token still cannot be rotated or returned', async () => {
    const id = uid('grace');
    const created = await create({ user_group_id: id });
    const res = await rotate({ current_token: created.token, grace_period_seconds: 3600 });
    assert.equal(res.status, 200);
    const again = await rotate({ current_token: created.token });
    assert.equal(again.status, 404);
    assert.equal(again.body.error.code, 'token_not_found');
    const got = await current(id);
    assert.equal(got.token, res.body.user_group.token);
    assert.notEqual(got.token, created.token);
  });

  it('rotate: grace_period_seconds accepts 0 and 86400', async () => {
    for (const grace of [0, 86400]) {
      const g = await create({ user_group_id: uid(`grace-${grace}`) });
      const res = await rotate({ current_token: g.token, grace_period_seconds: grace });
      assert.equal(res.status, 200, `grace ${grace}`);
    }
  });

  it('rotate: grace_period_seconds outside 0-86400 or not an integer answers 400 validation_failed naming it, and the token stays', async () => {
    const id = uid('grace-bad');
    const g = await create({ user_group_id: id });
    for (const grace of [-1, 86401, 1.5, '60', null]) {
      const res = await rotate({ current_token: g.token, grace_period_seconds: grace });
      assert.equal(res.status, 400, `grace ${JSON.stringify(grace)}`);
      assert.equal(res.body.error.code, 'validation_failed');
      assert.ok(res.body.error.details!.some((d: { field: string }) => d.field === 'grace_period_seconds'));
    }
    assert.equal((await current(id)).token, g.token);
  });

  it('rotate: any field besides current_token and grace_period_seconds answers 400 ambiguous_request and rotates nothing', async () => {
    const id = uid('extra');
    const g = await create({ user_group_id: id });
    const extras: Record<string, unknown>[] = [
      { user_group_id: id },
      { name: 'new name' },
      { properties: { a: 1 } },
      { mapping: { a: 1 } },
      { is_demo_group: true },
      { api_environment_tag: 'Customer' },
    ];
    for (const extra of extras) {
      const res = await rotate({ current_token: g.token, ...extra });
      assert.equal(res.status, 400, JSON.stringify(extra));
      assert.equal(res.body.error.code, 'ambiguous_request');
      assert.ok(res.body.error.details!.some((d: { field: string }) => d.field === Object.keys(extra)[0]));
    }
    const after = await current(id);
    assert.equal(after.token, g.token);
    assert.equal(after.name, g.name);
    assert.equal(after.properties, null);
  });

  it('rotate: an unknown field next to current_token is still 400 validation_failed naming it', async () => {
    const g = await create({ user_group_id: uid('unknown') });
    const res = await rotate({ current_token: g.token, grace_period: 5 });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.ok(res.body.error.details!.some((d: { field: string }) => d.field === 'grace_period'));
  });

  it('rotate: an unknown, malformed or mistyped (bad checksum) token answers 404 token_not_found', async () => {
    const unknown = await rotate({ current_token: generateToken('user_group') });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'token_not_found');
    const garbage = await rotate({ current_token: 'not-a-token' });
    assert.equal(garbage.status, 404);
    assert.equal(garbage.body.error.code, 'token_not_found');
    const g = await create({ user_group_id: uid('checksum') });
    const last = g.token.at(-1);
    const broken = g.token.slice(0, -1) + (last === 'a' ? 'b' : 'a');
    const badChecksum = await rotate({ current_token: broken });
    assert.equal(badChecksum.status, 404);
    assert.equal(badChecksum.body.error.code, 'token_not_found');
  });

  it('rotate: an empty or non-string current_token answers 400 validation_failed naming current_token', async () => {
    const empty = await rotate({ current_token: '' });
    assert.equal(empty.status, 400);
    assert.equal(empty.body.error.code, 'validation_failed');
    assert.equal(empty.body.error.details![0].field, 'current_token');
    const wrongType = await rotate({ current_token: 12345 });
    assert.equal(wrongType.status, 400);
    assert.equal(wrongType.body.error.details![0].field, 'current_token');
  });

  it('rotate: an API token given as current_token answers 404 token_not_found', async () => {
    const res = await rotate({ current_token: t.token });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'token_not_found');
    // ... and the API token still works.
    assert.equal((await t.request('GET', '/api/users', { token: t.token })).status, 200);
  });

  it('rotate: a token of another account answers 404 token_not_found and that group keeps its token', async () => {
    const other = (await t.issueToken({ account: 'rotate-other' })).token;
    const id = uid('cross');
    const theirs = await create({ user_group_id: id }, other);
    const res = await rotate({ current_token: theirs.token });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'token_not_found');
    assert.equal((await current(id, 'Customer', other)).token, theirs.token);
    // And this account has no group with that id (the 404 did not create or move anything).
    const list = await t.request('GET', '/api/users', { token: t.token, query: { q: id } });
    assert.deepEqual(list.body.user_groups, []);
  });

  it('rotate: works for a Testing group without naming the environment', async () => {
    const id = uid('testing');
    const g = await create({ user_group_id: id, api_environment_tag: 'Testing' });
    const res = await rotate({ current_token: g.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.user_group.api_environment_tag, 'Testing');
    assert.equal((await current(id, 'Testing')).token, res.body.user_group.token);
  });

  it('rotate: a token restricted to Customer gets 403 environment_forbidden for a Testing group, and the token stays', async () => {
    const customerOnly = (await t.issueToken({ env: 'Customer' })).token;
    const id = uid('envforbidden');
    const g = await create({ user_group_id: id, api_environment_tag: 'Testing' });
    const res = await rotate({ current_token: g.token }, customerOnly);
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'environment_forbidden');
    assert.equal((await current(id, 'Testing')).token, g.token);
    assert.equal((await rotate({ current_token: g.token })).status, 200, 'the old token is still the current one');
  });

  it('rotate: a read-only token gets 403 insufficient_scope and the token stays', async () => {
    const readOnly = (await t.issueToken({ scopes: ['read'] })).token;
    const id = uid('ro');
    const g = await create({ user_group_id: id });
    const res = await rotate({ current_token: g.token }, readOnly);
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'insufficient_scope');
    assert.equal((await current(id)).token, g.token);
  });

  it('rotate: the response carries Cache-Control: no-store', async () => {
    const g = await create({ user_group_id: uid('cache') });
    const res = await rotate({ current_token: g.token });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['cache-control']), /no-store/);
  });
});

forEachBackend('retired tokens', (backend) => {
  it("a rotation with grace drops the group's retired tokens whose grace period is over, keeping live ones; one without grace drops them all", async () => {
    let clock = new Date('2026-11-22T10:00:00.000Z');
    const t = await startTestApp(backend, { now: () => clock });
    try {
      const { token } = await t.issueToken();
      const rotate = async (current: string, grace: number) => {
        const res = await t.request('POST', '/api/user', { token, body: { current_token: current, grace_period_seconds: grace } });
        assert.equal(res.status, 200);
        return res.body.user_group.token as string;
      };
      const created = await t.request('POST', '/api/user', { token, body: { user_group_id: 'retire' } });
      let current = await rotate(created.body.user_group.token, 60); // retired #1, live until 10:01
      current = await rotate(current, 600); // retired #2, live until 10:10
      const count = async () => (await t.handle.db.selectFrom('retired_tokens').select('token_hash').execute()).length;
      assert.equal(await count(), 2);
      clock = new Date('2026-11-22T10:05:00.000Z'); // #1 is over, #2 is not
      current = await rotate(current, 30); // retired #3, live until 10:05:30
      assert.equal(await count(), 2, 'the still-live #2, and #3');
      await rotate(current, 0);
      assert.equal(await count(), 0, 'a rotation without grace ends every earlier token');
    } finally {
      await t.close();
    }
  });
});
