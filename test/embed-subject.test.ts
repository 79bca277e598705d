// The subject of an embed token (docs/api.md, "Embed tokens", "The subject"): every account
// shares one issuer and one key set, so (`iss`, `sub`) must name exactly one group of one
// account and environment. Two accounts, and one account's two environments, that each have a
// group of the same user_group_id get tokens whose subjects differ, verified with the JWKS as a
// data API would; any id parses back from `sub` by the documented rule; introspection answers
// the same `sub` for a token with a viewer and one without; and a token issued before subjects
// named the tenant keeps working until it expires.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import { createGroup, forEachBackend, useTestApp } from './helpers/harness.ts';
import { resignWithServiceKey } from './helpers/embed-keys.ts';

/** docs/api.md, "The subject": the slug has no `:`, the environment is one of two words, the id is the rest. */
const SUBJECT = /^([a-z0-9][a-z0-9-]*):(Customer|Testing):(.*)$/s;

forEachBackend('embed token subjects', (backend) => {
  const t = useTestApp(backend);

  async function mint(token: string, body: Record<string, unknown>): Promise<string> {
    const res = await t.request('POST', '/api/embed_token', { token, body });
    assert.equal(res.status, 200, res.text);
    return res.body.embed_token;
  }

  /** The claims as a verifier with only the issuer, the audience and the key set sees them. */
  async function verified(token: string): Promise<JWTPayload> {
    const keySet = JSON.parse((await t.request('GET', '/.well-known/jwks.json')).text) as JSONWebKeySet;
    const { payload } = await jwtVerify(token, createLocalJWKSet(keySet), { issuer: 'http://127.0.0.1:3000', audience: 'ugs:embed' });
    return payload;
  }

  it("two accounts, and one account's two environments, with the same user_group_id: each token's sub is its own (<account>:<environment>:<id>), the issuer the same", async () => {
    const testingOnly = (await t.issueToken({ env: 'Testing' })).token;
    const globex = (await t.issueToken({ account: 'globex' })).token;
    await createGroup(t, { user_group_id: 'shared' });
    await createGroup(t, { user_group_id: 'shared', api_environment_tag: 'Testing' });
    await createGroup(t, { user_group_id: 'shared' }, globex);

    const tokens = {
      'acme:Customer:shared': await mint(t.token, { user_group_id: 'shared' }),
      'acme:Testing:shared': await mint(testingOnly, { user_group_id: 'shared', api_environment_tag: 'Testing' }),
      'globex:Customer:shared': await mint(globex, { user_group_id: 'shared' }),
    };
    const issuers = new Set<unknown>();
    for (const [subject, token] of Object.entries(tokens)) {
      const claims = await verified(token);
      const [, account, environment] = SUBJECT.exec(subject)!;
      assert.equal(claims.sub, subject);
      assert.deepEqual([claims.ugs_account, claims.ugs_environment, claims.ugs_user_group_id], [account, environment, 'shared'], subject);
      issuers.add(claims.iss);
    }
    assert.equal(issuers.size, 1, 'one issuer and one key set for every account');
  });

  it('any user_group_id, with ":" and "/" in it, parses back from sub by the documented rule', async () => {
    const ids = ['a:b', 'Customer:x', 'acme:Testing:shared', '/', 'x/y:z', ' spaced ', '💡', '::'];
    for (const id of ids) {
      await createGroup(t, { user_group_id: id });
      const claims = await verified(await mint(t.token, { user_group_id: id }));
      assert.deepEqual(SUBJECT.exec(String(claims.sub))?.slice(1), ['acme', 'Customer', id], String(claims.sub));
      assert.equal(claims.ugs_user_group_id, id);
    }
    // A JSON integer id is stored as its decimal text, and named so.
    await createGroup(t, { user_group_id: 4711 });
    assert.equal((await verified(await mint(t.token, { user_group_id: 4711 }))).sub, 'acme:Customer:4711');
  });

  it('introspection answers the same sub for a token with a viewer and one without, and another account learns nothing of it', async () => {
    await createGroup(t, { user_group_id: 'intro-sub' });
    const plain = await mint(t.token, { user_group_id: 'intro-sub' });
    const withViewer = await mint(t.token, { user_group_id: 'intro-sub', viewer: { id: 'ada', attributes: { team: 'north' } } });
    for (const token of [plain, withViewer]) {
      const res = await t.request('POST', '/api/embed/introspect', { token: t.token, body: { token } });
      assert.equal(res.body.active, true, res.text);
      assert.deepEqual([res.body.sub, res.body.ugs_user_group_id], ['acme:Customer:intro-sub', 'intro-sub']);
      assert.equal(res.body.sub, (await verified(token)).sub, 'the sub the token carries');
    }
    const stranger = (await t.issueToken({ account: 'globex', scopes: ['read'] })).token;
    const refused = await t.request('POST', '/api/embed/introspect', { token: stranger, body: { token: plain } });
    assert.deepEqual(refused.body, { success: 1, active: false });
  });

  it('a token issued before subjects named the tenant (sub the bare id, no ugs_user_group_id) keeps working here until it expires', async () => {
    await createGroup(t, { user_group_id: 'older' });
    const older = await resignWithServiceKey(t.handle.db, t.keyring, await mint(t.token, { user_group_id: 'older' }), {
      sub: 'older',
      ugs_user_group_id: undefined,
    });
    const context = await t.request('GET', '/api/embed/context', { headers: { authorization: `Bearer ${older}` } });
    assert.equal(context.status, 200, context.text);
    assert.equal(context.body.user_group.provided_id, 'older');
    const introspected = await t.request('POST', '/api/embed/introspect', { token: t.token, body: { token: older } });
    assert.deepEqual([introspected.body.active, introspected.body.sub, 'ugs_user_group_id' in introspected.body], [true, 'older', false]);
  });
});
