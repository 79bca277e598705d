// API token authentication, scopes and environments (docs/api.md, "Requests", "Tokens") and account
// isolation on every operation of the management API.
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp, type AnyAnswer, type HttpResult } from './helpers/harness.ts';
import { generateToken } from '../src/auth/token-format.ts';

function assertAuthError(res: HttpResult<AnyAnswer>, code: string) {
  assert.equal(res.status, 401, `expected 401 ${code}, got ${res.status} ${res.text.slice(0, 200)}`);
  assert.equal(res.body.success, 0);
  assert.equal(res.body.error.code, code);
  assert.equal(res.body.error.request_id, res.headers['x-request-id']);
  assert.ok(res.headers['www-authenticate'], 'a 401 says how to authenticate');
}

/** Every management operation, with a fresh id, as [label, method, path, options]. */
function everyOperation(id: string, groupToken: string) {
  return [
    ['create', 'POST', '/api/user', { body: { user_group_id: id } }],
    ['get-or-create (body)', 'GET', '/api/user', { body: { user_group_id: id } }],
    ['get-or-create (query)', 'GET', '/api/user', { query: { user_group_id: id } }],
    ['get-or-create (override)', 'POST', '/api/user', { body: { user_group_id: id }, headers: { 'x-http-method-override': 'GET' } }],
    ['update', 'PUT', '/api/user', { body: { user_group_id: id, name: 'x' } }],
    ['rotate', 'POST', '/api/user', { body: { current_token: groupToken } }],
    ['delete', 'DELETE', '/api/user', { body: { user_group_id: id } }],
    ['list', 'GET', '/api/users', {}],
  ] as const;
}

