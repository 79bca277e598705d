// GET /api/user: get or create, identified by JSON body, query string or POST with
// X-HTTP-Method-Override: GET (docs/api.md, "GET /api/user: get or create").
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp } from './helpers/harness.ts';

forEachBackend('GET /api/user gets or creates a user group', (backend) => {
  const t = useTestApp(backend);
  let readOnly: string;
  let n = 0;
  const uid = (label: string) => `goc-${label}-${++n}`;

  before(async () => {
    readOnly = (await t.issueToken({ scopes: ['read'] })).token;
  });

  async function stored(id: string, env?: 'Customer' | 'Testing') {
    const query: Record<string, string> = { q: id, limit: '500' };
    if (env) query.api_environment_tag = env;
    const res = await t.request('GET', '/api/users', { token: t.token, query });
    assert.equal(res.status, 200);
    return res.body.user_groups.filter((g: { provided_id: string }) => g.provided_id === id);
  }

  it('get-or-create (JSON body): a missing group is created from the given fields, 201 with new_user_group true', async () => {
    const id = uid('body');
    const res = await t.request('GET', '/api/user', {
      token: t.token,
      body: { user_group_id: id, name: 'Body Group', mapping: { '40': 213 }, properties: { plan: 'pro' }, is_demo_group: true, api_environment_tag: 'Testing' },
    });
    assert.equal(res.status, 201);
    assert.equal(res.body.success, 1);
    assert.equal(res.body.new_user_group, true);
    const g = res.body.user_group;
    assert.equal(g.provided_id, id);
    assert.equal(g.name, 'Body Group');
    assert.deepEqual(g.mapping, { '40': 213 });
    assert.deepEqual(g.properties, { plan: 'pro' });
    assert.equal(g.is_demo_group, true);
    assert.equal(g.api_environment_tag, 'Testing');
    assert.match(g.token, /^ugs_grp_/);
    assert.equal((await stored(id, 'Testing')).length, 1);
  });

  it('get-or-create (JSON body): an existing group answers 200 with new_user_group false and the same team_id and token', async () => {
    const id = uid('again');
    const first = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(first.status, 201);
    const second = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(second.status, 200);
    assert.equal(second.body.success, 1);
    assert.equal(second.body.new_user_group, false);
    assert.deepEqual(second.body.user_group, first.body.user_group);
    assert.equal((await stored(id)).length, 1);
  });

  it("get-or-create: an existing group is not modified even if the body's name, mapping, properties or is_demo_group differ", async () => {
    const id = uid('unchanged');
    const created = await t.request('POST', '/api/user', {
      token: t.token,
      body: { user_group_id: id, name: 'Original', mapping: { a: 'b' }, properties: { v: 1 } },
    });
    assert.equal(created.status, 201);
    const got = await t.request('GET', '/api/user', {
      token: t.token,
      body: { user_group_id: id, name: 'Different', mapping: { c: 'd' }, properties: { v: 2 }, is_demo_group: true },
    });
    assert.equal(got.status, 200);
    assert.equal(got.body.new_user_group, false);
    assert.deepEqual(got.body.user_group, created.body.user_group);
    const { token: _t, ...publicPart } = created.body.user_group;
    assert.deepEqual((await stored(id))[0], publicPart);
  });

  it('get-or-create (query string): creates with 201, then finds with 200', async () => {
    const id = uid('query');
    const first = await t.request('GET', '/api/user', {
      token: t.token,
      query: { user_group_id: id, name: 'Query Name', api_environment_tag: 'Testing', is_demo_group: 'true' },
    });
    assert.equal(first.status, 201);
    assert.equal(first.body.new_user_group, true);
    assert.equal(first.body.user_group.provided_id, id);
    assert.equal(first.body.user_group.name, 'Query Name');
    assert.equal(first.body.user_group.api_environment_tag, 'Testing');
    assert.equal(first.body.user_group.is_demo_group, true);
    const second = await t.request('GET', '/api/user', { token: t.token, query: { user_group_id: id, api_environment_tag: 'Testing' } });
    assert.equal(second.status, 200);
    assert.equal(second.body.new_user_group, false);
    assert.deepEqual(second.body.user_group, first.body.user_group);
  });

  it('get-or-create (query string): the decimal string finds a group created with a JSON integer id', async () => {
    const num = 700_000 + n++;
    const created = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: num } });
    assert.equal(created.status, 201);
    const found = await t.request('GET', '/api/user', { token: t.token, query: { user_group_id: String(num) } });
    assert.equal(found.status, 200);
    assert.equal(found.body.user_group.team_id, created.body.user_group.team_id);
    const byBody = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: num } });
    assert.equal(byBody.status, 200);
    assert.equal(byBody.body.user_group.team_id, created.body.user_group.team_id);
  });

  it('get-or-create (POST with X-HTTP-Method-Override: GET): creates with 201, then finds with 200 and never answers 409', async () => {
    const id = uid('override');
    const headers = { 'x-http-method-override': 'GET' };
    const first = await t.request('POST', '/api/user', { token: t.token, headers, body: { user_group_id: id, properties: { x: 1 } } });
    assert.equal(first.status, 201);
    assert.equal(first.body.new_user_group, true);
    assert.deepEqual(first.body.user_group.properties, { x: 1 });
    const second = await t.request('POST', '/api/user', { token: t.token, headers, body: { user_group_id: id, properties: { x: 2 } } });
    assert.equal(second.status, 200);
    assert.equal(second.body.new_user_group, false);
    assert.deepEqual(second.body.user_group, first.body.user_group);
  });

  it('get-or-create (method override): a POST without a body may identify the group by query string, like GET', async () => {
    const id = uid('override-query');
    const headers = { 'x-http-method-override': 'GET' };
    const first = await t.request('POST', '/api/user', { token: t.token, headers, query: { user_group_id: id, name: 'From Query' } });
    assert.equal(first.status, 201);
    assert.equal(first.body.new_user_group, true);
    assert.equal(first.body.user_group.name, 'From Query');
    const second = await t.request('POST', '/api/user', { token: t.token, headers, query: { user_group_id: id } });
    assert.equal(second.status, 200);
    assert.equal(second.body.user_group.team_id, first.body.user_group.team_id);
  });

  it('get-or-create (method override): the header value is case-insensitive', async () => {
    const id = uid('override-lc');
    const res = await t.request('POST', '/api/user', { token: t.token, headers: { 'x-http-method-override': 'get' }, body: { user_group_id: id } });
    assert.equal(res.status, 201);
    assert.equal(res.body.new_user_group, true);
  });

  it('get-or-create (method override): an override other than GET is refused with 400 and creates nothing', async () => {
    const id = uid('override-put');
    const res = await t.request('POST', '/api/user', { token: t.token, headers: { 'x-http-method-override': 'PUT' }, body: { user_group_id: id } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(await stored(id), []);
  });

  it('get-or-create: identification in both the body and the query answers 400 ambiguous_request and creates nothing', async () => {
    const a = uid('amb-a');
    const b = uid('amb-b');
    const res = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: a }, query: { user_group_id: b } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'ambiguous_request');
    assert.deepEqual(await stored(a), []);
    assert.deepEqual(await stored(b), []);
    const override = await t.request('POST', '/api/user', {
      token: t.token,
      headers: { 'x-http-method-override': 'GET' },
      body: { user_group_id: a },
      query: { user_group_id: b },
    });
    assert.equal(override.status, 400);
    assert.equal(override.body.error.code, 'ambiguous_request');
    assert.deepEqual(await stored(a), []);
  });

  it('get-or-create: a body holding only the environment plus a query holding the id is still ambiguous (400)', async () => {
    const id = uid('amb-env');
    const res = await t.request('GET', '/api/user', { token: t.token, body: { api_environment_tag: 'Testing' }, query: { user_group_id: id } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'ambiguous_request');
    assert.deepEqual(await stored(id, 'Testing'), []);
    assert.deepEqual(await stored(id, 'Customer'), []);
  });

  it('get-or-create: no identification at all answers 400 validation_failed naming user_group_id', async () => {
    const res = await t.request('GET', '/api/user', { token: t.token });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(res.body.error.details, [{ field: 'user_group_id', issue: 'required' }]);
    const bodyWithoutId = await t.request('GET', '/api/user', { token: t.token, body: { name: 'x' } });
    assert.equal(bodyWithoutId.status, 400);
    assert.equal(bodyWithoutId.body.error.details![0].field, 'user_group_id');
  });

  it('get-or-create: an unknown query parameter answers 400 validation_failed naming it', async () => {
    const id = uid('q-unknown');
    const res = await t.request('GET', '/api/user', { token: t.token, query: { user_group_id: id, propertiez: 'x' } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.ok(res.body.error.details!.some((d: { field: string }) => d.field === 'propertiez'));
    assert.deepEqual(await stored(id), []);
  });

  it('get-or-create: a repeated user_group_id query parameter is refused with 400, not guessed', async () => {
    const res = await t.request('GET', `/api/user?user_group_id=${uid('rep1')}&user_group_id=${uid('rep2')}`, { token: t.token });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
  });

  it('get-or-create (query string): field rules apply to query values too (blank id, bad environment)', async () => {
    const blank = await t.request('GET', '/api/user', { token: t.token, query: { user_group_id: '   ' } });
    assert.equal(blank.status, 400);
    assert.equal(blank.body.error.details![0].field, 'user_group_id');
    const env = await t.request('GET', '/api/user', { token: t.token, query: { user_group_id: uid('env'), api_environment_tag: 'customer' } });
    assert.equal(env.status, 400);
    assert.equal(env.body.error.details![0].field, 'api_environment_tag');
  });

  it('get-or-create: a read-only token gets 200 on an existing group', async () => {
    const id = uid('ro-existing');
    const created = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(created.status, 201);
    for (const req of [
      { body: { user_group_id: id } },
      { query: { user_group_id: id } },
      { body: { user_group_id: id }, headers: { 'x-http-method-override': 'GET' }, method: 'POST' },
    ]) {
      const res = await t.request(req.method ?? 'GET', '/api/user', { token: readOnly, ...req });
      assert.equal(res.status, 200);
      assert.equal(res.body.new_user_group, false);
      assert.equal(res.body.user_group.token, created.body.user_group.token);
    }
  });

  it('get-or-create: a read-only token gets 403 insufficient_scope where a creation is needed, and nothing is created', async () => {
    const id = uid('ro-missing');
    const byBody = await t.request('GET', '/api/user', { token: readOnly, body: { user_group_id: id } });
    assert.equal(byBody.status, 403);
    assert.equal(byBody.body.error.code, 'insufficient_scope');
    const byQuery = await t.request('GET', '/api/user', { token: readOnly, query: { user_group_id: id } });
    assert.equal(byQuery.status, 403);
    assert.equal(byQuery.body.error.code, 'insufficient_scope');
    assert.deepEqual(await stored(id), []);
  });

  it('get-or-create: the same id in Customer and Testing are two groups; the environment selects which one', async () => {
    const id = uid('envs');
    const customer = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } });
    const testing = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id, api_environment_tag: 'Testing' } });
    assert.equal(customer.status, 201);
    assert.equal(testing.status, 201);
    assert.equal(customer.body.user_group.api_environment_tag, 'Customer');
    assert.equal(testing.body.user_group.api_environment_tag, 'Testing');
    assert.notEqual(customer.body.user_group.team_id, testing.body.user_group.team_id);
    const again = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id, api_environment_tag: 'Testing' } });
    assert.equal(again.status, 200);
    assert.equal(again.body.user_group.team_id, testing.body.user_group.team_id);
  });

  it('get-or-create: a token restricted to Customer gets 403 environment_forbidden for Testing, and nothing is created', async () => {
    const customerOnly = (await t.issueToken({ env: 'Customer' })).token;
    const id = uid('restricted');
    const res = await t.request('GET', '/api/user', { token: customerOnly, body: { user_group_id: id, api_environment_tag: 'Testing' } });
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'environment_forbidden');
    assert.deepEqual(await stored(id, 'Testing'), []);
    // Even reading an existing Testing group is forbidden to it.
    const existing = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id, api_environment_tag: 'Testing' } });
    assert.equal(existing.status, 201);
    const read = await t.request('GET', '/api/user', { token: customerOnly, query: { user_group_id: id, api_environment_tag: 'Testing' } });
    assert.equal(read.status, 403);
    assert.equal(read.body.error.code, 'environment_forbidden');
  });

  it('get-or-create: an invalid body is refused with 400 even when the group already exists', async () => {
    const id = uid('invalid-existing');
    const created = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(created.status, 201);
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 40; i++) deep = { d: deep };
    const tooDeep = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id, properties: deep } });
    assert.equal(tooDeep.status, 400);
    assert.equal(tooDeep.body.error.code, 'validation_failed');
    assert.equal(tooDeep.body.error.details![0].field, 'properties');
    const badName = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id, name: '' } });
    assert.equal(badName.status, 400);
    assert.equal(badName.body.error.details![0].field, 'name');
  });
});
