// Scopes declared where routes are registered (auth/route-access.ts; docs/api.md, "Scopes of
// the operations"): every route under /api declares the token it takes and, for an API token,
// the scope and the environment rule; a route without one stops the app at start; the scope is
// checked right after authentication, before the body, validation or an Idempotency-Key; and
// /openapi.json and docs/api.md say each operation's scope as the route declares it.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import Fastify from 'fastify';
import { forEachBackend, useTestApp } from './helpers/harness.ts';
import { isOperational, routeTable } from './helpers/route-table.ts';
import { apiTokenAccess, declaredRoutes, requireDeclaredAccess, userGroupTokenAccess, type DeclaredRoute } from '../src/auth/route-access.ts';
import { registerApiTokenAuth } from '../src/auth/authenticate.ts';

const keyOf = (route: Pick<DeclaredRoute, 'method' | 'url' | 'constraints'>) =>
  `${route.method} ${route.url}${route.constraints ? ` ${route.constraints}` : ''}`;
/** The security requirement /openapi.json gives an operation of this declaration. */
const securityOf = ({ access }: DeclaredRoute) => {
  if (access.token === 'user_group') return [{ userGroupOrEmbedToken: [] }];
  const scopes = access.scope === null ? [] : [access.scope];
  return [{ apiToken: scopes }, { apiTokenBearer: scopes }];
};

type OpenApi = { paths: Record<string, Record<string, { security?: unknown; operationId: string }>> };

it('a route under /api that declares no access, or an API-token route that declares another token, stops the app at start', async () => {
  const undeclared = Fastify();
  requireDeclaredAccess(undeclared);
  await assert.rejects(async () => {
    undeclared.get('/api/forgotten', async () => ({ success: 1 }));
    await undeclared.ready();
  }, /GET \/api\/forgotten declares no access/);
  await undeclared.close();

  const wrongToken = Fastify();
  requireDeclaredAccess(wrongToken);
  await assert.rejects(
    (async () => {
      await wrongToken.register(async (api) => {
        registerApiTokenAuth(api, { authenticate: () => Promise.reject(new Error('never called')) });
        api.get('/api/embed-like', { schema: userGroupTokenAccess() }, async () => ({ success: 1 }));
      });
      await wrongToken.ready();
    })(),
    /GET \/api\/embed-like is behind API-token authentication/,
  );
  await wrongToken.close();

  const declared = Fastify({ exposeHeadRoutes: false });
  requireDeclaredAccess(declared);
  declared.get('/api/declared', { schema: apiTokenAccess('read', 'none', 'reading it') }, async () => ({ success: 1 }));
  await declared.ready();
  assert.deepEqual(
    declaredRoutes(declared).map((route) => [keyOf(route), route.access]),
    [['GET /api/declared', { token: 'api', scope: 'read', environment: 'none', action: 'reading it' }]],
  );
  await declared.close();
});

