// A viewer's attributes cannot rewrite what a write token set (docs/api.md, "The viewer"):
// they live in a namespace of their own (`ugs_viewer.attributes`, the variable
// `viewer_attributes`), so no embed token, whatever the scope of the API token that minted it,
// signs a variable named like one of the group's properties with a value the group does not
// have. Names the service uses are refused as attribute keys. Each by scope: a read-only API
// token (what a backend that only mints embed tokens holds) and a read,write one.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import { createGroup, forEachBackend, useTestApp } from './helpers/harness.ts';

const BUILT_INS = ['user_group_id', 'user_group_name', 'viewer_id', 'viewer_attributes'];
const SCOPES = { 'a read-only token': ['read'], 'a read,write token': ['read', 'write'] } as const;
/** Names the service uses, in the claims or the variables: each refused, in any case. */
const RESERVED = [
  'iss',
  'sub',
  'aud',
  'exp',
  'nbf',
  'iat',
  'jti',
  'ugs_account',
  'ugs_variables',
  'UGS_Region',
  'Sub',
  'user_group_id',
  'User_Group_Name',
  'viewer_id',
  'viewer_attributes',
];

forEachBackend('viewer attributes by scope', (backend) => {
  const t = useTestApp(backend);

  async function verified(token: string): Promise<JWTPayload> {
    const keySet = JSON.parse((await t.request('GET', '/.well-known/jwks.json')).text) as JSONWebKeySet;
    const { payload } = await jwtVerify(token, createLocalJWKSet(keySet), { issuer: 'http://127.0.0.1:3000', audience: 'ugs:embed' });
    return payload;
  }

  /** Every variable that is not a built-in has the group's own value: none is made up by the viewer. */
  function assertPropertiesAsTheGroupHasThem(variables: Record<string, unknown>, properties: Record<string, unknown>, what: string): void {
    const others = Object.fromEntries(Object.entries(variables).filter(([key]) => !BUILT_INS.includes(key)));
    assert.deepEqual(others, properties, what);
  }

  for (const [scopeName, scopes] of Object.entries(SCOPES)) {
    it(`${scopeName}: a viewer's attributes named like the group's properties, or like none of them, never become a property's variable; they are viewer_attributes`, async () => {
      const { token } = await t.issueToken({ scopes: [...scopes] });
      const id = `attr-${scopes.join('-')}`;
      const properties = { region: 'emea', customer_id: 'c-1' };
      await createGroup(t, { user_group_id: id, properties });
      const attributes = { region: 'amer', customer_id: 'c-999', team: 'north' };
      const minted = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: id, viewer: { id: 'mallory', attributes } } });
      assert.equal(minted.status, 200, minted.text);

      const claims = await verified(minted.body.embed_token);
      const variables = claims.ugs_variables as Record<string, unknown>;
      assertPropertiesAsTheGroupHasThem(variables, properties, 'the signed variables');
      assert.deepEqual(variables.viewer_attributes, attributes);
      assert.deepEqual((claims.ugs_viewer as { attributes: unknown }).attributes, attributes, 'the claim carries them as given');

      const context = await t.request('GET', '/api/embed/context', { headers: { authorization: `Bearer ${minted.body.embed_token}` } });
      assert.equal(context.status, 200, context.text);
      assertPropertiesAsTheGroupHasThem(context.body.variables, properties, "the context's variables");
      assert.deepEqual(context.body.variables.viewer_attributes, attributes);
      const introspected = await t.request('POST', '/api/embed/introspect', { token, body: { token: minted.body.embed_token } });
      assertPropertiesAsTheGroupHasThem(introspected.body.ugs_variables as Record<string, unknown>, properties, "introspection's variables");
    });

    it(`${scopeName}: an attribute named like a claim or a variable of the service (iss, sub, ugs_*, the built-ins; in any case) is 400 validation_failed naming it, and no token`, async () => {
      const { token } = await t.issueToken({ scopes: [...scopes] });
      await createGroup(t, { user_group_id: `reserved-${scopes.join('-')}` });
      for (const key of RESERVED) {
        const res = await t.request('POST', '/api/embed_token', {
          token,
          body: { user_group_id: `reserved-${scopes.join('-')}`, viewer: { id: 'mallory', attributes: { region: 'emea', [key]: 'x' } } },
        });
        assert.equal(res.status, 400, `${key}: ${res.text}`);
        assert.equal(res.body.error.code, 'validation_failed');
        assert.deepEqual(res.body.error.details, [{ field: `viewer.attributes.${key}`, issue: 'reserved' }], key);
        assert.ok(res.body.error.message.startsWith(`viewer.attributes.${key} is a name the service uses`), res.body.error.message);
        assert.equal(res.body.embed_token, undefined);
      }
      // Several at once: each is named. Validation comes before existence: an unknown group is not what is reported.
      const several = await t.request('POST', '/api/embed_token', {
        token,
        body: { user_group_id: 'no-such-group', viewer: { id: 'm', attributes: { sub: 1, ugs_team_id: 2, fine: 3 } } },
      });
      assert.equal(several.status, 400, several.text);
      assert.deepEqual(several.body.error.details, [
        { field: 'viewer.attributes.sub', issue: 'reserved' },
        { field: 'viewer.attributes.ugs_team_id', issue: 'reserved' },
      ]);
    });
  }

  it('names that only contain a reserved one are ordinary attributes', async () => {
    await createGroup(t, { user_group_id: 'attr-lookalikes' });
    const attributes = { subscription: 'pro', issuer_bank: 'x', my_ugs_note: 'y', user_group_ids: 'z', viewer: 'v', audit: true };
    const res = await t.request('POST', '/api/embed_token', { token: t.token, body: { user_group_id: 'attr-lookalikes', viewer: { id: 'a', attributes } } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(((await verified(res.body.embed_token)).ugs_variables as Record<string, unknown>).viewer_attributes, attributes);
  });
});
