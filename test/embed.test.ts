// GET /api/embed/context with long-lived user group tokens: what it answers, what it never
// answers, grace periods after a rotation, CORS only on the embed routes, and the cost of
// one resolution.
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import { backgroundWork } from '../src/foundations/background-work.ts';
import { buildApp } from '../src/app.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { EmbedUserGroup } from '../src/embed/embed.schemas.ts';
import { forEachBackend, testConfig, useTestApp, type TestApp, createGroup as createGroupOf } from './helpers/harness.ts';

const CONTEXT = '/api/embed/context';
const START = new Date('2030-01-01T00:00:00.000Z');

/** The parts of GET /openapi.json the openapi test reads: the API's description, not one of its documented response bodies. */
interface ApiDocument {
  components: { securitySchemes: Record<string, { type: string; scheme?: string }>; schemas: Record<string, { properties: Record<string, unknown> }> };
  tags: { name: string }[];
  paths: Record<string, Record<string, ApiOperation>>;
}
interface ApiOperation {
  operationId: string;
  tags: string[];
  security: Record<string, string[]>[];
  summary: string;
  description: string;
  responses: Record<string, { content: Record<string, { schema: ObjectSchema }> }>;
}
interface ObjectSchema {
  properties: Record<string, ObjectSchema>;
}

function context(t: TestApp, authorization: string | undefined, headers: Record<string, string> = {}) {
  return t.request('GET', CONTEXT, { headers: { ...(authorization === undefined ? {} : { authorization }), ...headers } });
}

