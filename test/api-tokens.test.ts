// API tokens over HTTP (docs/api.md, "API tokens over HTTP"): an admin token lists, creates
// and revokes its own account's tokens, never grants more than it has, never reaches another
// account, and cannot revoke the account's last admin token. Every change is in the history
// with the acting token's id. Driven through HTTP on each backend.
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, forEachBackend, useTestApp, type BuiltApp, type AnyAnswer, type HttpResult } from './helpers/harness.ts';

forEachBackend('API tokens over HTTP', (backend) => {
  const t = useTestApp(backend);
  let admin: { id: number; token: string };

  before(async () => {
    admin = await t.issueToken({ scopes: ['read', 'write', 'admin'] });
  });

  const create = (token: string, body: Record<string, unknown>) => t.request('POST', '/api/api_tokens', { token, body });
  const list = async (token = admin.token) => {
    const res = await t.request('GET', '/api/api_tokens', { token });
    assert.equal(res.status, 200, res.text);
    return res.body.api_tokens as { id: number; scopes: string[]; status: string; allowed_environment: string | null; expires_at: string | null }[];
  };
  const countTokens = async () =>
    Number(
      (
        await t.handle.db
          .selectFrom('api_tokens')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  function assertRefused(res: HttpResult<AnyAnswer>, status: number, code: string) {
    assert.equal(res.status, status, res.text);
    assert.equal(res.body.error.code, code, res.text);
  }

  it('create: the value is shown once and works at once; the listing never shows a value or a hash', async () => {
    const res = await create(admin.token, { name: 'reporting backend', scopes: ['read'] });
    assert.equal(res.status, 201, res.text);
    assert.match(res.body.token, /^ugs_api_/);
    assert.deepEqual(
      { ...res.body.api_token, id: 0, created_at: '', token_start: '' },
      {
        id: 0,
        name: 'reporting backend',
        token_start: '',
        scopes: ['read'],
        allowed_environment: null,
        default_environment: 'Customer',
        status: 'active',
        expires_at: null,
        revoked_at: null,
        created_at: '',
      },
    );
    assert.ok(res.body.token.startsWith(res.body.api_token.token_start));
    assert.equal((await t.request('GET', '/api/users', { token: res.body.token })).status, 200, 'the new token works');

    const listed = await t.request('GET', '/api/api_tokens', { token: admin.token });
    assert.ok(listed.body.api_tokens.some((token: { id: number }) => token.id === res.body.api_token.id));
    assert.ok(!listed.text.includes(res.body.token), 'the listing shows a token value');
    const stored = await t.handle.db.selectFrom('api_tokens').select('token_hash').execute();
    for (const { token_hash } of stored) assert.ok(!listed.text.includes(token_hash), 'the listing shows a hash');
    for (const token of listed.body.api_tokens)
      assert.deepEqual(
        Object.keys(token).filter((key) => /token$|hash/.test(key)),
        [],
      );
  });

  it('current: any valid token reads its own account, scopes and environments, without its value', async () => {
    const reader = await t.issueToken({ scopes: ['read'], env: 'Testing' });
    const res = await t.request('GET', '/api/api_tokens/current', { token: reader.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.account, 'acme');
    assert.deepEqual([res.body.api_token.id, res.body.api_token.scopes, res.body.api_token.allowed_environment], [reader.id, ['read'], 'Testing']);
    assert.ok(!res.text.includes(reader.token));
  });

  it('no escalation: a scope the creating token lacks is 403 insufficient_scope, and nothing is created', async () => {
    const readAdmin = await t.issueToken({ scopes: ['read', 'admin'] });
    const adminOnly = await t.issueToken({ scopes: ['admin'] });
    const before = await countTokens();
    assertRefused(await create(readAdmin.token, { scopes: ['write'] }), 403, 'insufficient_scope');
    assertRefused(await create(readAdmin.token, { scopes: ['read', 'write', 'admin'] }), 403, 'insufficient_scope');
    assertRefused(await create(adminOnly.token, { scopes: ['read'] }), 403, 'insufficient_scope'); // admin does not imply read
    assert.equal(await countTokens(), before);
    // What it has, it may grant; write includes read.
    assert.equal((await create(readAdmin.token, { scopes: ['read', 'admin'] })).status, 201);
    assert.equal((await create(admin.token, { scopes: ['write', 'admin'] })).status, 201);
  });

  it('no escalation: a token restricted to an environment creates tokens restricted to it, never to the other or to both', async () => {
    const testingAdmin = await t.issueToken({ scopes: ['read', 'admin'], env: 'Testing' });
    const before = await countTokens();
    assertRefused(await create(testingAdmin.token, { scopes: ['read'], allowed_environment: null }), 403, 'environment_forbidden');
    assertRefused(await create(testingAdmin.token, { scopes: ['read'], allowed_environment: 'Customer' }), 403, 'environment_forbidden');
    assert.equal(await countTokens(), before);
    const inherited = await create(testingAdmin.token, { scopes: ['read'] });
    assert.equal(inherited.status, 201, inherited.text);
    assert.equal(inherited.body.api_token.allowed_environment, 'Testing');
    assert.equal(inherited.body.api_token.default_environment, 'Testing');
    // The new token is refused in Customer like its creator.
    assertRefused(
      await t.request('GET', '/api/users', { token: inherited.body.token, query: { api_environment_tag: 'Customer' } }),
      403,
      'environment_forbidden',
    );
  });

  it('no escalation: a token cannot outlive the token that creates it', async () => {
    const shortLived = await t.issueToken({ scopes: ['read', 'admin'], expiresInMs: 3_600_000 });
    const before = await countTokens();
    const res = await create(shortLived.token, { scopes: ['read'], expires_in_seconds: 7200 });
    assertRefused(res, 400, 'validation_failed');
    assert.deepEqual(res.body.error.details, [{ field: 'expires_in_seconds', issue: 'after_creator_expiry' }]);
    assert.equal(await countTokens(), before);
    const inherited = await create(shortLived.token, { scopes: ['read'] });
    assert.equal(inherited.status, 201, inherited.text);
    const creatorExpiry = (await list()).find((token) => token.id === shortLived.id)!.expires_at;
    assert.equal(inherited.body.api_token.expires_at, creatorExpiry);
    const shorter = await create(shortLived.token, { scopes: ['read'], expires_in_seconds: 600 });
    assert.equal(shorter.status, 201);
  });

  it('validation: unknown or repeated scopes, no scopes, an unknown field or a mismatched default environment are 400, and nothing is created', async () => {
    const before = await countTokens();
    for (const body of [
      { scopes: ['superuser'] },
      { scopes: [] },
      { scopes: ['read', 'read'] },
      {},
      { scopes: ['read'], token: 'ugs_api_mine' },
      { scopes: ['read'], expires_in_seconds: 10 },
      { scopes: ['read'], allowed_environment: 'Testing', default_environment: 'Customer' },
      { scopes: ['read'], name: '' },
    ]) {
      assertRefused(await create(admin.token, body), 400, 'validation_failed');
    }
    assert.equal(await countTokens(), before);
  });

  it("another account: its tokens are neither listed nor revocable (404 api_token_not_found), and created tokens belong to the creator's account", async () => {
    const other = await t.issueToken({ account: 'globex', scopes: ['read', 'write', 'admin'] });
    assert.ok(!(await list()).some((token) => token.id === other.id));
    assertRefused(await t.request('DELETE', `/api/api_tokens/${other.id}`, { token: admin.token }), 404, 'api_token_not_found');
    assert.equal((await t.request('GET', '/api/users', { token: other.token })).status, 200, "the other account's token still works");
    const created = await create(other.token, { scopes: ['read'] });
    assert.ok(!(await list()).some((token) => token.id === created.body.api_token.id));
    assert.ok((await list(other.token)).some((token) => token.id === created.body.api_token.id));
  });

  it('revoke: the token is refused right away, and revoking it again is 409 api_token_revoked', async () => {
    const victim = (await create(admin.token, { scopes: ['read'] })).body;
    const res = await t.request('DELETE', `/api/api_tokens/${victim.api_token.id}`, { token: admin.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.api_token.status, 'revoked');
    assert.ok(res.body.api_token.revoked_at);
    assertRefused(await t.request('GET', '/api/users', { token: victim.token }), 401, 'invalid_api_token');
    assertRefused(await t.request('DELETE', `/api/api_tokens/${victim.api_token.id}`, { token: admin.token }), 409, 'api_token_revoked');
    assertRefused(await t.request('DELETE', '/api/api_tokens/0', { token: admin.token }), 400, 'validation_failed');
    assertRefused(await t.request('DELETE', '/api/api_tokens/abc', { token: admin.token }), 400, 'validation_failed');
  });

  it("last admin: a token cannot revoke itself while it is the account's last active admin token (409 last_admin_token); with another, it can", async () => {
    const first = await t.issueToken({ account: 'solo', scopes: ['read', 'admin'] });
    assertRefused(await t.request('DELETE', `/api/api_tokens/${first.id}`, { token: first.token }), 409, 'last_admin_token');
    assert.equal((await t.request('GET', '/api/api_tokens', { token: first.token })).status, 200, 'still works');
    // An expired admin token does not count.
    await t.issueToken({ account: 'solo', scopes: ['admin'], expiresInMs: -1000 });
    assertRefused(await t.request('DELETE', `/api/api_tokens/${first.id}`, { token: first.token }), 409, 'last_admin_token');
    const second = await create(first.token, { scopes: ['admin'] });
    assert.equal(second.status, 201);
    assert.equal((await t.request('DELETE', `/api/api_tokens/${first.id}`, { token: first.token })).status, 200);
    assertRefused(await t.request('GET', '/api/api_tokens', { token: first.token }), 401, 'invalid_api_token');
    // Now the second is the last one.
    assertRefused(await t.request('DELETE', `/api/api_tokens/${second.body.api_token.id}`, { token: second.body.token }), 409, 'last_admin_token');
  });

  it('last admin, at once: two admin tokens revoking each other concurrently leave the account exactly one', async () => {
    for (let round = 0; round < 5; round++) {
      const account = `pair-${round}`;
      const a = await t.issueToken({ account, scopes: ['admin'] });
      const b = await t.issueToken({ account, scopes: ['admin'] });
      const [ab, ba] = await Promise.all([
        t.request('DELETE', `/api/api_tokens/${b.id}`, { token: a.token }),
        t.request('DELETE', `/api/api_tokens/${a.id}`, { token: b.token }),
      ]);
      const statuses = [ab.status, ba.status].sort();
      assert.equal(statuses[0], 200, `${ab.text} ${ba.text}`);
      assert.ok([401, 409].includes(statuses[1]), `${ab.text} ${ba.text}`);
      const active = await t.handle.db.selectFrom('api_tokens').select('id').where('id', 'in', [a.id, b.id]).where('revoked_at', 'is', null).execute();
      assert.equal(active.length, 1, `round ${round}: one admin token is left`);
    }
  });

  it("audit: issue and revoke appear in the token history with the acting token's id", async () => {
    const created = (await create(admin.token, { scopes: ['read'] })).body;
    const revoked = await t.request('DELETE', `/api/api_tokens/${created.api_token.id}`, { token: admin.token });
    const history = await t.request('GET', '/api/api_tokens/history', { token: admin.token, query: { limit: '2' } });
    assert.equal(history.status, 200, history.text);
    const [revoke, issue] = history.body.entries;
    assert.deepEqual(
      { action: revoke.action, api_token_id: revoke.api_token_id, actor_token_id: revoke.actor_token_id, request_id: revoke.request_id },
      { action: 'api_token.revoke', api_token_id: created.api_token.id, actor_token_id: admin.id, request_id: revoked.headers['x-request-id'] },
    );
    assert.deepEqual(
      { action: issue.action, api_token_id: issue.api_token_id, actor_token_id: issue.actor_token_id },
      { action: 'api_token.issue', api_token_id: created.api_token.id, actor_token_id: admin.id },
    );
    assert.ok(!history.text.includes(created.token));
  });
});

forEachBackend('API token revocation on several instances', (backend) => {
  const t = useTestApp(backend, { config: { apiTokenCacheMs: 500 } });

  it('revoke: every instance refuses the revoked token within a second', async () => {
    const admin = await t.issueToken({ scopes: ['read', 'admin'] });
    // A second instance over the same database, with the default token cache, that has just
    // verified the token (so it is cached there).
    const other: BuiltApp = await buildTestApp({ handle: t.handle }, { config: { apiTokenCacheMs: 500 } });
    try {
      const victim = (await t.request('POST', '/api/api_tokens', { token: admin.token, body: { scopes: ['read'] } })).body;
      assert.equal((await other.request('GET', '/api/users', { token: victim.token })).status, 200);
      const revokedAt = Date.now();
      assert.equal((await t.request('DELETE', `/api/api_tokens/${victim.api_token.id}`, { token: admin.token })).status, 200);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, revokedAt + 1000 - Date.now())));
      for (const instance of [t, other]) {
        const res = await instance.request('GET', '/api/users', { token: victim.token });
        assert.equal(res.status, 401, res.text);
      }
    } finally {
      await other.app.close();
    }
  });
});