forEachBackend('scopes declared on the routes', (backend) => {
  const t = useTestApp(backend);

  it('every route under /api of the app declares its access: the token it takes, and for an API token the scope and the environment rule', () => {
    const declared = new Map(declaredRoutes(t.app).map((route) => [keyOf(route), route]));
    const api = routeTable(t.app).filter((route) => route.url.startsWith('/api/') && !isOperational(route.url));
    assert.ok(api.length >= 30, `${api.length} routes under /api`);
    for (const route of api) assert.ok(declared.has(route.key), `${route.key} declares no access`);
    assert.deepEqual([...declared.keys()].sort(), api.map((route) => route.key).sort());
  });

  it("/openapi.json names each operation's scope in its security requirement; the public operations have security: []", async () => {
    const doc = (await t.request('GET', '/openapi.json')).body as unknown as OpenApi;
    const declared = new Map(declaredRoutes(t.app).map((route) => [`${route.method.toLowerCase()} ${route.url.replace(/:(\w+)/g, '{$1}')}`, route]));
    let named = 0;
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const route = declared.get(`${method} ${path}`);
        if (!path.startsWith('/api/')) {
          assert.deepEqual(operation.security, [], `${method} ${path} is public`);
          continue;
        }
        assert.ok(route, `${method} ${path} is in the document but declares nothing`);
        assert.deepEqual(operation.security, securityOf(route), `${method} ${path}`);
        assert.equal((operation as Record<string, unknown>)['x-access'], undefined, 'the declaration itself stays out of the document');
        named++;
      }
    }
    // Every declared operation but the hidden method-override twin of GET /api/user is in the document.
    assert.equal(named, declaredRoutes(t.app).filter((route) => !route.constraints).length);
    // The token after Token or after Bearer, either with the scope.
    assert.deepEqual(doc.paths['/api/user'].put.security, [{ apiToken: ['write'] }, { apiTokenBearer: ['write'] }]);
    assert.deepEqual(doc.paths['/api/api_tokens/current'].get.security, [{ apiToken: [] }, { apiTokenBearer: [] }]);
  });

  it('docs/api.md, "Scopes of the operations", gives every operation of the document with the scope and the environment rule its route declares', async () => {
    const text = fs.readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');
    const section = text.split('\n## Scopes of the operations\n')[1]?.split('\n## ')[0];
    assert.ok(section, 'docs/api.md has a section "Scopes of the operations"');
    const rows = [...section.matchAll(/^\| `([A-Z]+) ([^`]+)` \| ([^|]+) \| ([^|]+) \|$/gm)].map((m) => `${m[1]} ${m[2]} | ${m[3].trim()} | ${m[4].trim()}`);
    const expected = declaredRoutes(t.app)
      .filter((route) => !route.constraints)
      .map(({ method, url, access }) => {
        const scope = access.token === 'user_group' ? 'user group or embed token' : access.scope === null ? 'any API token' : `\`${access.scope}\``;
        const environment = access.token === 'user_group' ? 'its group' : `\`${access.environment}\``;
        return `${method} ${url} | ${scope} | ${environment}`;
      });
    assert.deepEqual(rows.sort(), expected.sort());
  });

  it('the scope is checked before the body: a read-only token sending an invalid body to a write route gets 403 insufficient_scope, not 400', async () => {
    const reader = (await t.issueToken({ scopes: ['read'] })).token;
    const res = await t.request('PUT', '/api/user', { token: reader, body: { user_group_id: 'x', no_such_field: true } });
    assert.equal(res.status, 403, res.text);
    assert.equal(res.body.error.code, 'insufficient_scope');
    assert.equal(res.body.error.message, 'updating a user group needs an API token with the write scope');
    // After the rate limit: the refusal counts against the token's budget, and says what is left.
    assert.match(String(res.headers.ratelimit), /^"api-token";r=\d+;t=\d+$/);
    // A token with the scope gets the validation error.
    const writer = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: 'x', no_such_field: true } });
    assert.equal(writer.status, 400, writer.text);
  });

  it('the scope is checked before idempotency: a read-only token gets 403 insufficient_scope for a malformed Idempotency-Key, and no replay of the key a write token used; it claims no key', async () => {
    const reader = await t.issueToken({ scopes: ['read'] });
    const malformed = await t.request('POST', '/api/user', {
      token: reader.token,
      body: { user_group_id: 'before-idempotency' },
      headers: { 'idempotency-key': 'x'.repeat(300) },
    });
    assert.equal(malformed.status, 403, malformed.text);
    assert.equal(malformed.body.error.code, 'insufficient_scope');

    const key = crypto.randomUUID();
    const body = { user_group_id: `replayed-${key}` };
    const created = await t.request('POST', '/api/user', { token: t.token, body, headers: { 'idempotency-key': key } });
    assert.equal(created.status, 201, created.text);
    for (let i = 0; i < 2; i++) {
      const refused = await t.request('POST', '/api/user', { token: reader.token, body, headers: { 'idempotency-key': key } });
      assert.equal(refused.status, 403, refused.text);
      assert.equal(refused.body.error.code, 'insufficient_scope');
      assert.equal(refused.headers['idempotent-replayed'], undefined);
      assert.ok(!refused.text.includes(created.body.user_group.token), "the write token's answer was handed over");
    }
    const keys = await t.handle.db.selectFrom('idempotency_keys').select(['api_token_id', 'idempotency_key']).execute();
    assert.deepEqual(
      keys.filter((row) => Number(row.api_token_id) === reader.id),
      [],
      'the read-only token holds a key',
    );
    const replay = await t.request('POST', '/api/user', { token: t.token, body, headers: { 'idempotency-key': key } });
    assert.equal(replay.headers['idempotent-replayed'], 'true');
  });
});
