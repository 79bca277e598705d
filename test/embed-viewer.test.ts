// The viewer of an embed token (docs/api.md, "The viewer"): the person within the group that
// POST /api/embed_token names. What the token carries (verified with the JWKS, as a data API
// would), what /api/embed/context and introspection answer, the variables it changes, the
// limits and refusals, and that tokens without a viewer are exactly what they were.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { createLocalJWKSet, decodeJwt, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import { createGroup, forEachBackend, useTestApp } from './helpers/harness.ts';
import { resignWithServiceKey } from './helpers/embed-keys.ts';

const CONTEXT = '/api/embed/context';
const INTROSPECT = '/api/embed/introspect';
const START = new Date('2030-06-01T12:00:00.000Z');

const ADA = {
  id: 'user_8812',
  email: 'ada@example.com',
  name: 'Ada Lovelace',
  time_zone: 'Europe/London',
  permissions: ['view_orders', 'export_csv'],
  attributes: { region: 'amer', max_discount: 0.15, can_export: true },
};

forEachBackend('embed tokens with a viewer', (backend) => {
  const t = useTestApp(backend, { now: () => START });

  const issue = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    t.request('POST', '/api/embed_token', { token: t.token, body, headers });

  async function embedToken(body: Record<string, unknown>): Promise<string> {
    const res = await issue(body);
    assert.equal(res.status, 200, res.text);
    return res.body.embed_token;
  }

  const context = (token: string) => t.request('GET', CONTEXT, { headers: { authorization: `Bearer ${token}` } });
  const introspect = (token: string) => t.request('POST', INTROSPECT, { token: t.token, body: { token } });

  async function verifiedClaims(token: string): Promise<JWTPayload> {
    const keySet = JSON.parse((await t.request('GET', '/.well-known/jwks.json')).text) as JSONWebKeySet;
    const { payload } = await jwtVerify(token, createLocalJWKSet(keySet), {
      issuer: 'http://127.0.0.1:3000',
      audience: 'ugs:embed',
      currentDate: START,
    });
    return payload;
  }

  it('issue: the token carries the viewer as ugs_viewer, its fields as given; sub still names the group', async () => {
    await createGroup(t, { user_group_id: 'vw-claim', name: 'Viewer Claim', properties: { region: 'emea', plan: 'pro' } });
    // Fields in another order than the claim's: the claim has one order.
    const { attributes, ...rest } = ADA;
    const claims = await verifiedClaims(await embedToken({ user_group_id: 'vw-claim', viewer: { attributes, ...rest } }));
    assert.equal(claims.sub, 'acme:Customer:vw-claim');
    assert.equal(claims.ugs_user_group_id, 'vw-claim');
    assert.equal(JSON.stringify(claims.ugs_viewer), JSON.stringify(ADA));
    assert.deepEqual(claims.ugs_variables, {
      user_group_id: 'vw-claim',
      user_group_name: 'Viewer Claim',
      viewer_id: 'user_8812',
      viewer_attributes: { region: 'amer', max_discount: 0.15, can_export: true },
      region: 'emea',
      plan: 'pro',
    });

    const onlyId = await verifiedClaims(await embedToken({ user_group_id: 'vw-claim', viewer: { id: 'u-2' } }));
    assert.deepEqual(onlyId.ugs_viewer, { id: 'u-2' }, 'absent fields stay absent');
    assert.deepEqual(onlyId.ugs_variables, { user_group_id: 'vw-claim', user_group_name: 'Viewer Claim', viewer_id: 'u-2', region: 'emea', plan: 'pro' });
  });

  it("context: answers the viewer, and variables with viewer_id and viewer_attributes beside the group's properties, which stay the group's", async () => {
    await createGroup(t, { user_group_id: 'vw-ctx', name: 'Viewer Context', properties: { region: 'emea', seats: 3 } });
    const res = await context(await embedToken({ user_group_id: 'vw-ctx', viewer: ADA }));
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(Object.keys(res.body), ['success', 'user_group', 'viewer', 'variables']);
    assert.deepEqual(res.body.viewer, ADA);
    assert.equal(res.body.user_group.provided_id, 'vw-ctx');
    assert.deepEqual(res.body.user_group.properties, { region: 'emea', seats: 3 }, "the group's own fields are unchanged");
    assert.deepEqual(res.body.variables, {
      user_group_id: 'vw-ctx',
      user_group_name: 'Viewer Context',
      viewer_id: 'user_8812',
      viewer_attributes: { region: 'amer', max_discount: 0.15, can_export: true },
      region: 'emea',
      seats: 3,
    });
  });

  it('context: two viewers of one group get different variables from the same group', async () => {
    await createGroup(t, { user_group_id: 'vw-two', properties: { region: 'world' } });
    const emea = await context(await embedToken({ user_group_id: 'vw-two', viewer: { id: 'a', attributes: { region: 'emea' } } }));
    const amer = await context(await embedToken({ user_group_id: 'vw-two', viewer: { id: 'b', attributes: { region: 'amer' } } }));
    assert.deepEqual([emea.body.variables.viewer_id, emea.body.variables.viewer_attributes, emea.body.variables.region], ['a', { region: 'emea' }, 'world']);
    assert.deepEqual([amer.body.variables.viewer_id, amer.body.variables.viewer_attributes, amer.body.variables.region], ['b', { region: 'amer' }, 'world']);
  });

  it('context: the built-ins user_group_id, user_group_name, viewer_id and viewer_attributes win over properties of those names', async () => {
    await createGroup(t, {
      user_group_id: 'vw-builtins',
      name: 'Real Name',
      properties: { viewer_id: 'from the group', user_group_name: 'spoof', viewer_attributes: { tier: 9 }, tier: 1 },
    });
    const token = await embedToken({ user_group_id: 'vw-builtins', viewer: { id: 'real-viewer', attributes: { tier: 2 } } });
    const expected = { user_group_id: 'vw-builtins', user_group_name: 'Real Name', viewer_id: 'real-viewer', viewer_attributes: { tier: 2 }, tier: 1 };
    assert.deepEqual((await context(token)).body.variables, expected);
    assert.deepEqual((await verifiedClaims(token)).ugs_variables, expected);
    // A viewer without attributes has no viewer_attributes, and the property of that name is still left out.
    const plain = await embedToken({ user_group_id: 'vw-builtins', viewer: { id: 'real-viewer' } });
    assert.deepEqual((await context(plain)).body.variables, { user_group_id: 'vw-builtins', user_group_name: 'Real Name', viewer_id: 'real-viewer', tier: 1 });
  });

  it("context: a viewer's attributes never replace what the group inherits from its ancestors", async () => {
    await createGroup(t, { user_group_id: 'vw-parent', properties: { region: 'emea', currency: 'EUR' } });
    await createGroup(t, { user_group_id: 'vw-child', parent_user_group_id: 'vw-parent', properties: { plan: 'team' } });
    const res = await context(await embedToken({ user_group_id: 'vw-child', viewer: { id: 'c', attributes: { region: 'apac' } } }));
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.variables, {
      user_group_id: 'vw-child',
      user_group_name: 'vw-child',
      viewer_id: 'c',
      viewer_attributes: { region: 'apac' },
      region: 'emea',
      currency: 'EUR',
      plan: 'team',
    });
  });

  it("context: a later change to the group's properties shows at once; the viewer's attributes stay beside them", async () => {
    await createGroup(t, { user_group_id: 'vw-live', properties: { region: 'emea' } });
    const token = await embedToken({ user_group_id: 'vw-live', viewer: { id: 'd', attributes: { region: 'amer' } } });
    const put = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: 'vw-live', properties: { region: 'apac', plan: 'new' } } });
    assert.equal(put.status, 200, put.text);
    assert.deepEqual((await context(token)).body.variables, {
      user_group_id: 'vw-live',
      user_group_name: 'vw-live',
      viewer_id: 'd',
      viewer_attributes: { region: 'amer' },
      region: 'apac',
      plan: 'new',
    });
  });

  it('without a viewer: the context has no viewer key and is byte for byte what the user group token answers', async () => {
    const group = await createGroup(t, { user_group_id: 'vw-none', properties: { region: 'emea', viewer_id: 'a property' } });
    const viaGroupToken = await context(group.token);
    const viaEmbedToken = await context(await embedToken({ user_group_id: 'vw-none' }));
    assert.equal(viaEmbedToken.text, viaGroupToken.text);
    assert.equal('viewer' in viaGroupToken.body, false);
    assert.equal(viaGroupToken.body.variables.viewer_id, 'a property', 'without a viewer, viewer_id is no built-in');
    assert.equal('ugs_viewer' in decodeJwt(await embedToken({ user_group_id: 'vw-none' })), false);
    const introspected = await introspect(await embedToken({ user_group_id: 'vw-none' }));
    assert.equal('ugs_viewer' in introspected.body, false);
  });

  it('introspection: an active token with a viewer answers ugs_viewer and the variables it carries', async () => {
    await createGroup(t, { user_group_id: 'vw-intro', properties: { region: 'emea' } });
    const token = await embedToken({ user_group_id: 'vw-intro', viewer: ADA });
    const res = await introspect(token);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.active, true);
    assert.equal(res.body.sub, 'acme:Customer:vw-intro');
    assert.equal(res.body.ugs_user_group_id, 'vw-intro');
    assert.deepEqual(res.body.ugs_viewer, ADA);
    assert.deepEqual(res.body.ugs_variables, (await context(token)).body.variables, 'the variables at issue time, as the context answers them');
  });

  it("rotation and deletion: a token with a viewer stops working at the group's next rotation, and when the group is deleted", async () => {
    const rotated = await createGroup(t, { user_group_id: 'vw-rotate' });
    const beforeRotation = await embedToken({ user_group_id: 'vw-rotate', viewer: ADA });
    assert.equal((await context(beforeRotation)).status, 200);
    const rotation = await t.request('POST', '/api/user', { token: t.token, body: { current_token: rotated.token, grace_period_seconds: 3600 } });
    assert.equal(rotation.status, 200, rotation.text);
    assert.equal((await context(beforeRotation)).status, 401);
    assert.equal((await introspect(beforeRotation)).body.active, false);
    assert.equal((await context(await embedToken({ user_group_id: 'vw-rotate', viewer: ADA }))).status, 200, 'a new token works');

    await createGroup(t, { user_group_id: 'vw-delete' });
    const beforeDeletion = await embedToken({ user_group_id: 'vw-delete', viewer: ADA });
    const deleted = await t.request('DELETE', '/api/user', { token: t.token, query: { user_group_id: 'vw-delete' } });
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await context(beforeDeletion)).status, 401);
    assert.equal((await introspect(beforeDeletion)).body.active, false);
    await createGroup(t, { user_group_id: 'vw-delete' });
    assert.equal((await context(beforeDeletion)).status, 401, 'the same id created again does not revive it');
  });

  it("verification: a token signed by the service's own key whose ugs_viewer is not an object with a string id is 401 and inactive", async () => {
    await createGroup(t, { user_group_id: 'vw-shape' });
    const genuine = await embedToken({ user_group_id: 'vw-shape', viewer: { id: 'ok' } });
    assert.equal((await context(genuine)).status, 200, 'the control');
    for (const ugs_viewer of ['ada', null, [], { name: 'no id' }, { id: 7 }, { id: 'a', attributes: ['x'] }, { id: 'a', attributes: null }]) {
      const token = await resignWithServiceKey(t.handle.db, t.keyring, genuine, { ugs_viewer });
      const res = await context(token);
      assert.equal(res.status, 401, `${JSON.stringify(ugs_viewer)}: ${res.text}`);
      assert.equal(res.body.error.code, 'invalid_token');
      assert.equal((await introspect(token)).body.active, false, JSON.stringify(ugs_viewer));
    }
  });

  it('size: a viewer whose attributes push the token over 8,192 bytes gets 422 embed_token_too_large, and the group alone still fits', async () => {
    await createGroup(t, { user_group_id: 'vw-big', properties: { blob: 'y'.repeat(2000) } });
    const alone = await embedToken({ user_group_id: 'vw-big' });
    assert.ok(alone.length < 8192, String(alone.length));
    const attributes = Object.fromEntries(['a', 'b', 'c', 'd'].map((key) => [key, 'z'.repeat(1000)]));
    const res = await issue({ user_group_id: 'vw-big', viewer: { id: 'heavy', attributes } });
    assert.equal(res.status, 422, res.text);
    assert.equal(res.body.error.code, 'embed_token_too_large');
    assert.match(res.body.error.message, /over the limit of 8,192 bytes/);
    assert.match(res.body.error.message, /viewer/);
    assert.ok(!res.text.includes('eyJ'), 'no token in the answer');
  });

  it('validation: a missing id, nested or null attributes, an unknown key, an invalid time zone or email, and too many attributes are 400 validation_failed naming the field', async () => {
    await createGroup(t, { user_group_id: 'vw-bad' });
    const tooMany = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i]));
    const cases: [string, unknown, { field: string; issue: string }[]][] = [
      ['a missing id', { email: 'a@example.com' }, [{ field: 'viewer.id', issue: 'required' }]],
      ['an empty id', { id: '' }, [{ field: 'viewer.id', issue: 'too_short' }]],
      ['a blank id', { id: '   ' }, [{ field: 'viewer.id', issue: 'invalid_characters' }]],
      ['an id of 256 characters', { id: 'x'.repeat(256) }, [{ field: 'viewer.id', issue: 'too_long' }]],
      ['an id with a control character', { id: 'a\nb' }, [{ field: 'viewer.id', issue: 'invalid_characters' }]],
      ['an integer id', { id: 42 }, [{ field: 'viewer.id', issue: 'wrong_type' }]],
      ['nested attributes', { id: 'a', attributes: { team: { name: 'x' } } }, [{ field: 'viewer.attributes.team', issue: 'wrong_type' }]],
      ['an array attribute', { id: 'a', attributes: { teams: ['x'] } }, [{ field: 'viewer.attributes.teams', issue: 'wrong_type' }]],
      ['a null attribute', { id: 'a', attributes: { region: null } }, [{ field: 'viewer.attributes.region', issue: 'wrong_type' }]],
      ['an unknown key', { id: 'a', role: 'admin' }, [{ field: 'viewer.role', issue: 'unknown_field' }]],
      ['an invalid time zone', { id: 'a', time_zone: 'Mars/Olympus_Mons' }, [{ field: 'viewer.time_zone', issue: 'invalid_format' }]],
      ['a time zone offset', { id: 'a', time_zone: '+01:00' }, [{ field: 'viewer.time_zone', issue: 'invalid_format' }]],
      ['a miscased time zone', { id: 'a', time_zone: 'europe/paris' }, [{ field: 'viewer.time_zone', issue: 'invalid_format' }]],
      ['a bad email', { id: 'a', email: 'ada at example.com' }, [{ field: 'viewer.email', issue: 'invalid_format' }]],
      ['an email without a domain', { id: 'a', email: 'ada@' }, [{ field: 'viewer.email', issue: 'invalid_format' }]],
      ['too many attributes', { id: 'a', attributes: tooMany }, [{ field: 'viewer.attributes', issue: 'too_many_entries' }]],
      [
        'an attribute key of 65 characters',
        { id: 'a', attributes: { ['k'.repeat(65)]: 1 } },
        [{ field: `viewer.attributes.${'k'.repeat(65)}`, issue: 'invalid_key' }],
      ],
      ['an attribute value of 1,025 characters', { id: 'a', attributes: { note: 'n'.repeat(1025) } }, [{ field: 'viewer.attributes.note', issue: 'too_long' }]],
      ['a permission that is not a string', { id: 'a', permissions: ['view', 7] }, [{ field: 'viewer.permissions.1', issue: 'wrong_type' }]],
      ['51 permissions', { id: 'a', permissions: Array.from({ length: 51 }, (_, i) => `p${i}`) }, [{ field: 'viewer.permissions', issue: 'too_many_entries' }]],
      ['a viewer that is a string', 'user_8812', [{ field: 'viewer', issue: 'wrong_type' }]],
      ['a null viewer', null, [{ field: 'viewer', issue: 'wrong_type' }]],
    ];
    for (const [what, viewer, details] of cases) {
      const res = await issue({ user_group_id: 'vw-bad', viewer });
      assert.equal(res.status, 400, `${what}: ${res.text}`);
      assert.equal(res.body.error.code, 'validation_failed', what);
      assert.deepEqual(res.body.error.details, details, what);
      assert.ok(res.body.error.message.startsWith(details[0].field), `${what}: ${res.body.error.message}`);
    }
    const tooManyAnswer = await issue({ user_group_id: 'vw-bad', viewer: { id: 'a', attributes: tooMany } });
    assert.match(tooManyAnswer.body.error.message, /at most 50 entries/);
    const zoneAnswer = await issue({ user_group_id: 'vw-bad', viewer: { id: 'a', time_zone: 'Mars/Olympus_Mons' } });
    assert.match(zoneAnswer.body.error.message, /IANA time zone/);
  });

  it('validation: time zones Intl knows are accepted, aliases such as UTC and US/Pacific included; 50 attributes and an id of 255 characters fit', async () => {
    await createGroup(t, { user_group_id: 'vw-good' });
    for (const time_zone of ['UTC', 'Europe/Paris', 'America/Argentina/Buenos_Aires', 'US/Pacific', 'Etc/GMT+5', 'Asia/Kolkata', 'Asia/Calcutta']) {
      const res = await issue({ user_group_id: 'vw-good', viewer: { id: 'a', time_zone } });
      assert.equal(res.status, 200, `${time_zone}: ${res.text}`);
      assert.equal((decodeJwt(res.body.embed_token).ugs_viewer as { time_zone: string }).time_zone, time_zone, 'kept as given');
    }
    const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, i % 2 === 0 ? i : `v${i}`]));
    const res = await issue({
      user_group_id: 'vw-good',
      viewer: { id: 'i'.repeat(255), email: 'first.last+tag@sub.example.co.uk', attributes: fifty, permissions: [] },
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual((decodeJwt(res.body.embed_token).ugs_viewer as { attributes: unknown }).attributes, fifty);
  });

  it('idempotency: a retry with the same key and viewer replays the same token; the same key with another viewer is 422 idempotency_key_reused', async () => {
    await createGroup(t, { user_group_id: 'vw-idem' });
    const body = { user_group_id: 'vw-idem', viewer: { id: 'ada', attributes: { region: 'emea' } } };
    const first = await issue(body, { 'idempotency-key': 'viewer-key-1' });
    assert.equal(first.status, 200, first.text);
    // Key order does not matter (canonical JSON); the viewer does.
    const retry = await issue({ viewer: { attributes: { region: 'emea' }, id: 'ada' }, user_group_id: 'vw-idem' }, { 'idempotency-key': 'viewer-key-1' });
    assert.equal(retry.status, 200, retry.text);
    assert.equal(retry.body.embed_token, first.body.embed_token);
    const otherViewer = await issue({ ...body, viewer: { id: 'ada', attributes: { region: 'amer' } } }, { 'idempotency-key': 'viewer-key-1' });
    assert.equal(otherViewer.status, 422, otherViewer.text);
    assert.equal(otherViewer.body.error.code, 'idempotency_key_reused');
  });
});
