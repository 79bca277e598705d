// GET /api/user/lookup: one group by its identity, never created (docs/api.md, "GET
// /api/user/lookup").
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { createGroup, forEachBackend, useTestApp } from './helpers/harness.ts';

forEachBackend('lookup of one user group', (backend) => {
  const t = useTestApp(backend);

  it('lookup: answers the group with its current token and computed fields, as get-or-create does for an existing group', async () => {
    await createGroup(t, { user_group_id: 'lk-parent', properties: { region: 'emea' } });
    const created = await createGroup(t, { user_group_id: 'lk-child', parent_user_group_id: 'lk-parent', properties: { seat: 1 } });
    const res = await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'lk-child' } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers['cache-control'], 'no-store');
    const got = await t.request('GET', '/api/user', { token: t.token, query: { user_group_id: 'lk-child' } });
    assert.deepEqual(res.body.user_group, got.body.user_group);
    assert.equal(res.body.user_group.token, created.token);
    assert.deepEqual(res.body.user_group.computed_properties, { region: 'emea', seat: 1 });
  });

  it('lookup: a missing group is 404 user_group_not_found and is not created, even with the write scope', async () => {
    const res = await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'lk-missing' } });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'user_group_not_found');
    const list = await t.request('GET', '/api/users', { token: t.token, query: { q: 'lk-missing' } });
    assert.deepEqual(list.body.user_groups, []);
  });

  it('lookup: a deleted group stays deleted (where get-or-create would make it again)', async () => {
    await createGroup(t, { user_group_id: 'lk-deleted' });
    assert.equal((await t.request('DELETE', '/api/user', { token: t.token, query: { user_group_id: 'lk-deleted' } })).status, 200);
    assert.equal((await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'lk-deleted' } })).status, 404);
    assert.equal(
      (await t.request('GET', '/api/user/history', { token: t.token, query: { user_group_id: 'lk-deleted' } })).body.entries[0].action,
      'user_group.delete',
    );
  });

  it('lookup: any id, "." and ".." and "a/b" included, in the environment asked for; a read token is enough', async () => {
    const reader = await t.issueToken({ scopes: ['read'] });
    for (const id of ['.', '..', 'a/b', 'x?y#z', '\u{10FFFF}']) {
      await createGroup(t, { user_group_id: id, api_environment_tag: 'Testing' });
      const res = await t.request('GET', '/api/user/lookup', { token: reader.token, query: { user_group_id: id, api_environment_tag: 'Testing' } });
      assert.equal(res.status, 200, `${id}: ${res.text}`);
      assert.equal(res.body.user_group.provided_id, id);
      assert.equal((await t.request('GET', '/api/user/lookup', { token: reader.token, query: { user_group_id: id } })).status, 404, `${id} is not in Customer`);
    }
  });

  it('lookup: user_group_id is required, and an unknown parameter is refused', async () => {
    const missing = await t.request('GET', '/api/user/lookup', { token: t.token });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.error.details![0].field, 'user_group_id');
    const unknown = await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'x', name: 'y' } });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.error.details![0].issue, 'unknown_field');
  });
});