forEachBackend('embed context with user group tokens', (backend) => {
  let clock = START;
  const t = useTestApp(backend, { now: () => clock });

  const createGroup = (fields: Record<string, unknown>) => createGroupOf(t, fields);

  async function rotate(currentToken: string, gracePeriodSeconds?: number): Promise<string> {
    const body = gracePeriodSeconds === undefined ? { current_token: currentToken } : { current_token: currentToken, grace_period_seconds: gracePeriodSeconds };
    const res = await t.request('POST', '/api/user', { token: t.token, body });
    assert.equal(res.status, 200, res.text);
    return res.body.user_group.token;
  }

  it("context: a Bearer user group token gets the group's public fields and its variables", async () => {
    const group = await createGroup({
      user_group_id: 'ctx-1',
      name: 'Context One',
      mapping: { '40': '213' },
      properties: { region: 'emea', plan: { tier: 'pro' } },
      is_demo_group: true,
      api_environment_tag: 'Testing',
    });
    const res = await context(t, `Bearer ${group.token}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, {
      success: 1,
      // The fields declared for dashboards (src/user-groups/declared-fields.ts), as the management API answers them.
      user_group: Object.fromEntries(Object.keys(EmbedUserGroup.properties).map((field) => [field, group[field as keyof typeof group]])),
      variables: { user_group_id: 'ctx-1', user_group_name: 'Context One', region: 'emea', plan: { tier: 'pro' } },
    });
    assert.deepEqual(
      [res.body.user_group.provided_id, res.body.user_group.name, res.body.user_group.api_environment_tag, res.body.user_group.is_demo_group],
      ['ctx-1', 'Context One', 'Testing', true],
    );
    assert.deepEqual(res.body.user_group.computed_properties, { region: 'emea', plan: { tier: 'pro' } });
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.match(String(res.headers['x-request-id']), /\S/);
  });

  it('context: never returns a token or an internal id', async () => {
    const group = await createGroup({ user_group_id: 'ctx-secret', properties: { note: 'x' } });
    const res = await context(t, `Bearer ${group.token}`);
    assert.equal(res.status, 200);
    assert.ok(!res.text.includes(group.token), 'the token must not appear in the response');
    assert.ok(!res.text.includes('ugs_grp_'), 'no user group token of any kind');
    // Exactly the fields declared for dashboards, and never the internal id or a token.
    assert.deepEqual(Object.keys(res.body.user_group).sort(), Object.keys(EmbedUserGroup.properties).sort());
    for (const hidden of ['team_id', 'token', 'token_generation']) assert.ok(!(hidden in res.body.user_group), `no ${hidden}`);
  });

  it('context: the Token scheme is accepted too, and the scheme is case-insensitive', async () => {
    const group = await createGroup({ user_group_id: 'ctx-scheme' });
    for (const scheme of ['Token', 'bearer', 'TOKEN']) {
      const res = await context(t, `${scheme} ${group.token}`);
      assert.equal(res.status, 200, `${scheme}: ${res.text}`);
      assert.equal(res.body.user_group.provided_id, 'ctx-scheme');
    }
  });

  it('variables: the built-ins user_group_id and user_group_name win over properties of the same name', async () => {
    const group = await createGroup({
      user_group_id: 'ctx-clash',
      name: 'Real Name',
      properties: { user_group_id: 'spoofed', user_group_name: 'Spoofed', constructor: 'data', region: 'apac' },
    });
    const res = await context(t, `Bearer ${group.token}`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.variables, { user_group_id: 'ctx-clash', user_group_name: 'Real Name', constructor: 'data', region: 'apac' });
    // properties themselves are returned as stored
    assert.equal(res.body.user_group.properties!.user_group_id, 'spoofed');
  });

  it('variables: a group without properties has only the built-ins', async () => {
    const group = await createGroup({ user_group_id: 'ctx-bare' });
    const res = await context(t, `Bearer ${group.token}`);
    assert.equal(res.status, 200);
    assert.equal(res.body.user_group.properties, null);
    assert.equal(res.body.user_group.mapping, null);
    assert.deepEqual(res.body.variables, { user_group_id: 'ctx-bare', user_group_name: 'ctx-bare' });
  });

  it('auth: a missing Authorization header is 401 invalid_token with WWW-Authenticate: Bearer', async () => {
    const res = await context(t, undefined);
    assert.equal(res.status, 401);
    assert.equal(res.body.success, 0);
    assert.equal(res.body.error.code, 'invalid_token');
    assert.match(res.body.error.message, /Authorization: Bearer/);
    assert.equal(res.headers['www-authenticate'], 'Bearer');
    assert.equal(res.body.error.request_id, res.headers['x-request-id']);
  });

  it('auth: malformed, mistyped and unknown tokens all get 401 invalid_token', async () => {
    const group = await createGroup({ user_group_id: 'ctx-bad' });
    const lastChar = group.token.at(-1) === 'A' ? 'B' : 'A';
    const candidates = [
      'Bearer',
      'Basic dXNlcjpwYXNz',
      'Bearer not-a-token',
      `Bearer ${group.token.slice(0, -1)}${lastChar}`, // checksum no longer matches
      `Bearer ${group.token} extra`,
      'Bearer ugs_grp_' + '0'.repeat(49),
      'Bearer a.b.c', // shaped like a JWS, not one
    ];
    for (const authorization of candidates) {
      const res = await context(t, authorization);
      assert.equal(res.status, 401, `${authorization}: ${res.text}`);
      assert.equal(res.body.error.code, 'invalid_token', authorization);
    }
    // well-formed (valid checksum) but unknown: a rotated-away token without grace
    const next = await rotate(group.token);
    const res = await context(t, `Bearer ${group.token}`);
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'invalid_token');
    assert.equal((await context(t, `Bearer ${next}`)).status, 200);
  });

  it('auth: a user group token sent without its scheme is 401 invalid_token saying to send it as Authorization: Bearer <token>', async () => {
    const group = await createGroup({ user_group_id: 'ctx-schemeless' });
    const res = await context(t, group.token);
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'invalid_token');
    assert.equal(res.body.error.message, 'the Authorization header has no scheme: send a user group token or an embed token as Authorization: Bearer <token>');
    assert.equal(res.headers['www-authenticate'], 'Bearer');
    assert.equal((await context(t, `Bearer ${group.token}`)).status, 200);
  });

  it('auth: an API token is 401 wrong_token_kind, and no group data is returned', async () => {
    const res = await context(t, `Bearer ${t.token}`);
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'wrong_token_kind');
    assert.equal(res.body.user_group, undefined);
  });

  it('auth: a user group token is refused by the management API with wrong_token_kind', async () => {
    const group = await createGroup({ user_group_id: 'ctx-mgmt' });
    const res = await t.request('GET', '/api/users', { token: group.token });
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'wrong_token_kind');
  });

  it('auth: an unknown query parameter is 400 validation_failed naming it', async () => {
    const group = await createGroup({ user_group_id: 'ctx-query' });
    const res = await t.request('GET', CONTEXT, { query: { embedid: 'x' }, headers: { authorization: `Bearer ${group.token}` } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(res.body.error.details, [{ field: 'embedid', issue: 'unknown_field' }]);
  });

  it('rotation without grace: the old token stops at once, the new one works', async () => {
    const group = await createGroup({ user_group_id: 'rot-0', name: 'Rot Zero' });
    const next = await rotate(group.token);
    assert.equal((await context(t, `Bearer ${group.token}`)).body.error.code, 'invalid_token');
    const res = await context(t, `Bearer ${next}`);
    assert.equal(res.status, 200);
    assert.equal(res.body.user_group.name, 'Rot Zero');
  });

  it('rotation with grace: the old token works here until the grace period ends, then 401', async () => {
    clock = START;
    const group = await createGroup({ user_group_id: 'rot-grace', properties: { region: 'emea' } });
    const next = await rotate(group.token, 60);

    const during = await context(t, `Bearer ${group.token}`);
    assert.equal(during.status, 200, during.text);
    assert.equal(during.body.user_group.provided_id, 'rot-grace');
    assert.equal(during.body.variables.region, 'emea');
    assert.equal((await context(t, `Bearer ${next}`)).status, 200);

    clock = new Date(START.getTime() + 59_999);
    assert.equal((await context(t, `Bearer ${group.token}`)).status, 200, 'still inside the grace period');

    clock = new Date(START.getTime() + 60_000);
    const afterGrace = await context(t, `Bearer ${group.token}`);
    assert.equal(afterGrace.status, 401);
    assert.equal(afterGrace.body.error.code, 'invalid_token');
    assert.equal((await context(t, `Bearer ${next}`)).status, 200, 'the new token is unaffected');
    clock = START;
  });

  it('rotation with grace: the retired token works only on the embed side (it cannot be rotated again)', async () => {
    clock = START;
    const group = await createGroup({ user_group_id: 'rot-grace-only-embed' });
    await rotate(group.token, 300);
    assert.equal((await context(t, `Bearer ${group.token}`)).status, 200);
    const again = await t.request('POST', '/api/user', { token: t.token, body: { current_token: group.token } });
    assert.equal(again.status, 404);
    assert.equal(again.body.error.code, 'token_not_found');
  });

  it('rotation without grace ends every earlier token at once, also those still in the grace period of an earlier rotation', async () => {
    clock = START;
    const group = await createGroup({ user_group_id: 'rot-leak' });
    const second = await rotate(group.token, 86_400); // T1 stays good for a day on the embed side
    const third = await rotate(second, 3600); // T2 too, for an hour
    for (const token of [group.token, second, third]) assert.equal((await context(t, `Bearer ${token}`)).status, 200);
    const fourth = await rotate(third, 0); // a leak: end them all now
    for (const token of [group.token, second, third]) {
      const res = await context(t, `Bearer ${token}`);
      assert.equal(res.status, 401, 'an earlier token');
      assert.equal(res.body.error.code, 'invalid_token');
    }
    assert.equal((await context(t, `Bearer ${fourth}`)).status, 200);
  });

  it('rotation with grace: a retired token sees later changes to its group', async () => {
    clock = START;
    const group = await createGroup({ user_group_id: 'rot-grace-update', name: 'Before' });
    await rotate(group.token, 300);
    const put = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: 'rot-grace-update', name: 'After' } });
    assert.equal(put.status, 200);
    const res = await context(t, `Bearer ${group.token}`);
    assert.equal(res.status, 200);
    assert.equal(res.body.user_group.name, 'After');
    assert.equal(res.body.variables.user_group_name, 'After');
  });

  it('deletion: the current token and a token in its grace period stop working at once', async () => {
    clock = START;
    const group = await createGroup({ user_group_id: 'del-1' });
    const next = await rotate(group.token, 3600);
    assert.equal((await context(t, `Bearer ${group.token}`)).status, 200);
    const del = await t.request('DELETE', '/api/user', { token: t.token, query: { user_group_id: 'del-1' } });
    assert.equal(del.status, 200);
    for (const token of [group.token, next]) {
      const res = await context(t, `Bearer ${token}`);
      assert.equal(res.status, 401);
      assert.equal(res.body.error.code, 'invalid_token');
    }
  });

  it('hot path: a current token costs one query, a token in its grace period two, a refused token none', async () => {
    clock = START;
    const group = await createGroup({ user_group_id: 'cost-1' });
    // Every statement the request sends, hot reads and Kysely queries alike, as the metrics see
    // them; not the background work's (the event sequencer, the webhook dispatcher).
    let queries = 0;
    const { handle } = await openMigratedDatabase({ databaseUrl: t.databaseUrl }, { onQuery: () => backgroundWork.getStore() === undefined && queries++ });
    const app = await buildApp({ database: handle, keyring: t.keyring, config: testConfig(), now: () => clock });
    await app.ready();
    try {
      const ask = async (token: string) => {
        queries = 0;
        const res = await app.inject({ method: 'GET', url: CONTEXT, headers: { authorization: `Bearer ${token}` } });
        return { status: res.statusCode, queries };
      };
      assert.deepEqual(await ask(group.token), { status: 200, queries: 1 });
      await rotate(group.token, 60);
      assert.deepEqual(await ask(group.token), { status: 200, queries: 2 });
      assert.deepEqual(await ask(`${group.token.slice(0, -1)}${group.token.at(-1) === 'A' ? 'B' : 'A'}`), { status: 401, queries: 0 });
      assert.deepEqual(await ask(t.token), { status: 401, queries: 0 });
    } finally {
      await app.close();
      await handle.close();
    }
  });
});

forEachBackend('embed CORS', (backend) => {
  const t = useTestApp(backend);
  let groupToken: string;
  before(async () => {
    const res = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: 'cors-1' } });
    groupToken = res.body.user_group.token;
  });

  const preflight = (target: TestApp | { request: TestApp['request'] }, path: string, origin: string) =>
    target.request('OPTIONS', path, {
      headers: { origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });

  it('cors: a preflight for the context route is answered for any origin by default, without credentials', async () => {
    const res = await preflight(t, CONTEXT, 'https://dashboards.example.com');
    assert.equal(res.status, 204);
    assert.equal(res.headers['access-control-allow-origin'], '*');
    assert.match(String(res.headers['access-control-allow-methods']), /\bGET\b/);
    assert.match(String(res.headers['access-control-allow-headers']), /authorization/i);
    assert.equal(res.headers['access-control-allow-credentials'], undefined);
    assert.equal(res.headers['access-control-max-age'], '600');
  });

  it('cors: an OPTIONS that is not a preflight gets the JSON error envelope, not a text answer', async () => {
    const res = await t.request('OPTIONS', CONTEXT, { headers: { origin: 'https://dashboards.example.com' } });
    assert.equal(res.status, 400);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(res.body.error.details, [{ field: 'access-control-request-method', issue: 'required' }]);
  });

  it('cors: answers (also errors) carry Access-Control-Allow-Origin so the page can read them', async () => {
    const ok = await context(t, `Bearer ${groupToken}`, { origin: 'https://dashboards.example.com' });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers['access-control-allow-origin'], '*');
    assert.match(String(ok.headers['access-control-expose-headers']), /X-Request-Id/i);
    const refused = await context(t, undefined, { origin: 'https://dashboards.example.com' });
    assert.equal(refused.status, 401);
    assert.equal(refused.headers['access-control-allow-origin'], '*');
  });

  it('cors: an unknown path or method under /api/embed/ answers the JSON 404 or 405 with CORS headers', async () => {
    const origin = 'https://dashboards.example.com';
    const unknown = await t.request('GET', '/api/embed/contxt', { headers: { origin } });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'not_found');
    assert.equal(unknown.headers['access-control-allow-origin'], '*');
    const wrongMethod = await t.request('POST', CONTEXT, { headers: { origin } });
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.body.error.code, 'method_not_allowed');
    assert.equal(wrongMethod.headers.allow, 'GET');
    assert.equal(wrongMethod.headers['access-control-allow-origin'], '*');
    assert.match(String(wrongMethod.headers['access-control-expose-headers']), /X-Request-Id/i);
  });

  it('cors: the management API sends no CORS headers, not even to a preflight', async () => {
    const origin = 'https://dashboards.example.com';
    const answers = [
      await t.request('GET', '/api/user', { token: t.token, query: { user_group_id: 'cors-1' }, headers: { origin } }),
      await t.request('POST', '/api/embed_token', { token: t.token, body: { user_group_id: 'cors-1' }, headers: { origin } }),
      await preflight(t, '/api/user', origin),
      await preflight(t, '/api/embed_token', origin),
      await t.request('GET', '/healthz', { headers: { origin } }),
    ];
    assert.deepEqual(
      answers.map((res) => res.status),
      [200, 200, 405, 405, 200],
    );
    for (const res of answers) {
      const cors = Object.keys(res.headers).filter((h) => h.startsWith('access-control-'));
      assert.deepEqual(cors, [], `no CORS headers expected, got ${cors.join(', ')}`);
    }
  });

  it('cors: with an allow-list only listed origins are allowed, and answers vary by Origin', async () => {
    const app = await buildApp({
      database: t.handle,
      keyring: t.keyring,
      config: testConfig({ corsOrigins: ['https://app.example.com', 'http://localhost:8080'] }),
    });
    try {
      const ask = (origin: string) =>
        app.inject({
          method: 'OPTIONS',
          url: CONTEXT,
          headers: { origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
        });
      const allowed = await ask('https://app.example.com');
      assert.equal(allowed.statusCode, 204);
      assert.equal(allowed.headers['access-control-allow-origin'], 'https://app.example.com');
      assert.match(String(allowed.headers.vary), /Origin/i);
      assert.equal(allowed.headers['access-control-allow-credentials'], undefined);

      const other = await ask('https://evil.example.net');
      assert.equal(other.headers['access-control-allow-origin'], undefined);

      const get = await app.inject({ method: 'GET', url: CONTEXT, headers: { origin: 'http://localhost:8080', authorization: `Bearer ${groupToken}` } });
      assert.equal(get.statusCode, 200);
      assert.equal(get.headers['access-control-allow-origin'], 'http://localhost:8080');
    } finally {
      await app.close();
    }
  });

  it('openapi: the embed routes are documented with operation ids, the Embed tag and the bearer scheme', async () => {
    const res = await t.request('GET', '/openapi.json');
    assert.equal(res.status, 200);
    const doc: ApiDocument = JSON.parse(res.text);
    assert.equal(doc.components.securitySchemes.userGroupOrEmbedToken.type, 'http');
    assert.equal(doc.components.securitySchemes.userGroupOrEmbedToken.scheme, 'bearer');
    assert.ok(doc.tags.some((tag: { name: string }) => tag.name === 'Embed'));

    const getContext = doc.paths['/api/embed/context'].get;
    assert.equal(getContext.operationId, 'getEmbedContext');
    assert.deepEqual(getContext.tags, ['Embed']);
    assert.deepEqual(getContext.security, [{ userGroupOrEmbedToken: [] }]);
    assert.ok(getContext.summary && getContext.description.includes('invalid_token'));
    for (const status of ['200', '400', '401', '403', '429', '500', '503']) assert.ok(getContext.responses[status], `context documents ${status}`);
    assert.deepEqual(getContext.responses['200'].content['application/json'].schema, { $ref: '#/components/schemas/EmbedContext' });
    assert.equal(doc.components.schemas.EmbedUserGroup.properties.token, undefined, 'no token reaches a dashboard');

    const createToken = doc.paths['/api/embed_token'].post;
    assert.equal(createToken.operationId, 'createEmbedToken');
    assert.deepEqual(createToken.tags, ['Embed']);
    assert.deepEqual(createToken.security, [{ apiToken: ['read'] }, { apiTokenBearer: ['read'] }]);
    for (const status of ['200', '400', '401', '403', '404']) assert.ok(createToken.responses[status], `embed_token documents ${status}`);
    assert.equal(doc.paths['/api/embed/*'], undefined, 'the CORS preflight route stays hidden');
  });
});