forEachBackend('API token authentication', (backend) => {
  const t = useTestApp(backend);
  let n = 0;
  const uid = (label: string) => `auth-${label}-${++n}`;
  let groupToken: string;

  before(async () => {
    const res = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: 'auth-victim' } });
    assert.equal(res.status, 201);
    groupToken = res.body.user_group.token;
  });

  /** The victim group is untouched and no group named like `id` exists. */
  async function assertNothingChanged(id: string) {
    const list = await t.request('GET', '/api/users', { token: t.token, query: { limit: '500' } });
    assert.equal(list.status, 200);
    assert.equal(
      list.body.user_groups.some((g: { provided_id: string }) => g.provided_id === id),
      false,
      `${id} must not exist`,
    );
    const victim = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: 'auth-victim' } });
    assert.equal(victim.status, 200);
    assert.equal(victim.body.user_group.token, groupToken);
    assert.equal(victim.body.user_group.name, 'auth-victim');
  }

  it('auth: a missing Authorization header answers 401 missing_api_token on every operation, changing nothing', async () => {
    const id = uid('missing');
    for (const [label, method, path, opts] of everyOperation(id, groupToken)) {
      const res = await t.request(method, path, { ...opts });
      assertAuthError(res, 'missing_api_token');
      assert.ok(res.status === 401, label);
    }
    await assertNothingChanged(id);
  });

  it('auth: garbage, a wrong scheme or a token with a bad checksum answers 401 invalid_api_token', async () => {
    const last = t.token.at(-1);
    const badChecksum = t.token.slice(0, -1) + (last === 'a' ? 'b' : 'a');
    const truncated = t.token.slice(0, -3);
    for (const authorization of [
      'Token garbage',
      `Token ${badChecksum}`,
      `Token ${truncated}`,
      `Token ${t.token}x`,
      `Basic ${Buffer.from(`user:${t.token}`).toString('base64')}`,
      t.token, // no scheme
      `Token ${t.token} extra`,
      'Token ugs_api_',
    ]) {
      const res = await t.request('GET', '/api/users', { headers: { authorization } });
      assertAuthError(res, 'invalid_api_token');
    }
  });

  it('auth: an API token sent without its scheme answers 401 saying to send it as Authorization: Token <API token>, not that it is invalid', async () => {
    for (const authorization of [t.token, ` ${t.token} `]) {
      const res = await t.request('GET', '/api/users', { headers: { authorization } });
      assertAuthError(res, 'invalid_api_token');
      assert.match(res.body.error.message, /has no scheme: send the API token as Authorization: Token <API token>/);
      assert.doesNotMatch(res.body.error.message, /not valid/);
      assert.ok(!res.text.includes(t.token), 'the token is never echoed');
    }
    const otherScheme = await t.request('GET', '/api/users', { headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` } });
    assert.match(otherScheme.body.error.message, /not of the form Token <API token>: send the API token as Authorization: Token <API token>/);
  });

  it('auth: a user group token or embed token sent to the management API, with or without a scheme, is 401 wrong_token_kind saying which token to send and how', async () => {
    const minted = await t.request('POST', '/api/embed_token', { token: t.token, body: { user_group_id: 'auth-victim' } });
    assert.equal(minted.status, 200, minted.text);
    const sent = [
      [groupToken, /^a user group token \(ugs_grp_…\) was sent where an API token is needed/],
      [minted.body.embed_token as string, /^an embed token was sent where an API token is needed/],
    ] as const;
    for (const [token, what] of sent) {
      for (const authorization of [token, `Token ${token}`, `Bearer ${token}`]) {
        const res = await t.request('GET', '/api/users', { headers: { authorization } });
        assertAuthError(res, 'wrong_token_kind');
        assert.match(res.body.error.message, what);
        assert.match(res.body.error.message, /embed side \(\/api\/embed\/…, as Authorization: Bearer <token>\)/);
        assert.match(res.body.error.message, /send the API token as Authorization: Token <API token>$/);
      }
    }
  });

  it('auth: a well-formed but unknown API token answers 401 invalid_api_token, changing nothing', async () => {
    const id = uid('unknown');
    const unknown = generateToken('api');
    for (const [label, method, path, opts] of everyOperation(id, groupToken)) {
      const res = await t.request(method, path, { token: unknown, ...opts });
      assertAuthError(res, 'invalid_api_token');
      assert.ok(res.status === 401, label);
    }
    await assertNothingChanged(id);
  });

  it('auth: a revoked API token answers 401 invalid_api_token at once, changing nothing', async () => {
    const issued = await t.issueToken();
    const before = await t.request('GET', '/api/users', { token: issued.token });
    assert.equal(before.status, 200);
    await t.revokeToken(issued.id);
    const id = uid('revoked');
    for (const [, method, path, opts] of everyOperation(id, groupToken)) {
      assertAuthError(await t.request(method, path, { token: issued.token, ...opts }), 'invalid_api_token');
    }
    await assertNothingChanged(id);
    // Other tokens of the account keep working.
    assert.equal((await t.request('GET', '/api/users', { token: t.token })).status, 200);
  });

  it('auth: an expired API token answers 401 invalid_api_token, looking the same as an unknown one', async () => {
    const expired = (await t.issueToken({ expiresInMs: -1000 })).token;
    const id = uid('expired');
    const res = await t.request('POST', '/api/user', { token: expired, body: { user_group_id: id } });
    assertAuthError(res, 'invalid_api_token');
    const unknown = await t.request('POST', '/api/user', { token: generateToken('api'), body: { user_group_id: id } });
    assert.equal(res.body.error.message, unknown.body.error.message);
    await assertNothingChanged(id);
    const valid = (await t.issueToken({ expiresInMs: 3_600_000 })).token;
    assert.equal((await t.request('GET', '/api/users', { token: valid })).status, 200, 'not yet expired works');
  });

  it('auth: a user group token in Authorization answers 401 wrong_token_kind, changing nothing', async () => {
    const id = uid('kind');
    for (const scheme of ['Token', 'Bearer']) {
      for (const [, method, path, opts] of everyOperation(id, groupToken)) {
        const res = await t.request(method, path, {
          ...opts,
          headers: { ...('headers' in opts ? opts.headers : {}), authorization: `${scheme} ${groupToken}` },
        });
        assertAuthError(res, 'wrong_token_kind');
      }
    }
    await assertNothingChanged(id);
  });

  it('auth: the scheme is case-insensitive and Bearer is accepted for an API token', async () => {
    for (const scheme of ['Token', 'token', 'TOKEN', 'Bearer']) {
      const res = await t.request('GET', '/api/users', { headers: { authorization: `${scheme} ${t.token}` } });
      assert.equal(res.status, 200, scheme);
    }
  });

  it('auth: a 401 never echoes the token sent', async () => {
    const unknown = generateToken('api');
    const res = await t.request('GET', '/api/users', { token: unknown });
    assert.equal(res.status, 401);
    assert.ok(!res.text.includes(unknown));
    const kind = await t.request('GET', '/api/users', { headers: { authorization: `Token ${groupToken}` } });
    assert.ok(!kind.text.includes(groupToken));
  });

  it('scopes: a read-only token may look up existing groups and list, and gets 403 insufficient_scope on every write', async () => {
    const readOnly = (await t.issueToken({ scopes: ['read'] })).token;
    assert.equal((await t.request('GET', '/api/user', { token: readOnly, body: { user_group_id: 'auth-victim' } })).status, 200);
    assert.equal((await t.request('GET', '/api/users', { token: readOnly })).status, 200);
    const writes = [
      ['create', 'POST', { body: { user_group_id: uid('ro') } }],
      ['create missing via get-or-create', 'GET', { body: { user_group_id: uid('ro') } }],
      ['update', 'PUT', { body: { user_group_id: 'auth-victim', name: 'hijacked' } }],
      ['rotate', 'POST', { body: { current_token: groupToken } }],
      ['delete', 'DELETE', { body: { user_group_id: 'auth-victim' } }],
    ] as const;
    for (const [label, method, opts] of writes) {
      const res = await t.request(method, '/api/user', { token: readOnly, ...opts });
      assert.equal(res.status, 403, label);
      assert.equal(res.body.error.code, 'insufficient_scope', label);
    }
    await assertNothingChanged(uid('ro'));
  });

  it('scopes: write means everything, so a write-only token may also look up, list and read history', async () => {
    const writeOnly = (await t.issueToken({ scopes: ['write'] })).token;
    const id = uid('wo');
    assert.equal((await t.request('GET', '/api/user', { token: writeOnly, query: { user_group_id: id } })).status, 201);
    assert.equal((await t.request('GET', '/api/user', { token: writeOnly, query: { user_group_id: id } })).status, 200);
    const list = await t.request('GET', '/api/users', { token: writeOnly });
    assert.equal(list.status, 200);
    assert.ok(list.body.user_groups.some((g: { provided_id: string }) => g.provided_id === id));
    assert.equal((await t.request('GET', '/api/user/history', { token: writeOnly, query: { user_group_id: id } })).status, 200);
  });

  it('environments: a token restricted to Testing gets 403 environment_forbidden for Customer on every operation, changing nothing', async () => {
    const testingOnly = (await t.issueToken({ env: 'Testing' })).token;
    const id = uid('env');
    const ops = everyOperation(id, groupToken).filter(([label]) => label !== 'rotate');
    for (const [label, method, path, opts] of ops) {
      const given = opts as { body?: Record<string, unknown>; query?: Record<string, string>; headers?: Record<string, string> };
      const withTag = given.body
        ? { ...given, body: { ...given.body, api_environment_tag: 'Customer' } }
        : { ...given, query: { ...given.query, api_environment_tag: 'Customer' } };
      const res = await t.request(method, path, { token: testingOnly, ...withTag });
      assert.equal(res.status, 403, label);
      assert.equal(res.body.error.code, 'environment_forbidden', label);
    }
    // The victim lives in Customer: rotating its token is forbidden to a Testing-only token.
    const rotate = await t.request('POST', '/api/user', { token: testingOnly, body: { current_token: groupToken } });
    assert.equal(rotate.status, 403);
    assert.equal(rotate.body.error.code, 'environment_forbidden');
    await assertNothingChanged(id);
  });
});

forEachBackend('account isolation', (backend) => {
  const t = useTestApp(backend);
  let tokenA: string;
  let tokenB: string;
  let n = 0;
  const uid = (label: string) => `iso-${label}-${++n}`;

  before(async () => {
    tokenA = (await t.issueToken({ account: 'alpha' })).token;
    tokenB = (await t.issueToken({ account: 'bravo' })).token;
  });

  async function createA(id: string, extra: Record<string, unknown> = {}) {
    const res = await t.request('POST', '/api/user', { token: tokenA, body: { user_group_id: id, name: 'A name', properties: { owner: 'A' }, ...extra } });
    assert.equal(res.status, 201);
    return res.body.user_group;
  }

  /** A's group is exactly as created. */
  async function assertAUnchanged(a: { provided_id: string; api_environment_tag: string }) {
    const res = await t.request('GET', '/api/user', { token: tokenA, body: { user_group_id: a.provided_id, api_environment_tag: a.api_environment_tag } });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.user_group, a);
  }

  it('isolation: the same user_group_id in two accounts are two groups with their own team_id and token', async () => {
    const id = uid('same');
    const a = await createA(id);
    const b = await t.request('POST', '/api/user', { token: tokenB, body: { user_group_id: id } });
    assert.equal(b.status, 201, 'no 409 across accounts');
    assert.notEqual(b.body.user_group.team_id, a.team_id);
    assert.notEqual(b.body.user_group.token, a.token);
    assert.equal(b.body.user_group.name, id);
    assert.equal(b.body.user_group.properties, null);
    await assertAUnchanged(a);
  });

  it("isolation: get-or-create by account B never returns account A's group; it creates B's own", async () => {
    const id = uid('goc');
    const a = await createA(id);
    for (const opts of [{ body: { user_group_id: id } }, { query: { user_group_id: id } }]) {
      const res = await t.request('GET', '/api/user', { token: tokenB, ...opts });
      assert.ok(res.status === 200 || res.status === 201);
      assert.notEqual(res.body.user_group.team_id, a.team_id);
      assert.notEqual(res.body.user_group.token, a.token);
      assert.equal(res.body.user_group.properties, null);
    }
    await assertAUnchanged(a);
    // A read-only token of B sees no group of A either: it would have to create one.
    const readOnlyB = (await t.issueToken({ account: 'bravo', scopes: ['read'] })).token;
    const fresh = uid('goc-ro');
    await createA(fresh);
    const ro = await t.request('GET', '/api/user', { token: readOnlyB, body: { user_group_id: fresh } });
    assert.equal(ro.status, 403);
    assert.equal(ro.body.error.code, 'insufficient_scope');
  });

  it("isolation: account B cannot update account A's group (404 user_group_not_found)", async () => {
    const id = uid('put');
    const a = await createA(id);
    const res = await t.request('PUT', '/api/user', { token: tokenB, body: { user_group_id: id, name: 'hijacked', properties: null } });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'user_group_not_found');
    await assertAUnchanged(a);
  });

  it("isolation: account B cannot rotate account A's token (404 token_not_found)", async () => {
    const a = await createA(uid('rotate'));
    const res = await t.request('POST', '/api/user', { token: tokenB, body: { current_token: a.token } });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'token_not_found');
    assert.equal(res.body.user_group, undefined);
    await assertAUnchanged(a);
  });

  it("isolation: account B cannot delete account A's group (404 user_group_not_found)", async () => {
    const id = uid('delete');
    const a = await createA(id);
    for (const opts of [{ body: { user_group_id: id } }, { query: { user_group_id: id } }]) {
      const res = await t.request('DELETE', '/api/user', { token: tokenB, ...opts });
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'user_group_not_found');
    }
    await assertAUnchanged(a);
  });

  it("isolation: deleting B's group of the same id leaves A's group alone", async () => {
    const id = uid('delete-same');
    const a = await createA(id);
    assert.equal((await t.request('POST', '/api/user', { token: tokenB, body: { user_group_id: id } })).status, 201);
    const res = await t.request('DELETE', '/api/user', { token: tokenB, body: { user_group_id: id } });
    assert.equal(res.status, 200);
    assert.notEqual(res.body.user_group.team_id, a.team_id);
    await assertAUnchanged(a);
  });

  it("isolation: account B's list never shows account A's groups, in either environment or with q", async () => {
    const id = uid('list');
    await createA(id);
    await createA(id, { api_environment_tag: 'Testing' });
    for (const query of [{}, { api_environment_tag: 'Testing' }, { q: id }, { q: 'iso-' }] as Record<string, string>[]) {
      const res = await t.request('GET', '/api/users', { token: tokenB, query: { ...query, limit: '500' } });
      assert.equal(res.status, 200);
      assert.equal(
        res.body.user_groups.some((g: { provided_id: string }) => g.provided_id === id),
        false,
        JSON.stringify(query),
      );
    }
    const own = await t.request('GET', '/api/users', { token: tokenA, query: { q: id } });
    assert.equal(own.body.user_groups.length, 1, 'A does see its own group');
  });

  it("isolation: account B's create of A's id in Testing does not collide with A's Testing group", async () => {
    const id = uid('testing');
    const a = await createA(id, { api_environment_tag: 'Testing' });
    const b = await t.request('POST', '/api/user', { token: tokenB, body: { user_group_id: id, api_environment_tag: 'Testing' } });
    assert.equal(b.status, 201);
    await assertAUnchanged(a);
  });
});
