// PUT /api/user (update) and DELETE /api/user (docs/api.md, "Operations").
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp, type SuiteApp, createGroup } from './helpers/harness.ts';

/** Creating a group (asserting 201) and reading it back from the listing, as a client sees it. */
function groupsOf(t: SuiteApp) {
  return {
    create: (body: Record<string, unknown>) => createGroup(t, body),
    async read(id: string, env?: 'Customer' | 'Testing') {
      const query: Record<string, string> = { q: id, limit: '500' };
      if (env) query.api_environment_tag = env;
      const res = await t.request('GET', '/api/users', { token: t.token, query });
      assert.equal(res.status, 200);
      return res.body.user_groups.find((g: { provided_id: string }) => g.provided_id === id);
    },
  };
}

forEachBackend('PUT /api/user updates a user group', (backend) => {
  // A clock the tests move forward, so updated_at changes are visible without waiting.
  let clock = Date.parse('2030-01-01T00:00:00.000Z');
  const tick = () => (clock += 1000);
  const t = useTestApp(backend, { now: () => new Date(clock) });
  let n = 0;
  const uid = (label: string) => `put-${label}-${++n}`;
  const { create, read } = groupsOf(t);

  it('update: given fields replace the stored ones, absent fields stay, and 200 carries the whole group with its token', async () => {
    const id = uid('replace');
    const before = await create({ user_group_id: id, name: 'Old', mapping: { a: '1' }, properties: { keep: true, drop: 1 } });
    tick();
    const res = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, properties: { fresh: 'yes' } } });
    assert.equal(res.status, 200);
    assert.equal(res.body.success, 1);
    const g = res.body.user_group;
    assert.deepEqual(g.properties, { fresh: 'yes' }, 'properties are replaced as a whole, not merged');
    assert.equal(g.name, 'Old');
    assert.deepEqual(g.mapping, { a: '1' });
    assert.equal(g.is_demo_group, false);
    assert.equal(g.team_id, before.team_id);
    assert.equal(g.token, before.token);
    assert.equal(g.created_at, before.created_at);
    assert.notEqual(g.updated_at, before.updated_at);
    const { token: _t, ...publicPart } = g;
    assert.deepEqual(await read(id), publicPart);
  });

  it('update: name, mapping and is_demo_group are each replaced when given', async () => {
    const id = uid('each');
    await create({ user_group_id: id, name: 'N1', mapping: { s1: 1 } });
    const res = await t.request('PUT', '/api/user', {
      token: t.token,
      body: { user_group_id: id, name: 'N2', mapping: { s2: 'ds' }, is_demo_group: true },
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.user_group.name, 'N2');
    assert.deepEqual(res.body.user_group.mapping, { s2: 'ds' });
    assert.equal(res.body.user_group.is_demo_group, true);
    const back = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, is_demo_group: false } });
    assert.equal(back.body.user_group.is_demo_group, false);
    assert.equal((await read(id))!.is_demo_group, false);
  });

  it('update: null clears mapping and properties', async () => {
    const id = uid('clear');
    await create({ user_group_id: id, mapping: { a: 1 }, properties: { b: 2 } });
    const res = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, mapping: null, properties: null } });
    assert.equal(res.status, 200);
    assert.equal(res.body.user_group.mapping, null);
    assert.equal(res.body.user_group.properties, null);
    const stored = await read(id);
    assert.equal(stored!.mapping, null);
    assert.equal(stored!.properties, null);
  });

  it('update: null is not allowed for name or is_demo_group (400 validation_failed naming the field), nothing changes', async () => {
    const id = uid('nonnull');
    const created = await create({ user_group_id: id, name: 'Named' });
    for (const field of ['name', 'is_demo_group']) {
      const res = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, [field]: null } });
      assert.equal(res.status, 400, field);
      assert.equal(res.body.error.code, 'validation_failed');
      assert.ok(
        res.body.error.details!.some((d: { field: string }) => d.field === field),
        field,
      );
    }
    const { token: _t, ...publicPart } = created;
    assert.deepEqual(await read(id), publicPart);
  });

  it('update: a body with no field to change answers 400 validation_failed and changes nothing', async () => {
    const id = uid('nothing');
    const created = await create({ user_group_id: id });
    for (const body of [{ user_group_id: id }, { user_group_id: id, api_environment_tag: 'Customer' }]) {
      const res = await t.request('PUT', '/api/user', { token: t.token, body });
      assert.equal(res.status, 400);
      assert.equal(res.body.error.code, 'validation_failed');
      assert.ok(Array.isArray(res.body.error.details) && res.body.error.details.length > 0);
    }
    const { token: _t, ...publicPart } = created;
    assert.deepEqual(await read(id), publicPart);
  });

  it('update: user_group_id is required (400 validation_failed naming it)', async () => {
    const res = await t.request('PUT', '/api/user', { token: t.token, body: { name: 'no id' } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.ok(res.body.error.details!.some((d: { field: string }) => d.field === 'user_group_id'));
  });

  it('update: a missing group answers 404 user_group_not_found and PUT never creates', async () => {
    const id = uid('missing');
    const res = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, name: 'Ghost' } });
    assert.equal(res.status, 404);
    assert.equal(res.body.success, 0);
    assert.equal(res.body.error.code, 'user_group_not_found');
    assert.equal(await read(id), undefined);
    const goc = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(goc.status, 201, 'the id is still free after the failed PUT');
  });

  it('update: api_environment_tag selects the group and never moves it to another environment', async () => {
    const id = uid('env');
    const customer = await create({ user_group_id: id, name: 'C' });
    const res = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, api_environment_tag: 'Testing', name: 'T' } });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'user_group_not_found');
    assert.equal(await read(id, 'Testing'), undefined);
    assert.equal((await read(id, 'Customer'))!.name, 'C');
    const testing = await create({ user_group_id: id, api_environment_tag: 'Testing', name: 'T0' });
    const upd = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, api_environment_tag: 'Testing', name: 'T1' } });
    assert.equal(upd.status, 200);
    assert.equal(upd.body.user_group.team_id, testing.team_id);
    assert.equal(upd.body.user_group.api_environment_tag, 'Testing');
    assert.equal((await read(id, 'Customer'))!.name, 'C', 'the Customer group with the same id is untouched');
    assert.equal((await read(id, 'Customer'))!.team_id, customer.team_id);
  });

  it('update: a JSON integer user_group_id finds the group stored under its decimal string', async () => {
    const num = 500_000 + n++;
    await create({ user_group_id: String(num) });
    const res = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: num, name: 'by number' } });
    assert.equal(res.status, 200);
    assert.equal(res.body.user_group.provided_id, String(num));
    assert.equal(res.body.user_group.name, 'by number');
  });

  it('update: one invalid field refuses the whole request and changes nothing', async () => {
    const id = uid('atomic');
    const created = await create({ user_group_id: id, name: 'Before', properties: { p: 1 } });
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 40; i++) deep = { d: deep };
    const cases: Record<string, unknown>[] = [
      { user_group_id: id, name: 'After', mapping: { k: -1 } },
      { user_group_id: id, name: 'After', properties: deep },
      { user_group_id: id, name: 'After', bogus: 1 },
      { user_group_id: id, name: 'After', properties: [1, 2] },
    ];
    for (const body of cases) {
      const res = await t.request('PUT', '/api/user', { token: t.token, body });
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
    }
    const { token: _t, ...publicPart } = created;
    assert.deepEqual(await read(id), publicPart);
  });

  it('update: a read-only token gets 403 insufficient_scope and nothing changes', async () => {
    const readOnly = (await t.issueToken({ scopes: ['read'] })).token;
    const id = uid('ro');
    const created = await create({ user_group_id: id, name: 'RO' });
    const res = await t.request('PUT', '/api/user', { token: readOnly, body: { user_group_id: id, name: 'changed' } });
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'insufficient_scope');
    assert.equal((await read(id))!.name, created.name);
  });

  it('update: a token restricted to Testing gets 403 environment_forbidden on a Customer group, and nothing changes', async () => {
    const testingOnly = (await t.issueToken({ env: 'Testing' })).token;
    const id = uid('envforbidden');
    await create({ user_group_id: id, name: 'Cust' });
    const res = await t.request('PUT', '/api/user', { token: testingOnly, body: { user_group_id: id, api_environment_tag: 'Customer', name: 'x' } });
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'environment_forbidden');
    assert.equal((await read(id))!.name, 'Cust');
  });
});

