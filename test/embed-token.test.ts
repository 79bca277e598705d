// POST /api/embed_token and the short-lived embed tokens it issues: what they carry, where
// /api/embed/context accepts them, and every way they stop working.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { SignJWT, createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import { buildApp } from '../src/app.ts';
import { Keyring } from '../src/crypto/keyring.ts';
import { forEachBackend, testConfig, useTestApp, createGroup as createGroupOf } from './helpers/harness.ts';

const CONTEXT = '/api/embed/context';
const START = new Date('2030-06-01T12:00:00.000Z');

forEachBackend('embed tokens', (backend) => {
  let clock = START;
  const t = useTestApp(backend, { now: () => clock });

  const createGroup = (fields: Record<string, unknown>) => createGroupOf(t, fields);

  async function issue(body: Record<string, unknown>, token = t.token) {
    return t.request('POST', '/api/embed_token', { token, body });
  }

  async function embedToken(body: Record<string, unknown>): Promise<string> {
    const res = await issue(body);
    assert.equal(res.status, 200, res.text);
    return res.body.embed_token;
  }

  function context(token: string, options: { origin?: string; embedId?: string } = {}) {
    return t.request('GET', CONTEXT, {
      headers: { authorization: `Bearer ${token}`, ...(options.origin === undefined ? {} : { origin: options.origin }) },
      query: options.embedId === undefined ? undefined : { embed_id: options.embedId },
    });
  }

  it('issue: answers a compact JWS signed with ES256 (the default), its kid in the JWKS, expiring after 86400 s by default, sent with Cache-Control: no-store', async () => {
    clock = START;
    const group = await createGroup({ user_group_id: 'tok-1', name: 'Token One', properties: { region: 'emea', seats: 3 } });
    const res = await issue({ user_group_id: 'tok-1' });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(Object.keys(res.body).sort(), ['embed_token', 'expires_at', 'success']);
    assert.equal(res.body.success, 1);
    assert.match(res.body.embed_token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    assert.equal(res.body.expires_at, new Date(START.getTime() + 86_400_000).toISOString());
    assert.equal(res.headers['cache-control'], 'no-store');

    const header = decodeProtectedHeader(res.body.embed_token);
    assert.deepEqual(header, { alg: 'ES256', typ: 'ugs-embed+jwt', kid: header.kid });
    const jwks = await t.request('GET', '/.well-known/jwks.json');
    assert.equal(jwks.status, 200);
    const keySet = JSON.parse(jwks.text) as JSONWebKeySet;
    assert.ok(
      keySet.keys.some((key) => key.kid === header.kid),
      'the signing key is published',
    );
    // Verified the way a data API would: the published keys, no secret.
    const { payload } = await jwtVerify(res.body.embed_token, createLocalJWKSet(keySet), {
      issuer: 'http://127.0.0.1:3000',
      audience: 'ugs:embed',
      algorithms: ['ES256'],
      currentDate: START,
    });
    const iat = START.getTime() / 1000;
    assert.deepEqual(payload, {
      iss: 'http://127.0.0.1:3000',
      sub: 'acme:Customer:tok-1',
      aud: 'ugs:embed',
      iat,
      nbf: iat,
      exp: iat + 86_400,
      jti: payload.jti,
      ugs_account: 'acme',
      ugs_environment: 'Customer',
      ugs_user_group_id: 'tok-1',
      ugs_team_id: group.team_id,
      ugs_generation: 1,
      ugs_variables: { user_group_id: 'tok-1', user_group_name: 'Token One', region: 'emea', seats: 3 },
    });
    assert.match(String(payload.jti), /^[A-Za-z0-9_-]{22}$/);
    assert.notEqual(decodeJwt(await embedToken({ user_group_id: 'tok-1' })).jti, payload.jti, 'each token has its own jti');
  });

  it('issue: the claims hold no secret (no token, no key material)', async () => {
    const group = await createGroup({ user_group_id: 'tok-nosecret', properties: { region: 'emea' } });
    const token = await embedToken({ user_group_id: 'tok-nosecret', embed_id: 'dash', origin: 'https://app.example.com' });
    const decoded = JSON.stringify({ header: decodeProtectedHeader(token), claims: decodeJwt(token) });
    assert.ok(!decoded.includes(group.token) && !decoded.includes('ugs_grp_') && !decoded.includes('ugs_api_'));
    assert.ok(!decoded.includes(t.secretKey));
    assert.deepEqual(Object.keys(decodeJwt(token)).sort(), [
      'aud',
      'exp',
      'iat',
      'iss',
      'jti',
      'nbf',
      'sub',
      'ugs_account',
      'ugs_environment',
      'ugs_generation',
      'ugs_origin',
      'ugs_team_id',
      'ugs_user_group_id',
      'ugs_variables',
    ]);
    assert.equal(decodeJwt(token).aud, 'dash', 'a bound token names its embed_id as audience');
    assert.equal(decodeJwt(token).ugs_origin, 'https://app.example.com');
  });

  it('context: accepts an embed token like a user group token', async () => {
    const group = await createGroup({ user_group_id: 'tok-ctx', name: 'Token Context', properties: { region: 'apac' }, mapping: { '7': 9 } });
    const viaGroupToken = await t.request('GET', CONTEXT, { headers: { authorization: `Bearer ${group.token}` } });
    const token = await embedToken({ user_group_id: 'tok-ctx' });
    const res = await context(token);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, viaGroupToken.body);
    assert.equal(res.body.variables.region, 'apac');
    assert.ok(!res.text.includes(group.token));
    const tokenScheme = await t.request('GET', CONTEXT, { headers: { authorization: `Token ${token}` } });
    assert.equal(tokenScheme.status, 200);
  });

  it('issue: a read-only API token may issue embed tokens', async () => {
    await createGroup({ user_group_id: 'tok-read' });
    const { token: readOnly } = await t.issueToken({ scopes: ['read'] });
    const res = await issue({ user_group_id: 'tok-read' }, readOnly);
    assert.equal(res.status, 200, res.text);
    assert.equal((await context(res.body.embed_token)).status, 200);
  });

  it('issue: picks the group by environment, and an environment-restricted API token cannot leave its environment', async () => {
    await createGroup({ user_group_id: 'tok-env', name: 'Live', api_environment_tag: 'Customer' });
    await createGroup({ user_group_id: 'tok-env', name: 'Test', api_environment_tag: 'Testing' });
    const testing = await context(await embedToken({ user_group_id: 'tok-env', api_environment_tag: 'Testing' }));
    assert.equal(testing.body.user_group.name, 'Test');
    assert.equal(testing.body.user_group.api_environment_tag, 'Testing');
    const customer = await context(await embedToken({ user_group_id: 'tok-env' }));
    assert.equal(customer.body.user_group.name, 'Live');

    const { token: testingOnly } = await t.issueToken({ env: 'Testing' });
    const refused = await issue({ user_group_id: 'tok-env', api_environment_tag: 'Customer' }, testingOnly);
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, 'environment_forbidden');
  });

  it('issue: an integer user_group_id names the group with that decimal id', async () => {
    await createGroup({ user_group_id: 4711 });
    const res = await context(await embedToken({ user_group_id: 4711 }));
    assert.equal(res.body.user_group.provided_id, '4711');
  });

  it('issue: an unknown group, or one of another account, is 404 user_group_not_found', async () => {
    const missing = await issue({ user_group_id: 'tok-nobody' });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'user_group_not_found');

    await createGroup({ user_group_id: 'tok-acme-only' });
    const { token: otherAccount } = await t.issueToken({ account: 'globex' });
    const foreign = await issue({ user_group_id: 'tok-acme-only' }, otherAccount);
    assert.equal(foreign.status, 404);
    assert.equal(foreign.body.error.code, 'user_group_not_found');
  });

  it('issue: expires_in_seconds must be 60-2592000, and the bounds themselves are accepted', async () => {
    clock = START;
    await createGroup({ user_group_id: 'tok-bounds' });
    for (const [value, issue_] of [
      [59, 'too_small'],
      [2_592_001, 'too_large'],
      [600.5, 'wrong_type'],
      ['600', 'wrong_type'],
    ] as const) {
      const res = await issue({ user_group_id: 'tok-bounds', expires_in_seconds: value });
      assert.equal(res.status, 400, `${value}: ${res.text}`);
      assert.equal(res.body.error.code, 'validation_failed');
      assert.deepEqual(res.body.error.details, [{ field: 'expires_in_seconds', issue: issue_ }]);
    }
    for (const seconds of [60, 2_592_000]) {
      const res = await issue({ user_group_id: 'tok-bounds', expires_in_seconds: seconds });
      assert.equal(res.status, 200);
      assert.equal(res.body.expires_at, new Date(START.getTime() + seconds * 1000).toISOString());
    }
  });

  it('issue: unknown fields, a missing user_group_id and malformed origins are 400 validation_failed', async () => {
    await createGroup({ user_group_id: 'tok-valid' });
    const unknown = await issue({ user_group_id: 'tok-valid', expires_in: 60 });
    assert.equal(unknown.status, 400);
    assert.deepEqual(unknown.body.error.details, [{ field: 'expires_in', issue: 'unknown_field' }]);

    const missing = await issue({ embed_id: 'x' });
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.body.error.details, [{ field: 'user_group_id', issue: 'required' }]);

    for (const origin of [
      'https://app.example.com/',
      'https://app.example.com/path',
      'app.example.com',
      'HTTPS://App.Example.com',
      'https://app.example.com:443',
      'ftp://x.example',
      'null',
    ]) {
      const res = await issue({ user_group_id: 'tok-valid', origin });
      assert.equal(res.status, 400, `${origin}: ${res.text}`);
      assert.deepEqual(res.body.error.details, [{ field: 'origin', issue: 'invalid_format' }], origin);
    }
    assert.equal((await issue({ user_group_id: 'tok-valid', origin: 'http://localhost:8080' })).status, 200);
  });

  it('issue: needs an API token; a user group token or an embed token is refused', async () => {
    const group = await createGroup({ user_group_id: 'tok-auth' });
    const none = await t.request('POST', '/api/embed_token', { body: { user_group_id: 'tok-auth' } });
    assert.equal(none.status, 401);
    assert.equal(none.body.error.code, 'missing_api_token');
    const withGroupToken = await issue({ user_group_id: 'tok-auth' }, group.token);
    assert.equal(withGroupToken.status, 401);
    assert.equal(withGroupToken.body.error.code, 'wrong_token_kind');
    const withEmbedToken = await issue({ user_group_id: 'tok-auth' }, await embedToken({ user_group_id: 'tok-auth' }));
    assert.equal(withEmbedToken.status, 401);
    assert.equal(withEmbedToken.body.error.code, 'wrong_token_kind');
  });

  it('expiry: works until expires_at, then 401 invalid_token', async () => {
    clock = START;
    await createGroup({ user_group_id: 'tok-expiry' });
    const token = await embedToken({ user_group_id: 'tok-expiry', expires_in_seconds: 60 });
    clock = new Date(START.getTime() + 59_999);
    assert.equal((await context(token)).status, 200);
    clock = new Date(START.getTime() + 60_000);
    const expired = await context(token);
    assert.equal(expired.status, 401);
    assert.equal(expired.body.error.code, 'invalid_token');
    assert.equal(expired.headers['www-authenticate'], 'Bearer');
    clock = START;
  });

  it("rotation: the group's token rotation ends every embed token issued before it, even with a grace period", async () => {
    clock = START;
    const group = await createGroup({ user_group_id: 'tok-rotate' });
    const before_ = await embedToken({ user_group_id: 'tok-rotate' });
    assert.equal((await context(before_)).status, 200);
    const rotated = await t.request('POST', '/api/user', { token: t.token, body: { current_token: group.token, grace_period_seconds: 600 } });
    assert.equal(rotated.status, 200);

    const res = await context(before_);
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'invalid_token');
    assert.equal((await context(group.token)).status, 200, 'the retired user group token itself is in its grace period');

    const after_ = await embedToken({ user_group_id: 'tok-rotate' });
    assert.equal(decodeJwt(after_).ugs_generation, 2);
    assert.equal((await context(after_)).status, 200);
  });

  it('deletion: ends its embed tokens, also after the same id is created again', async () => {
    await createGroup({ user_group_id: 'tok-delete' });
    const token = await embedToken({ user_group_id: 'tok-delete' });
    const del = await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: 'tok-delete' } });
    assert.equal(del.status, 200);
    assert.equal((await context(token)).body.error.code, 'invalid_token');
    await createGroup({ user_group_id: 'tok-delete' });
    const res = await context(token);
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'invalid_token');
  });

  it('origin: a bound token works only from that Origin; another or no Origin is 403 origin_forbidden', async () => {
    await createGroup({ user_group_id: 'tok-origin' });
    const token = await embedToken({ user_group_id: 'tok-origin', origin: 'https://app.example.com' });
    const ok = await context(token, { origin: 'https://app.example.com' });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.headers['access-control-allow-origin'], '*');
    for (const origin of ['https://evil.example.net', 'http://app.example.com', 'https://app.example.com:8443', undefined]) {
      const res = await context(token, { origin });
      assert.equal(res.status, 403, `${origin}: ${res.text}`);
      assert.equal(res.body.error.code, 'origin_forbidden');
      assert.equal(res.body.user_group, undefined);
    }
  });

  it('embed_id: a bound token works only for that embed_id; another or none is 403 embed_id_forbidden', async () => {
    await createGroup({ user_group_id: 'tok-embed-id' });
    const token = await embedToken({ user_group_id: 'tok-embed-id', embed_id: 'sales-overview' });
    assert.equal((await context(token, { embedId: 'sales-overview' })).status, 200);
    for (const embedId of ['other-dashboard', 'Sales-Overview', undefined]) {
      const res = await context(token, { embedId });
      assert.equal(res.status, 403, `${embedId}: ${res.text}`);
      assert.equal(res.body.error.code, 'embed_id_forbidden');
    }
    // an unbound token (or a user group token) does not care which dashboard asks
    const unbound = await embedToken({ user_group_id: 'tok-embed-id' });
    assert.equal((await context(unbound, { embedId: 'anything' })).status, 200);
  });

  it('embed_id and origin: both bindings must hold', async () => {
    await createGroup({ user_group_id: 'tok-both' });
    const token = await embedToken({ user_group_id: 'tok-both', embed_id: 'd1', origin: 'http://localhost:5173' });
    assert.equal((await context(token, { embedId: 'd1', origin: 'http://localhost:5173' })).status, 200);
    assert.equal((await context(token, { embedId: 'd1', origin: 'http://localhost:5174' })).body.error.code, 'origin_forbidden');
    assert.equal((await context(token, { embedId: 'd2', origin: 'http://localhost:5173' })).body.error.code, 'embed_id_forbidden');
  });

  it('forgery: a tampered, foreign-key, unsigned or wrongly typed token is 401 invalid_token', async () => {
    clock = START;
    const group = await createGroup({ user_group_id: 'tok-forge' });
    const genuine = await embedToken({ user_group_id: 'tok-forge' });
    const [header, payload, signature] = genuine.split('.');
    const iat = Math.floor(START.getTime() / 1000);
    const claims = { gen: 1, iss: 'ugs', aud: 'ugs:embed', sub: String(group.team_id), iat, exp: iat + 600 };
    const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

    const otherTeam = b64({ ...decodeJwt(genuine), sub: String(group.team_id + 1) });
    const foreignKey = crypto.randomBytes(32);
    const forgeries = {
      'payload swapped': `${header}.${otherTeam}.${signature}`,
      'signature flipped': `${header}.${payload}.${signature.slice(0, -2)}${signature.endsWith('AA') ? 'BB' : 'AA'}`,
      'alg none': `${b64({ alg: 'none', typ: 'ugs-embed+jwt', kid: t.keyring.currentKeyId })}.${b64(claims)}.`,
      'foreign key, same kid': await new SignJWT(claims)
        .setProtectedHeader({ alg: 'HS256', typ: 'ugs-embed+jwt', kid: t.keyring.currentKeyId })
        .sign(foreignKey),
      'unknown kid': await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'ugs-embed+jwt', kid: 'deadbeef' }).sign(foreignKey),
      'the root key itself': await new SignJWT(claims)
        .setProtectedHeader({ alg: 'HS256', typ: 'ugs-embed+jwt', kid: t.keyring.currentKeyId })
        .sign(Buffer.from(t.secretKey, 'base64')),
      'a plain JWT of another type': await new SignJWT(claims)
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: t.keyring.currentKeyId })
        .sign(t.keyring.deriveKeyById('embed-token', t.keyring.currentKeyId)!),
    };
    for (const [what, token] of Object.entries(forgeries)) {
      const res = await context(token);
      assert.equal(res.status, 401, `${what}: ${res.text}`);
      assert.equal(res.body.error.code, 'invalid_token', what);
    }
    // the control: the same claims, correctly typed and signed, are accepted
    const control = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256', typ: 'ugs-embed+jwt', kid: t.keyring.currentKeyId })
      .sign(t.keyring.deriveKeyById('embed-token', t.keyring.currentKeyId)!);
    assert.equal((await context(control)).status, 200);
  });

  it('secret key rotation: embed tokens keep verifying, and the same signing key signs, under UGS_SECRET_KEY=new,old', async () => {
    clock = START;
    await createGroup({ user_group_id: 'tok-keys' });
    const token = await embedToken({ user_group_id: 'tok-keys' });
    const oldKey = Buffer.from(t.secretKey, 'base64');
    const rotatedApp = await buildApp({ database: t.handle, keyring: new Keyring([crypto.randomBytes(32), oldKey]), config: testConfig(), now: () => clock });
    try {
      const ask = (jws: string) => rotatedApp.inject({ method: 'GET', url: CONTEXT, headers: { authorization: `Bearer ${jws}` } });
      assert.equal((await ask(token)).statusCode, 200);
      const issued = await rotatedApp.inject({
        method: 'POST',
        url: '/api/embed_token',
        headers: { authorization: `Token ${t.token}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ user_group_id: 'tok-keys' }),
      });
      assert.equal(issued.statusCode, 200, issued.body);
      const fresh = issued.json().embed_token as string;
      assert.equal(decodeProtectedHeader(fresh).kid, decodeProtectedHeader(token).kid, 'the signing key does not change with the secret key');
      assert.equal((await context(fresh)).status, 200, 'and the first instance verifies it');
    } finally {
      await rotatedApp.close();
    }
  });

  it('HS256 tokens issued before embed tokens were signed by published keys keep working until they expire, and only with the secret key they were derived from', async () => {
    clock = START;
    const group = await createGroup({ user_group_id: 'tok-legacy', properties: { region: 'emea' } });
    const iat = Math.floor(START.getTime() / 1000);
    // Exactly what earlier versions issued: HS256, a key derived from the secret key, sub = team_id.
    const legacy = await new SignJWT({ gen: 1 })
      .setProtectedHeader({ alg: 'HS256', typ: 'ugs-embed+jwt', kid: t.keyring.currentKeyId })
      .setIssuer('ugs')
      .setAudience('ugs:embed')
      .setSubject(String(group.team_id))
      .setIssuedAt(iat)
      .setExpirationTime(iat + 600)
      .sign(t.keyring.deriveKeyById('embed-token', t.keyring.currentKeyId)!);
    const res = await context(legacy);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.variables.region, 'emea');

    const otherKeyApp = await buildApp({ database: t.handle, keyring: new Keyring([crypto.randomBytes(32)]), config: testConfig(), now: () => clock });
    try {
      const refused = await otherKeyApp.inject({ method: 'GET', url: CONTEXT, headers: { authorization: `Bearer ${legacy}` } });
      assert.equal(refused.statusCode, 401, 'without the secret key it was derived from');
    } finally {
      await otherKeyApp.close();
    }
    clock = new Date(START.getTime() + 600_000);
    assert.equal((await context(legacy)).status, 401, 'expired');
    clock = START;
  });
});
