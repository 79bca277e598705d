// POST /api/user without current_token: create (docs/api.md, "The user group", "POST /api/user: create").
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp } from './helpers/harness.ts';
import { UserGroup } from '../src/user-groups/user-groups.schemas.ts';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

forEachBackend('POST /api/user creates a user group', (backend) => {
  const t = useTestApp(backend);
  let n = 0;
  const uid = (label: string) => `create-${label}-${++n}`;

  /** The group as stored, read back through the list endpoint (which never creates). */
  async function stored(id: string, env?: 'Customer' | 'Testing', tok = t.token) {
    const query: Record<string, string> = { q: id, limit: '500' };
    if (env) query.api_environment_tag = env;
    const res = await t.request('GET', '/api/users', { token: tok, query });
    assert.equal(res.status, 200);
    return res.body.user_groups.find((g: { provided_id: string }) => g.provided_id === id);
  }

  it('create: answers 201 with every field of the user_group object and success 1', async () => {
    const id = uid('full');
    const res = await t.request('POST', '/api/user', {
      token: t.token,
      body: {
        user_group_id: id,
        name: 'Example 1',
        mapping: { '40': '213', schema_b: 7 },
        properties: { region: 'emea', nested: { list: [1, 'two', null, true] } },
        is_demo_group: true,
        api_environment_tag: 'Customer',
      },
    });
    assert.equal(res.status, 201);
    assert.equal(res.body.success, 1);
    const g = res.body.user_group;
    // Every field the declaration gives an answer (src/user-groups/declared-fields.ts), and the token.
    assert.deepEqual(Object.keys(g).sort(), Object.keys(UserGroup.properties).sort());
    assert.ok('token' in g && 'team_id' in g);
    assert.equal(typeof g.team_id, 'number');
    assert.ok(Number.isSafeInteger(g.team_id) && g.team_id > 0);
    assert.match(g.token, /^ugs_grp_/);
    assert.equal(g.name, 'Example 1');
    assert.equal(g.provided_id, id);
    assert.deepEqual(g.mapping, { '40': '213', schema_b: 7 });
    assert.deepEqual(g.properties, { region: 'emea', nested: { list: [1, 'two', null, true] } });
    assert.equal(g.api_environment_tag, 'Customer');
    assert.equal(g.is_demo_group, true);
    assert.match(g.created_at, ISO);
    assert.match(g.updated_at, ISO);
  });

  it('create: name defaults to the user_group_id, mapping and properties are null, is_demo_group is false, environment is Customer', async () => {
    const id = uid('defaults');
    const res = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(res.status, 201);
    const g = res.body.user_group;
    assert.equal(g.name, id);
    assert.equal(g.mapping, null);
    assert.equal(g.properties, null);
    assert.equal(g.is_demo_group, false);
    assert.equal(g.api_environment_tag, 'Customer');
  });

  it('create: the group is stored as answered (read back through the list)', async () => {
    const id = uid('stored');
    const created = await t.request('POST', '/api/user', {
      token: t.token,
      body: { user_group_id: id, name: 'Stored', properties: { a: 1 }, mapping: { s: 1 }, is_demo_group: true },
    });
    assert.equal(created.status, 201);
    const { token: _token, ...publicPart } = created.body.user_group;
    assert.deepEqual(await stored(id), publicPart);
  });

  it('create: an existing key answers 409 user_group_exists and changes nothing', async () => {
    const id = uid('dup');
    const first = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id, name: 'First', properties: { v: 1 } } });
    assert.equal(first.status, 201);
    const second = await t.request('POST', '/api/user', {
      token: t.token,
      body: { user_group_id: id, name: 'Second', properties: { v: 2 }, is_demo_group: true },
    });
    assert.equal(second.status, 409);
    assert.equal(second.body.success, 0);
    assert.equal(second.body.error.code, 'user_group_exists');
    assert.equal(second.body.user_group, undefined, 'a 409 must not leak the existing group or its token');
    const after = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(after.status, 200);
    assert.deepEqual(after.body.user_group, first.body.user_group);
  });

  it('create: every created group gets its own team_id and token', async () => {
    const a = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: uid('a') } });
    const b = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: uid('b') } });
    assert.equal(a.status, 201);
    assert.equal(b.status, 201);
    assert.notEqual(a.body.user_group.team_id, b.body.user_group.team_id);
    assert.notEqual(a.body.user_group.token, b.body.user_group.token);
  });

  it('create: a JSON integer user_group_id is stored as its decimal string and is the same key as that string', async () => {
    const num = 900_000 + n++;
    const res = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: num } });
    assert.equal(res.status, 201);
    assert.equal(res.body.user_group.provided_id, String(num));
    assert.equal(res.body.user_group.name, String(num));
    const again = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: String(num) } });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'user_group_exists');
    const negative = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: -42 } });
    assert.equal(negative.status, 201);
    assert.equal(negative.body.user_group.provided_id, '-42');
  });

  it('create: user_group_id is compared exactly (case, surrounding spaces and Unicode form make different groups)', async () => {
    const base = uid('Case');
    const variants = [base, base.toLowerCase(), base.toUpperCase(), ` ${base}`, `${base} `, `${base}\u00e9`, `${base}e\u0301`];
    const teamIds = new Set<number>();
    for (const v of variants) {
      const res = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: v } });
      assert.equal(res.status, 201, `create ${JSON.stringify(v)}`);
      assert.equal(res.body.user_group.provided_id, v, 'never trimmed or normalized');
      teamIds.add(res.body.user_group.team_id);
    }
    assert.equal(teamIds.size, variants.length);
  });

  it('create: a user_group_id of exactly 256 characters (counting code points) is accepted', async () => {
    const ascii = 'x'.repeat(250) + String(100000 + n++).slice(0, 6);
    assert.equal(ascii.length, 256);
    const res = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: ascii } });
    assert.equal(res.status, 201);
    assert.equal(res.body.user_group.provided_id, ascii);
    const emoji = '\u{1F600}'.repeat(255) + 'a';
    const res2 = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: emoji } });
    assert.equal(res2.status, 201);
    assert.equal(res2.body.user_group.provided_id, emoji);
  });

  it('create: the same user_group_id in Customer and in Testing are two groups', async () => {
    const id = uid('envs');
    const customer = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id, api_environment_tag: 'Customer' } });
    const testing = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id, api_environment_tag: 'Testing' } });
    assert.equal(customer.status, 201);
    assert.equal(testing.status, 201);
    assert.equal(customer.body.user_group.api_environment_tag, 'Customer');
    assert.equal(testing.body.user_group.api_environment_tag, 'Testing');
    assert.notEqual(customer.body.user_group.team_id, testing.body.user_group.team_id);
    assert.notEqual(customer.body.user_group.token, testing.body.user_group.token);
    const dupTesting = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id, api_environment_tag: 'Testing' } });
    assert.equal(dupTesting.status, 409);
    assert.equal(dupTesting.body.error.code, 'user_group_exists');
  });

  it("create: without api_environment_tag the API token's default environment is used", async () => {
    const testingDefault = (await t.issueToken({ defaultEnv: 'Testing' })).token;
    const id = uid('default-env');
    const res = await t.request('POST', '/api/user', { token: testingDefault, body: { user_group_id: id } });
    assert.equal(res.status, 201);
    assert.equal(res.body.user_group.api_environment_tag, 'Testing');
    assert.equal(await stored(id, 'Customer'), undefined);
    assert.equal((await stored(id, 'Testing'))!.team_id, res.body.user_group.team_id);
    // An explicit tag still wins over the default.
    const explicit = await t.request('POST', '/api/user', { token: testingDefault, body: { user_group_id: id, api_environment_tag: 'Customer' } });
    assert.equal(explicit.status, 201);
    assert.equal(explicit.body.user_group.api_environment_tag, 'Customer');
  });

  it('create: a token restricted to Testing creates there by default and gets 403 environment_forbidden for Customer, creating nothing', async () => {
    const testingOnly = (await t.issueToken({ env: 'Testing' })).token;
    const id = uid('restricted');
    const ok = await t.request('POST', '/api/user', { token: testingOnly, body: { user_group_id: id } });
    assert.equal(ok.status, 201);
    assert.equal(ok.body.user_group.api_environment_tag, 'Testing');
    const forbidden = await t.request('POST', '/api/user', { token: testingOnly, body: { user_group_id: id, api_environment_tag: 'Customer' } });
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.body.error.code, 'environment_forbidden');
    assert.equal(await stored(id, 'Customer'), undefined);
  });

  it('create: a read-only token gets 403 insufficient_scope and nothing is created', async () => {
    const readOnly = (await t.issueToken({ scopes: ['read'] })).token;
    const id = uid('readonly');
    const res = await t.request('POST', '/api/user', { token: readOnly, body: { user_group_id: id } });
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'insufficient_scope');
    assert.equal(await stored(id), undefined);
  });

  it('create: a body without user_group_id answers 400 validation_failed naming user_group_id', async () => {
    const res = await t.request('POST', '/api/user', { token: t.token, body: { name: 'nameless' } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.ok(res.body.error.details!.some((d: { field: string }) => d.field === 'user_group_id'));
    const list = await t.request('GET', '/api/users', { token: t.token, query: { q: 'nameless' } });
    assert.deepEqual(list.body.user_groups, []);
  });

  it('create: an empty JSON object answers 400 validation_failed naming user_group_id', async () => {
    const res = await t.request('POST', '/api/user', { token: t.token, body: {} });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(res.body.error.details, [{ field: 'user_group_id', issue: 'required' }]);
  });

  it('create: grace_period_seconds without current_token is refused with 400 ambiguous_request and creates nothing', async () => {
    const id = uid('grace');
    const res = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id, grace_period_seconds: 10 } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'ambiguous_request');
    assert.equal(await stored(id), undefined);
  });

  it('create: api_environment_tag is always returned as a string', async () => {
    for (const env of ['Customer', 'Testing'] as const) {
      const res = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: uid('tag'), api_environment_tag: env } });
      assert.equal(res.status, 201);
      assert.equal(res.body.user_group.api_environment_tag, env);
    }
  });
});