forEachBackend('DELETE /api/user deletes a user group', (backend) => {
  const t = useTestApp(backend);
  let n = 0;
  const uid = (label: string) => `del-${label}-${++n}`;
  const { create, read } = groupsOf(t);

  it('delete (JSON body): 200 with the deleted group without its token, and the group is gone', async () => {
    const id = uid('body');
    const created = await create({ user_group_id: id, name: 'Doomed', properties: { a: 1 }, mapping: { m: 2 } });
    const res = await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(res.status, 200);
    assert.equal(res.body.success, 1);
    assert.equal('token' in res.body.user_group, false);
    assert.doesNotMatch(res.text, /ugs_grp_/);
    const { token: _t, ...publicPart } = created;
    assert.deepEqual(res.body.user_group, publicPart);
    assert.equal(await read(id), undefined);
    const put = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, name: 'x' } });
    assert.equal(put.status, 404);
    assert.equal(put.body.error.code, 'user_group_not_found');
  });

  it('delete (query string): 200 with the deleted group and the group is gone', async () => {
    const id = uid('query');
    const created = await create({ user_group_id: id, api_environment_tag: 'Testing' });
    const res = await t.request('DELETE', '/api/user', { token: t.token, query: { user_group_id: id, api_environment_tag: 'Testing' } });
    assert.equal(res.status, 200);
    assert.equal(res.body.user_group.team_id, created.team_id);
    assert.equal(res.body.user_group.api_environment_tag, 'Testing');
    assert.equal('token' in res.body.user_group, false);
    assert.equal(await read(id, 'Testing'), undefined);
  });

  it('delete: the id can be created again, with a new team_id and a new token', async () => {
    const id = uid('recreate');
    const first = await create({ user_group_id: id });
    const del = await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(del.status, 200);
    const again = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(again.status, 201);
    assert.equal(again.body.new_user_group, true);
    assert.notEqual(again.body.user_group.team_id, first.team_id);
    assert.ok(again.body.user_group.team_id > first.team_id);
    assert.notEqual(again.body.user_group.token, first.token);
  });

  it("delete: the deleted group's token stops working at once (it can no longer be rotated)", async () => {
    const id = uid('token');
    const created = await create({ user_group_id: id });
    assert.equal((await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: id } })).status, 200);
    const rotate = await t.request('POST', '/api/user', { token: t.token, body: { current_token: created.token } });
    assert.equal(rotate.status, 404);
    assert.equal(rotate.body.error.code, 'token_not_found');
  });

  it('delete: team_id is never reused, even after deleting the newest group', async () => {
    const a = await create({ user_group_id: uid('a') });
    const b = await create({ user_group_id: uid('b') });
    assert.equal((await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: b.provided_id } })).status, 200);
    const c = await create({ user_group_id: uid('c') });
    assert.ok(c.team_id > b.team_id, `team_id ${c.team_id} must be greater than the deleted ${b.team_id}`);
    assert.notEqual(c.team_id, a.team_id);
    // Also after the account's only group is gone: a fresh account sees ids beyond all of them.
    const other = (await t.issueToken({ account: `other-${n}` })).token;
    const d = await t.request('POST', '/api/user', { token: other, body: { user_group_id: b.provided_id } });
    assert.equal(d.status, 201);
    assert.ok(d.body.user_group.team_id > c.team_id);
  });

  it('delete: a missing group answers 404 user_group_not_found', async () => {
    const res = await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: uid('missing') } });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'user_group_not_found');
    const twice = uid('twice');
    await create({ user_group_id: twice });
    assert.equal((await t.request('DELETE', '/api/user', { token: t.token, query: { user_group_id: twice } })).status, 200);
    const again = await t.request('DELETE', '/api/user', { token: t.token, query: { user_group_id: twice } });
    assert.equal(again.status, 404);
    assert.equal(again.body.error.code, 'user_group_not_found');
  });

  it("delete: the environment selects which group is deleted; the other environment's group stays", async () => {
    const id = uid('env');
    const customer = await create({ user_group_id: id });
    await create({ user_group_id: id, api_environment_tag: 'Testing' });
    const res = await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: id, api_environment_tag: 'Testing' } });
    assert.equal(res.status, 200);
    assert.equal(res.body.user_group.api_environment_tag, 'Testing');
    assert.equal(await read(id, 'Testing'), undefined);
    assert.equal((await read(id, 'Customer'))!.team_id, customer.team_id);
  });

  it('delete: identification in both body and query answers 400 ambiguous_request and deletes nothing', async () => {
    const a = uid('amb-a');
    const b = uid('amb-b');
    await create({ user_group_id: a });
    await create({ user_group_id: b });
    const res = await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: a }, query: { user_group_id: b } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'ambiguous_request');
    assert.ok(await read(a));
    assert.ok(await read(b));
  });

  it('delete: without user_group_id answers 400 validation_failed naming it', async () => {
    const res = await t.request('DELETE', '/api/user', { token: t.token });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(res.body.error.details, [{ field: 'user_group_id', issue: 'required' }]);
    const withEnvOnly = await t.request('DELETE', '/api/user', { token: t.token, body: { api_environment_tag: 'Customer' } });
    assert.equal(withEnvOnly.status, 400);
    assert.equal(withEnvOnly.body.error.details![0].field, 'user_group_id');
  });

  it('delete: fields other than user_group_id and api_environment_tag are refused (400 naming the field), nothing deleted', async () => {
    const id = uid('extra');
    await create({ user_group_id: id });
    const res = await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: id, name: 'x' } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.ok(res.body.error.details!.some((d: { field: string }) => d.field === 'name'));
    assert.ok(await read(id));
  });

  it('delete: a read-only token gets 403 insufficient_scope and the group stays', async () => {
    const readOnly = (await t.issueToken({ scopes: ['read'] })).token;
    const id = uid('ro');
    await create({ user_group_id: id });
    const res = await t.request('DELETE', '/api/user', { token: readOnly, body: { user_group_id: id } });
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'insufficient_scope');
    assert.ok(await read(id));
  });

  it('delete: a token restricted to Testing gets 403 environment_forbidden on a Customer group, and the group stays', async () => {
    const testingOnly = (await t.issueToken({ env: 'Testing' })).token;
    const id = uid('envforbidden');
    await create({ user_group_id: id });
    const res = await t.request('DELETE', '/api/user', { token: testingOnly, query: { user_group_id: id, api_environment_tag: 'Customer' } });
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'environment_forbidden');
    assert.ok(await read(id));
  });
});
