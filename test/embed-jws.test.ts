// Embed tokens anyone can verify (docs/api.md, "Embed tokens"): the published key set and
// the discovery document, the three signing algorithms, key rotation across algorithms and
// instances, the 8 KiB limit, introspection (RFC 7662), and forgeries aimed at an asymmetric
// scheme. Every token here is checked the way a data API would check it: with jose and the
// JWKS the service answers, no secret. (Other verifiers: test/embed-interop.test.ts.)
import { it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import {
  SignJWT,
  calculateJwkThumbprint,
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  exportSPKI,
  generateKeyPair,
  importJWK,
  jwtVerify,
  type CryptoKey,
  type JSONWebKeySet,
  type JWTPayload,
} from 'jose';
import { EMBED_SIGNING_ALGORITHMS, type EmbedSigningAlgorithm } from '../src/config.ts';
import { rotateSigningKey, ensureSigningKey, DEFAULT_ACTIVATION_SECONDS } from '../src/embed/signing-keys.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { countSigningKeys } from '../src/embed/signing-keys.repository.ts';
import { resignWithServiceKey } from './helpers/embed-keys.ts';
import { createTestDatabase } from './helpers/backends.ts';
import {
  buildTestApp,
  createGroup,
  forEachBackend,
  issueTestToken,
  newSecretKey,
  openTestDatabase,
  startTestApp,
  useTestApp,
  type BuiltApp,
} from './helpers/harness.ts';

const START = new Date('2031-03-01T08:00:00.000Z');
const ISSUER = 'https://ugs.example.com';
const CONTEXT = '/api/embed/context';
const INTROSPECT = '/api/embed/introspect';

const ALGORITHMS = [...EMBED_SIGNING_ALGORITHMS];
/** What each algorithm's published key looks like, besides kid, alg and use. */
const KEY_SHAPES: Record<EmbedSigningAlgorithm, { kty: string; members: string[]; crv?: string }> = {
  ES256: { kty: 'EC', crv: 'P-256', members: ['crv', 'x', 'y'] },
  RS256: { kty: 'RSA', members: ['e', 'n'] },
  EdDSA: { kty: 'OKP', crv: 'Ed25519', members: ['crv', 'x'] },
};
const foreignKeyPair = (algorithm: EmbedSigningAlgorithm) =>
  generateKeyPair(algorithm, algorithm === 'EdDSA' ? { crv: 'Ed25519', extractable: true } : { extractable: true });

forEachBackend('embed tokens (default: ES256)', (backend) => {
  let clock = START;
  const t = useTestApp(backend, { now: () => clock, config: { publicUrl: ISSUER, rateLimitMax: 0 } });

  async function jwks(): Promise<JSONWebKeySet> {
    const res = await t.request('GET', '/.well-known/jwks.json');
    assert.equal(res.status, 200, res.text);
    return JSON.parse(res.text) as JSONWebKeySet;
  }

  async function embedToken(body: Record<string, unknown>, request = t.request): Promise<string> {
    const res = await request('POST', '/api/embed_token', { token: t.token, body });
    assert.equal(res.status, 200, res.text);
    return res.body.embed_token;
  }

  /** What an offline verifier concludes: the claims, or the reason it refuses. */
  async function verifyOffline(token: string, audience = 'ugs:embed', at = clock) {
    return jwtVerify(token, createLocalJWKSet(await jwks()), { issuer: ISSUER, audience, algorithms: ALGORITHMS, currentDate: at });
  }

  function introspect(token: string, options: { apiToken?: string; form?: boolean } = {}) {
    const apiToken = options.apiToken ?? t.token;
    if (options.form) {
      return t.request('POST', INTROSPECT, {
        token: apiToken,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        rawBody: new URLSearchParams({ token, token_type_hint: 'access_token' }).toString(),
      });
    }
    return t.request('POST', INTROSPECT, { token: apiToken, body: { token } });
  }

  it('jwks: needs no token, is cacheable for 300 s, open to any origin, and holds only public keys, ES256 on a new deployment', async () => {
    clock = START;
    const res = await t.request('GET', '/.well-known/jwks.json', { headers: { origin: 'https://anywhere.example' } });
    assert.equal(res.status, 200);
    assert.equal(res.headers['cache-control'], 'public, max-age=300');
    assert.equal(res.headers['access-control-allow-origin'], '*');
    assert.match(String(res.headers['content-type']), /^application\/json/);
    const { keys } = JSON.parse(res.text) as JSONWebKeySet;
    assert.ok(keys.length >= 1);
    for (const key of keys) {
      assert.deepEqual(Object.keys(key).sort(), ['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y']);
      assert.deepEqual([key.kty, key.crv, key.alg, key.use], ['EC', 'P-256', 'ES256', 'sig']);
      assert.equal(key.d, undefined, 'never the private part');
    }
    const preflight = await t.request('OPTIONS', '/.well-known/jwks.json', {
      headers: { origin: 'https://anywhere.example', 'access-control-request-method': 'GET' },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers['access-control-allow-origin'], '*');
    const management = await t.request('OPTIONS', '/api/user', { headers: { origin: 'https://anywhere.example', 'access-control-request-method': 'GET' } });
    assert.equal(management.headers['access-control-allow-origin'], undefined, 'the management API still sends no CORS header');
  });

  it('discovery: /.well-known/openid-configuration names the issuer, the JWKS and the algorithms of the published keys, public and cacheable like the keys', async () => {
    clock = START;
    const res = await t.request('GET', '/.well-known/openid-configuration', { headers: { origin: 'https://anywhere.example' } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers['cache-control'], 'public, max-age=300');
    assert.equal(res.headers['access-control-allow-origin'], '*');
    assert.deepEqual(JSON.parse(res.text), { issuer: ISSUER, jwks_uri: `${ISSUER}/.well-known/jwks.json`, id_token_signing_alg_values_supported: ['ES256'] });
    assert.equal(JSON.parse(res.text).jwks_uri, new URL('/.well-known/jwks.json', ISSUER).href, 'where the keys really are');
  });

  it('claims: iss is UGS_PUBLIC_URL, aud the embed_id when bound, and an offline verifier reads the variables the context shows', async () => {
    clock = START;
    await createGroup(t, { user_group_id: 'jws-company', properties: { region: 'emea', plan: 'pro' } });
    await createGroup(t, { user_group_id: 'jws-user', parent_user_group_id: 'jws-company', properties: { seat: 7 } });
    const bound = await embedToken({ user_group_id: 'jws-user', embed_id: 'sales', origin: 'https://app.example.com' });
    const { payload } = await verifyOffline(bound, 'sales');
    assert.equal(payload.iss, ISSUER);
    assert.equal(payload.sub, 'acme:Customer:jws-user');
    assert.equal(payload.ugs_user_group_id, 'jws-user');
    assert.equal(payload.aud, 'sales');
    assert.equal(payload.ugs_origin, 'https://app.example.com');
    const context = await t.request('GET', CONTEXT, {
      headers: { authorization: `Bearer ${bound}`, origin: 'https://app.example.com' },
      query: { embed_id: 'sales' },
    });
    assert.equal(context.status, 200, context.text);
    assert.deepEqual(payload.ugs_variables, context.body.variables, 'the computed properties, as the context answers them');
    assert.deepEqual(payload.ugs_variables, { user_group_id: 'jws-user', user_group_name: 'jws-user', region: 'emea', plan: 'pro', seat: 7 });
    await assert.rejects(verifyOffline(bound, 'ugs:embed'), /aud/, 'a bound token is not good for another audience');

    const reserved = await t.request('POST', '/api/embed_token', { token: t.token, body: { user_group_id: 'jws-user', embed_id: 'ugs:embed' } });
    assert.equal(reserved.status, 400);
    assert.deepEqual(reserved.body.error.details, [{ field: 'embed_id', issue: 'reserved' }]);
  });

  it('size: a group with 64 KiB of properties gets 422 embed_token_too_large naming the limit, and no token', async () => {
    clock = START;
    const big = { blob: 'x'.repeat(64 * 1024 - 20) };
    await createGroup(t, { user_group_id: 'jws-big', properties: big });
    const res = await t.request('POST', '/api/embed_token', { token: t.token, body: { user_group_id: 'jws-big' } });
    assert.equal(res.status, 422, res.text);
    assert.equal(res.body.error.code, 'embed_token_too_large');
    assert.match(res.body.error.message, /over the limit of 8,192 bytes/);
    assert.ok(!res.text.includes('eyJ'), 'no token in the answer');

    // Just under the limit: issued, and usable in a header end to end.
    await createGroup(t, { user_group_id: 'jws-large', properties: { blob: 'y'.repeat(4500) } });
    const large = await embedToken({ user_group_id: 'jws-large' });
    assert.ok(large.length > 6000 && large.length <= 8192, String(large.length));
    assert.equal((await t.request('GET', CONTEXT, { headers: { authorization: `Bearer ${large}` } })).status, 200);
  });

  it('forgery: a foreign key under a published kid, HS256 keyed with the public key, another algorithm under its kid, alg none, or a changed claim is 401 and inactive', async () => {
    clock = START;
    await createGroup(t, { user_group_id: 'jws-forge' });
    const genuine = await embedToken({ user_group_id: 'jws-forge' });
    const { kid, alg } = decodeProtectedHeader(genuine);
    const claims = decodeJwt(genuine);
    const published = (await jwks()).keys.find((key) => key.kid === kid)!;
    const publicPem = await exportSPKI((await importJWK(published, published.alg)) as CryptoKey);
    const foreign = await foreignKeyPair(alg as EmbedSigningAlgorithm);
    const otherAlgorithm = await foreignKeyPair('EdDSA');
    const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const [header, , signature] = genuine.split('.');
    const forgeries = {
      'foreign key, published kid': await new SignJWT(claims).setProtectedHeader({ alg: alg!, typ: 'ugs-embed+jwt', kid }).sign(foreign.privateKey),
      'foreign key, its own kid': await new SignJWT(claims)
        .setProtectedHeader({ alg: alg!, typ: 'ugs-embed+jwt', kid: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' })
        .sign(foreign.privateKey),
      'another algorithm under the published kid': await new SignJWT(claims)
        .setProtectedHeader({ alg: 'EdDSA', typ: 'ugs-embed+jwt', kid })
        .sign(otherAlgorithm.privateKey),
      'HS256 keyed with the public key (PEM)': await new SignJWT(claims)
        .setProtectedHeader({ alg: 'HS256', typ: 'ugs-embed+jwt', kid })
        .sign(Buffer.from(publicPem)),
      'HS256 keyed with the public key (JWK)': await new SignJWT(claims)
        .setProtectedHeader({ alg: 'HS256', typ: 'ugs-embed+jwt', kid })
        .sign(Buffer.from(JSON.stringify(published))),
      'alg none': `${b64({ alg: 'none', typ: 'ugs-embed+jwt', kid })}.${b64(claims)}.`,
      'team id changed': `${header}.${b64({ ...claims, ugs_team_id: Number(claims.ugs_team_id) + 1 })}.${signature}`,
      'variables changed': `${header}.${b64({ ...claims, ugs_variables: { user_group_id: 'someone-else' } })}.${signature}`,
    };
    for (const [what, token] of Object.entries(forgeries)) {
      const res = await t.request('GET', CONTEXT, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.status, 401, `${what}: ${res.text}`);
      assert.equal((await introspect(token)).body.active, false, what);
    }
    assert.equal((await t.request('GET', CONTEXT, { headers: { authorization: `Bearer ${genuine}` } })).status, 200, 'the control');
  });

  it("times: a token signed with the service's own key is refused on the context (401) and in introspection (inactive) when its iat is over 60 s ahead or its exp beyond the longest lifetime issued (30 days)", async () => {
    clock = START;
    await createGroup(t, { user_group_id: 'jws-times' });
    const genuine = await embedToken({ user_group_id: 'jws-times' });
    const now = Math.floor(clock.getTime() / 1000);
    const sign = (times: Pick<JWTPayload, 'iat' | 'nbf' | 'exp'>) =>
      resignWithServiceKey(t.handle.db, t.keyring, genuine, { ...times, jti: crypto.randomUUID() });
    const refused = {
      'iat an hour ahead (nbf now)': await sign({ iat: now + 3600, nbf: now, exp: now + 7200 }),
      'iat 61 s ahead': await sign({ iat: now + 61, nbf: now, exp: now + 3600 }),
      'exp 1e300': await sign({ iat: now, nbf: now, exp: 1e300 }),
      'a lifetime of 30 days and 1 s': await sign({ iat: now, nbf: now, exp: now + 2_592_001 }),
      'iat a year ago, exp tomorrow': await sign({ iat: now - 365 * 86_400, nbf: now - 365 * 86_400, exp: now + 86_400 }),
    };
    for (const [what, token] of Object.entries(refused)) {
      const res = await t.request('GET', CONTEXT, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.status, 401, `${what}: ${res.text}`);
      assert.deepEqual((await introspect(token)).body, { success: 1, active: false }, what);
      assert.equal(
        (await t.request('GET', CONTEXT, { headers: { authorization: `Bearer ${token}` } })).status,
        401,
        `${what}, asked again after introspection`,
      );
    }
    // The limits themselves hold, so the forgeries above are refused for their times alone.
    const accepted = {
      'iat 60 s ahead (clock skew)': await sign({ iat: now + 60, nbf: now, exp: now + 3600 }),
      'the longest lifetime issued': await sign({ iat: now, nbf: now, exp: now + 2_592_000 }),
    };
    for (const [what, token] of Object.entries(accepted)) {
      assert.equal((await introspect(token)).body.active, true, what);
      const res = await t.request('GET', CONTEXT, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.status, 200, `${what}: ${res.text}`);
    }
  });

  it('rotation: the new key is published at once and signs after its activation; older tokens verify until they expire, then the old key is dropped', async () => {
    clock = START;
    await createGroup(t, { user_group_id: 'jws-rotate' });
    const before = await embedToken({ user_group_id: 'jws-rotate', expires_in_seconds: 3600 });
    const oldKid = decodeProtectedHeader(before).kid;

    const rotation = await rotateSigningKey(t.handle, t.keyring, clock, DEFAULT_ACTIVATION_SECONDS * 1000, 'ES256');
    assert.equal(rotation.activates_at, new Date(START.getTime() + 600_000).toISOString());
    clock = new Date(START.getTime() + 1500); // past this instance's one-second copy of the key table
    const kids = (await jwks()).keys.map((key) => key.kid);
    assert.ok(kids.includes(rotation.kid) && kids.includes(oldKid!), 'both published while the new key waits');
    assert.equal(decodeProtectedHeader(await embedToken({ user_group_id: 'jws-rotate' })).kid, oldKid, 'the old key signs until the activation');

    clock = new Date(START.getTime() + 600_000 + 1500);
    const after = await embedToken({ user_group_id: 'jws-rotate', expires_in_seconds: 60 });
    assert.equal(decodeProtectedHeader(after).kid, rotation.kid, 'the new key signs after its activation');
    await verifyOffline(after);
    await verifyOffline(before);
    assert.equal((await t.request('GET', CONTEXT, { headers: { authorization: `Bearer ${before}` } })).status, 200, 'an older token still works');

    // Every token of the old key has expired (the last one signed at START + 1.5 s, for a day).
    clock = new Date(START.getTime() + 86_400_000 + 3_600_000 + 2000);
    const next = await rotateSigningKey(t.handle, t.keyring, clock, 0, 'ES256');
    assert.ok(next.dropped.includes(oldKid!), `the old key is dropped: ${JSON.stringify(next)}`);
    clock = new Date(clock.getTime() + 1500);
    assert.ok(!(await jwks()).keys.some((key) => key.kid === oldKid), 'and no longer published');
  });

  it('instances: a token signed by a key another instance just added verifies here at once', async () => {
    clock = new Date(START.getTime() + 3 * 86_400_000);
    await createGroup(t, { user_group_id: 'jws-instances' });
    await embedToken({ user_group_id: 'jws-instances' }); // this instance has read the key table
    const other = await buildTestApp(t, { keys: [Buffer.from(t.secretKey, 'base64')], now: () => clock, config: { publicUrl: ISSUER } });
    try {
      const rotation = await rotateSigningKey(t.handle, t.keyring, clock, 0, 'RS256');
      const signedThere = await embedToken({ user_group_id: 'jws-instances' }, other.request);
      assert.equal(decodeProtectedHeader(signedThere).kid, rotation.kid);
      clock = new Date(clock.getTime() + 100); // well within this instance's one-second copy of the key table
      const res = await t.request('GET', CONTEXT, { headers: { authorization: `Bearer ${signedThere}` } });
      assert.equal(res.status, 200, res.text);
    } finally {
      await other.app.close();
    }
  });

  it('introspect: an active token answers its claims, form-encoded (RFC 7662) or JSON; a rotated, deleted or expired one only active: false', async () => {
    clock = new Date(START.getTime() + 4 * 86_400_000);
    const group = await createGroup(t, { user_group_id: 'jws-intro', properties: { region: 'apac' } });
    const token = await embedToken({ user_group_id: 'jws-intro', expires_in_seconds: 120 });
    for (const form of [true, false]) {
      const res = await introspect(token, { form });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.equal(res.headers.pragma, 'no-cache');
      assert.deepEqual(res.body, { success: 1, active: true, ...decodeJwt(token) });
    }
    assert.deepEqual((await introspect('not-a-token')).body, { success: 1, active: false });
    assert.deepEqual((await introspect(group.token)).body, { success: 1, active: false }, 'a user group token is not an embed token');

    clock = new Date(clock.getTime() + 121_000);
    assert.deepEqual((await introspect(token)).body, { success: 1, active: false }, 'expired');
    clock = new Date(clock.getTime() - 121_000);
    const rotated = await t.request('POST', '/api/user', { token: t.token, body: { current_token: group.token } });
    assert.equal(rotated.status, 200);
    assert.deepEqual((await introspect(token)).body, { success: 1, active: false }, 'rotated');

    await createGroup(t, { user_group_id: 'jws-intro-del' });
    const doomed = await embedToken({ user_group_id: 'jws-intro-del' });
    assert.equal((await introspect(doomed)).body.active, true);
    assert.equal((await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: 'jws-intro-del' } })).status, 200);
    assert.deepEqual((await introspect(doomed)).body, { success: 1, active: false }, 'deleted');
  });

  it('introspect: needs an API token; another account or a forbidden environment sees active: false; OPTIONS is 405', async () => {
    clock = new Date(START.getTime() + 5 * 86_400_000);
    await createGroup(t, { user_group_id: 'jws-acl' });
    await createGroup(t, { user_group_id: 'jws-acl-test', api_environment_tag: 'Testing' });
    const token = await embedToken({ user_group_id: 'jws-acl' });
    const testing = await embedToken({ user_group_id: 'jws-acl-test', api_environment_tag: 'Testing' });

    const anonymous = await t.request('POST', INTROSPECT, { body: { token } });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.error.code, 'missing_api_token');
    const viaEmbedToken = await t.request('POST', INTROSPECT, { headers: { authorization: `Bearer ${token}` }, body: { token } });
    assert.equal(viaEmbedToken.status, 401);

    const stranger = await t.issueToken({ account: 'globex', scopes: ['read'] });
    assert.deepEqual((await introspect(token, { apiToken: stranger.token })).body, { success: 1, active: false });
    const customerOnly = await t.issueToken({ scopes: ['read'], env: 'Customer' });
    assert.equal((await introspect(token, { apiToken: customerOnly.token })).body.active, true);
    assert.deepEqual((await introspect(testing, { apiToken: customerOnly.token })).body, { success: 1, active: false });

    const missing = await t.request('POST', INTROSPECT, { token: t.token, body: {} });
    assert.equal(missing.status, 400);
    const repeated = await t.request('POST', INTROSPECT, {
      token: t.token,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      rawBody: `token=${token}&token=${token}`,
    });
    assert.equal(repeated.status, 400);
    assert.deepEqual(repeated.body.error.details, [{ field: 'token', issue: 'repeated' }]);
    const preflight = await t.request('OPTIONS', INTROSPECT, { headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST' } });
    assert.equal(preflight.status, 405);
    assert.equal(preflight.headers['access-control-allow-origin'], undefined, 'no CORS: introspection is for backends');
  });
});

forEachBackend('introspection rate limit', (backend) => {
  const t = useTestApp(backend, { config: { rateLimitMax: 2, embedRateLimitMax: 1000 } });

  it("introspect: spends the API token's budget of the management API, then 429 rate_limited", async () => {
    const statuses = [];
    for (let i = 0; i < 3; i++) {
      const res = await t.request('POST', INTROSPECT, { token: t.token, body: { token: 'a.b.c' } });
      statuses.push(res.status);
      if (res.status === 429) {
        assert.equal(res.body.error.code, 'rate_limited');
        assert.match(String(res.headers['ratelimit-policy']), /^"api-token";q=2;/);
      }
    }
    assert.deepEqual(statuses, [200, 200, 429]);
  });
});

forEachBackend('embed signing keys', (backend) => {
  it('first start: instances starting together on an empty database create exactly one signing key', async () => {
    const database = await createTestDatabase(backend);
    const handles = [];
    try {
      for (let i = 0; i < 3; i++) handles.push((await openMigratedDatabase({ databaseUrl: database.url })).handle);
      const { Keyring } = await import('../src/crypto/keyring.ts');
      const keyring = new Keyring([Buffer.alloc(32, 7)]);
      await Promise.all(handles.flatMap((handle) => [ensureSigningKey(handle, keyring, START, 'ES256'), ensureSigningKey(handle, keyring, START, 'RS256')]));
      assert.equal(await countSigningKeys(handles[0].db), 1);
    } finally {
      for (const handle of handles) await handle.close();
      await database.drop();
    }
  });
});

forEachBackend('embed signing algorithms', (backend) => {
  let clock = START;

  it("first key: UGS_EMBED_SIGNING_ALG picks the algorithm of a new deployment's first key; its JWK carries kty, alg, use and its RFC 7638 thumbprint as kid", async () => {
    for (const algorithm of ALGORITHMS) {
      const t = await startTestApp(backend, { now: () => clock, config: { publicUrl: ISSUER, embedSigningAlgorithm: algorithm } });
      try {
        const { token } = await t.issueToken();
        await createGroup({ ...t, token }, { user_group_id: 'first' });
        const res = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: 'first' } });
        assert.equal(res.status, 200, res.text);
        const header = decodeProtectedHeader(res.body.embed_token);
        assert.deepEqual(header, { alg: algorithm, typ: 'ugs-embed+jwt', kid: header.kid }, algorithm);
        const { keys } = JSON.parse((await t.request('GET', '/.well-known/jwks.json?alg=ES256,RS256,EdDSA')).text) as JSONWebKeySet;
        assert.equal(keys.length, 1);
        const listed = (JSON.parse((await t.request('GET', '/.well-known/jwks.json')).text) as JSONWebKeySet).keys;
        assert.deepEqual(listed, algorithm === 'EdDSA' ? [] : keys, `${algorithm}: the default set lists ES256 and RS256 keys only`);
        const [key] = keys;
        const shape = KEY_SHAPES[algorithm];
        assert.deepEqual(Object.keys(key).sort(), ['alg', 'kid', 'kty', 'use', ...shape.members].sort(), algorithm);
        assert.deepEqual([key.kty, key.crv, key.alg, key.use], [shape.kty, shape.crv, algorithm, 'sig'], algorithm);
        assert.equal(key.kid, header.kid);
        assert.equal(key.kid, await calculateJwkThumbprint(key), `${algorithm}: the kid is the thumbprint`);
        if (algorithm === 'RS256') assert.ok(Buffer.from(key.n!, 'base64url').length * 8 >= 2048, 'RSA keys have at least 2048 bits');
        if (algorithm === 'ES256')
          assert.equal(Buffer.from(res.body.embed_token.split('.')[2], 'base64url').length, 64, 'an ES256 signature is r || s, 64 bytes (RFC 7518), not DER');
        await jwtVerify(res.body.embed_token, createLocalJWKSet({ keys }), {
          issuer: ISSUER,
          audience: 'ugs:embed',
          algorithms: [algorithm],
          currentDate: clock,
        });
        const discovery = JSON.parse((await t.request('GET', '/.well-known/openid-configuration')).text);
        assert.deepEqual(discovery.id_token_signing_alg_values_supported, [algorithm]);
        assert.equal((await t.request('GET', CONTEXT, { bearer: res.body.embed_token })).status, 200);
      } finally {
        await t.close();
      }
    }
  });

  it('an existing deployment keeps signing with its EdDSA key after an upgrade to ES256 as the default, until it rotates', async () => {
    clock = START;
    const database = await openTestDatabase(backend);
    const secretKey = newSecretKey();
    try {
      const before = await buildTestApp(database, { keys: [secretKey], now: () => clock, config: { publicUrl: ISSUER, embedSigningAlgorithm: 'EdDSA' } });
      const { token } = await issueTestToken(database.handle);
      await createGroup({ request: before.request, token }, { user_group_id: 'upgraded' });
      const mint = async (app: BuiltApp) => {
        const res = await app.request('POST', '/api/embed_token', { token, body: { user_group_id: 'upgraded' } });
        assert.equal(res.status, 200, res.text);
        return res.body.embed_token as string;
      };
      const issuedBefore = await mint(before);
      await before.app.close();

      // The same database and secret key, restarted with today's defaults (UGS_EMBED_SIGNING_ALG unset: ES256).
      const after = await buildTestApp(database, { keys: [secretKey], now: () => clock, config: { publicUrl: ISSUER } });
      try {
        assert.equal(decodeProtectedHeader(await mint(after)).alg, 'EdDSA', 'the existing key signs on');
        assert.equal((await after.request('GET', CONTEXT, { bearer: issuedBefore })).status, 200);
        await rotateSigningKey(database.handle, after.keyring, clock, 0, 'ES256');
        clock = new Date(clock.getTime() + 1500);
        assert.equal(decodeProtectedHeader(await mint(after)).alg, 'ES256', 'until a rotation');
        assert.equal((await after.request('GET', CONTEXT, { bearer: issuedBefore })).status, 200, 'its EdDSA tokens keep working until they expire');
      } finally {
        await after.app.close();
      }
    } finally {
      await database.close();
    }
  });

  it('rotation across algorithms: EdDSA to ES256 to RS256 to EdDSA publishes keys of several types at once, and every token verifies (and works) until it expires', async () => {
    clock = START;
    const t = await startTestApp(backend, { now: () => clock, config: { publicUrl: ISSUER, embedSigningAlgorithm: 'EdDSA' } });
    try {
      const { token } = await t.issueToken();
      await createGroup({ ...t, token }, { user_group_id: 'rotating' });
      const mint = async () => {
        const res = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: 'rotating', expires_in_seconds: 3600 } });
        assert.equal(res.status, 200, res.text);
        return res.body.embed_token as string;
      };
      const issued = [await mint()]; // an existing deployment's EdDSA token
      for (const algorithm of ['ES256', 'RS256', 'EdDSA'] as const) {
        await rotateSigningKey(t.handle, t.keyring, clock, 0, algorithm);
        clock = new Date(clock.getTime() + 1500); // past this instance's one-second copy of the key table
        issued.push(await mint());
        assert.equal(decodeProtectedHeader(issued.at(-1)!).alg, algorithm);
      }
      const keySet = JSON.parse((await t.request('GET', '/.well-known/jwks.json?alg=ES256,RS256,EdDSA')).text) as JSONWebKeySet;
      assert.deepEqual(keySet.keys.map((key) => key.kty).sort(), ['EC', 'OKP', 'OKP', 'RSA'], 'every key that signed a live token');
      const kinds = async (query: string) =>
        (JSON.parse((await t.request('GET', `/.well-known/jwks.json${query}`)).text) as JSONWebKeySet).keys.map((key) => key.kty).sort();
      assert.deepEqual(
        { default: await kinds(''), EdDSA: await kinds('?alg=EdDSA'), ES256: await kinds('?alg=ES256'), 'RS256,ES256': await kinds('?alg=RS256,ES256') },
        { default: ['EC', 'RSA'], EdDSA: ['OKP', 'OKP'], ES256: ['EC'], 'RS256,ES256': ['EC', 'RSA'] },
        'the default set never lists an OKP key, which some verifiers cannot read; ?alg= lists the algorithms asked for',
      );
      for (const bad of ['HS256', 'none', 'ES256,', 'es256', 'ES256,,RS256']) {
        const res = await t.request('GET', `/.well-known/jwks.json?alg=${encodeURIComponent(bad)}`);
        assert.equal(res.status, 400, `alg=${bad}: ${res.text}`);
        assert.equal(res.body.error.code, 'validation_failed');
      }
      const discovery = JSON.parse((await t.request('GET', '/.well-known/openid-configuration')).text);
      assert.deepEqual(
        discovery.id_token_signing_alg_values_supported,
        ['EdDSA', 'RS256', 'ES256'],
        "the signing key's algorithm first, then the newest keys' first",
      );
      for (const embedToken of issued) {
        const { alg } = decodeProtectedHeader(embedToken);
        await jwtVerify(embedToken, createLocalJWKSet(keySet), { issuer: ISSUER, audience: 'ugs:embed', algorithms: ALGORITHMS, currentDate: clock });
        assert.equal((await t.request('GET', CONTEXT, { bearer: embedToken })).status, 200, `${alg} token on the context`);
        const introspection = await t.request('POST', INTROSPECT, { token, body: { token: embedToken } });
        assert.equal(introspection.body.active, true, `${alg} token in introspection`);
      }
    } finally {
      await t.close();
    }
  });
});
