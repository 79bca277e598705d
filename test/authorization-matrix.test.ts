// Every route of the app's route table (operational routes aside) against every way a caller
// can be wrong about who it is or what it may do. Which token a route takes, the scope it
// needs and its environment rule are what the route declares (auth/route-access.ts, read
// from the app's routes); the rows of test/helpers/route-requests.ts give each route a request
// to send (the workload of every operation sends the same). Each cell answers the documented
// status and code, changes nothing, and never shows another account's data. A new route fails
// this suite until it has a row there. The replay column tries every route
// that takes an Idempotency-Key with a key a more privileged token used before (and the reverse).
import { it, before, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { forEachBackend, injectRequest, parseBody, useTestApp } from './helpers/harness.ts';
import {
  OVERRIDE,
  QUIET_ENDPOINT,
  ROUTE_REQUESTS,
  WITHOUT_A_ROW,
  routesWithoutARow,
  type Probe,
  type RouteRow,
  type Target,
} from './helpers/route-requests.ts';
import { declaredRoutes, type EnvironmentRule, type RouteAccess } from '../src/auth/route-access.ts';
import type { Scope } from '../src/auth/principal.ts';
import { generateToken } from '../src/auth/token-format.ts';
import { decodeJwt } from 'jose';

type Credential = { token?: string; bearer?: string };
/** Webhook endpoints: the victim's, the caller's (every environment) and the caller's restricted to Testing. */
const webhookEndpoints = { victim: 0, own: 0, testing: 0 };
const endpointOf = (t: Pick<Target, 'id' | 'env'>) =>
  t.id.startsWith('victim') ? webhookEndpoints.victim : t.env === 'Testing' ? webhookEndpoints.testing : webhookEndpoints.own;
const ROUTES = ROUTE_REQUESTS;

/** An answer that may be an endless stream: its status and headers, and its first chunk (a refusal: its whole body). */
async function streamStart(app: FastifyInstance, probe: Probe, credential: Credential) {
  const abort = new AbortController();
  const headers: Record<string, string> = { ...probe.headers };
  if (credential.token) headers.authorization = `Token ${credential.token}`;
  if (credential.bearer) headers.authorization = `Bearer ${credential.bearer}`;
  const response = await app.inject({ method: 'GET', url: probe.url, query: probe.query, headers, payloadAsStream: true, signal: abort.signal });
  let text = '';
  for await (const chunk of response.stream()) {
    text += String(chunk);
    if (response.statusCode === 200) break;
  }
  abort.abort();
  return { status: response.statusCode, headers: response.headers, body: parseBody(text), text };
}

const flipLast = (token: string) => `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;

/** The tag bound of this suite's app (UGS_MAX_TAGS_PER_ENVIRONMENT): small enough to fill, far above what the rows above add. */
const TAG_BOUND = 1000;

forEachBackend('authorization matrix', (backend) => {
  const t = useTestApp(backend, { config: { maxTagsPerEnvironment: TAG_BOUND } });
  let victimToken: string;
  const victimGroups: Target[] = [];
  let ownCustomer: Target; // the caller's own group in Customer
  let ownTesting: Target;
  const tokens: Record<string, string> = {};
  let fresh = 0;
  const freshId = () => `fresh-${++fresh}`;

  async function snapshot(): Promise<string> {
    const groups = await t.handle.db.selectFrom('user_groups').selectAll().orderBy('team_id').execute();
    const apiTokens = await t.handle.db.selectFrom('api_tokens').selectAll().orderBy('id').execute();
    const tags = await t.handle.db.selectFrom('group_tag_set').selectAll().orderBy('account_id').orderBy('environment').orderBy('name').execute();
    const audit = await t.handle.db
      .selectFrom('audit_log')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirst();
    return JSON.stringify({ groups, apiTokens, tags, audit: Number(audit?.n) });
  }

  let victimTokenId: number;
  const callerTokenIds: number[] = [];

  async function createGroup(token: string, id: string, env: 'Customer' | 'Testing'): Promise<Target & { teamId: number }> {
    const res = await t.request('POST', '/api/user', { token, body: { user_group_id: id, api_environment_tag: env, group_tags: [`tag-${id}`] } });
    assert.equal(res.status, 201, res.text);
    const embed = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: id, api_environment_tag: env } });
    assert.equal(embed.status, 200, embed.text);
    const apiTokenId = token === victimToken ? victimTokenId : (await t.issueToken({ account: 'caller', scopes: ['read'] })).id;
    if (token !== victimToken) callerTokenIds.push(apiTokenId);
    const webhookEndpointId = endpointOf({ id, env }); // 0 until before() has made the endpoints, then set on the targets made so far
    return {
      id,
      env,
      groupToken: res.body.user_group.token,
      embedToken: embed.body.embed_token,
      teamId: res.body.user_group.team_id,
      apiTokenId,
      webhookEndpointId,
    };
  }

  function send(probe: Probe, credential: Credential) {
    if (probe.stream) return streamStart(t.app, probe, credential);
    return injectRequest(t.app, probe.method, probe.url, { ...credential, body: probe.body, query: probe.query, headers: probe.headers });
  }

  /** A refused request: the expected status and code, the envelope, and nothing changed. */
  async function assertRefused(probe: Probe, credential: Credential, status: number, code: string): Promise<void> {
    const before = await snapshot();
    const res = await send(probe, credential);
    assert.equal(res.status, status, `${probe.method} ${probe.url}: ${res.text}`);
    assert.equal(res.body?.success, 0);
    assert.equal(res.body.error.code, code, `${probe.method} ${probe.url}`);
    assert.equal(res.body.error.request_id, res.headers['x-request-id']);
    assert.equal(await snapshot(), before, `${probe.method} ${probe.url} changed the database`);
  }

  before(async () => {
    ({ token: victimToken, id: victimTokenId } = await t.issueToken({ account: 'victim', scopes: ['read', 'write', 'admin'] }));
    for (const route of declaredRoutes(t.app)) declared.set(`${route.method} ${route.url}${route.constraints ? ` ${route.constraints}` : ''}`, route.access);
    // One victim group per route that takes an API token, alternating environments.
    const apiRows = Object.keys(ROUTES).filter((key) => declarationOf(key).token === 'api').length;
    for (let i = 0; i < apiRows; i++) victimGroups.push(await createGroup(victimToken, `victim-${i}`, i % 2 === 0 ? 'Customer' : 'Testing'));
    await t.request('PUT', '/api/user', { token: victimToken, body: { user_group_id: 'victim-0', name: 'history entry' } });
    // The caller's full token can do everything, admin included; the others lack one thing each.
    tokens.rw = (await t.issueToken({ account: 'caller', scopes: ['read', 'write', 'admin'] })).token;
    tokens.readOnly = (await t.issueToken({ account: 'caller', scopes: ['read'] })).token;
    tokens.noAdmin = (await t.issueToken({ account: 'caller', scopes: ['read', 'write'] })).token;
    tokens.adminOnly = (await t.issueToken({ account: 'caller', scopes: ['admin'] })).token;
    tokens.testingOnly = (await t.issueToken({ account: 'caller', env: 'Testing', scopes: ['read', 'write', 'admin'] })).token;
    const revoked = await t.issueToken({ account: 'caller' });
    await t.handle.db.updateTable('api_tokens').set({ revoked_at: new Date().toISOString() }).where('id', '=', revoked.id).execute();
    tokens.revoked = revoked.token;
    tokens.expired = (await t.issueToken({ account: 'caller', expiresInMs: -1000 })).token;
    ownCustomer = await createGroup(tokens.rw, 'own-customer', 'Customer');
    ownTesting = await createGroup(tokens.rw, 'own-testing', 'Testing');
    // A group token that no longer identifies anything: rotated away (no grace period).
    const retired = await createGroup(tokens.rw, 'own-retired', 'Customer');
    assert.equal((await t.request('POST', '/api/user', { token: tokens.rw, body: { current_token: retired.groupToken } })).status, 200);
    tokens.retiredGroupToken = retired.groupToken;
    webhookEndpoints.victim = await insertWebhookEndpoint('victim', null);
    webhookEndpoints.own = await insertWebhookEndpoint('caller', null);
    webhookEndpoints.testing = await insertWebhookEndpoint('caller', 'Testing');
    for (const target of [...victimGroups, ownCustomer, ownTesting]) target.webhookEndpointId = endpointOf(target);
  });

  /** A webhook endpoint row (its loopback URL is refused when a test event is sent: nothing leaves). */
  async function insertWebhookEndpoint(account: string, environment: 'Testing' | null): Promise<number> {
    const { id: accountId } = await t.handle.db.selectFrom('accounts').select('id').where('slug', '=', account).executeTakeFirstOrThrow();
    const row = await t.handle.db
      .insertInto('webhook_endpoints')
      .values({
        account_id: accountId,
        url: 'http://127.0.0.1:9/hook',
        types: JSON.stringify(QUIET_ENDPOINT.types),
        description: null,
        environment,
        secret_sealed: t.keyring.seal('whsec_AAAA', 'webhook-secret'),
        created_at: new Date().toISOString(),
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return Number(row.id);
  }

  it('the route table has a row for every route, and every row is a route', () => {
    assert.deepEqual(routesWithoutARow(t.app), { missing: [], stale: [] }, WITHOUT_A_ROW);
  });

  /** What each route declares (auth/route-access.ts), keyed as the route table keys it. */
  const declared = new Map<string, RouteAccess>();
  function declarationOf(key: string): RouteAccess {
    const access = declared.get(key);
    assert.ok(access, `${key} declares no access`);
    return access;
  }
  /** The caller's tokens that lack a scope: `write` includes `read`, `admin` includes neither. */
  const LACKING: Record<Scope, [string, string][]> = {
    read: [['an admin-only API token', 'adminOnly']],
    write: [
      ['a read-only API token', 'readOnly'],
      ['an admin-only API token', 'adminOnly'],
    ],
    admin: [
      ['a read-only API token', 'readOnly'],
      ['a read,write API token without admin', 'noAdmin'],
    ],
  };

  /** The embed side: a user group or embed token, never an API token. */
  async function userGroupTokenCells(c: TestContext, key: string, row: RouteRow): Promise<void> {
    await c.test(`${key}: no, malformed, wrong-checksum, unknown, retired group token -> 401 invalid_token; API token -> 401 wrong_token_kind`, async () => {
      const probe = row.probe(ownCustomer, '');
      await assertRefused(probe, {}, 401, 'invalid_token');
      await assertRefused(probe, { bearer: 'ugs_grp_not-a-token' }, 401, 'invalid_token');
      await assertRefused(probe, { bearer: flipLast(ownCustomer.groupToken) }, 401, 'invalid_token');
      await assertRefused(probe, { bearer: generateToken('user_group') }, 401, 'invalid_token');
      await assertRefused(probe, { bearer: tokens.retiredGroupToken }, 401, 'invalid_token');
      await assertRefused(probe, { bearer: tokens.rw }, 401, 'wrong_token_kind');
      // A valid group token sees its own group and nothing else.
      const res = await send(probe, { bearer: ownCustomer.groupToken });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.user_group.provided_id, ownCustomer.id);
      assert.ok(!/ugs_(grp|api)_/.test(res.text), 'the embed context returned a token');
    });
  }

  // One test per route; its cells are what the route's declaration calls for.
  for (const [key, row] of Object.entries(ROUTES)) {
    it(`${key}: the credentials, accounts, scopes and environments its declaration calls for`, async (c) => {
      const access = declarationOf(key);
      assert.equal(
        row.byGroupToken === true,
        access.token === 'user_group',
        `${key}: byGroupToken of its row (test/helpers/route-requests.ts) is not what it declares`,
      );
      if (access.token === 'user_group') return userGroupTokenCells(c, key, row);

      await c.test(`${key}: no, malformed, wrong-checksum, unknown, revoked, expired API token -> 401; group token -> 401 wrong_token_kind`, async () => {
        const probe = row.probe(ownCustomer, freshId());
        await assertRefused(probe, {}, 401, 'missing_api_token');
        await assertRefused(probe, { token: 'ugs_api_not-a-token' }, 401, 'invalid_api_token');
        await assertRefused(probe, { token: flipLast(tokens.rw) }, 401, 'invalid_api_token');
        await assertRefused(probe, { token: generateToken('api') }, 401, 'invalid_api_token');
        await assertRefused(probe, { token: tokens.revoked }, 401, 'invalid_api_token');
        await assertRefused(probe, { token: tokens.expired }, 401, 'invalid_api_token');
        await assertRefused(probe, { token: ownCustomer.groupToken }, 401, 'wrong_token_kind');
        await assertRefused(probe, { bearer: ownCustomer.groupToken }, 401, 'wrong_token_kind');
      });

      await c.test(`${key}: another account's object is never reached and never shown`, async () => {
        const victim = victimGroups.shift()!;
        const expected = row.otherAccount!;
        const before = await snapshot();
        const res = await send(row.probe(victim, victim.id), { token: tokens.rw });
        const statuses = [expected.status].flat();
        assert.ok(statuses.includes(res.status), `${key}: ${res.status} ${res.text}`);
        if (expected.code) {
          assert.equal(res.body.error.code, expected.code);
          assert.equal(await snapshot(), before, `${key} changed the database`);
        }
        // No trace of the victim's group: not its token, not its team_id.
        assert.ok(!res.text.includes(victim.groupToken), `${key} returned the victim's token`);
        for (const group of [victim, ...victimGroups] as (Target & { teamId: number })[]) {
          assert.doesNotMatch(res.text, new RegExp(`"(team_id|sub)":${group.teamId}\\b`), `${key} returned the victim's team_id`);
        }
        if (key === 'GET /api/user/history') assert.deepEqual(res.body.entries, []);
        if (key === 'GET /api/users') assert.deepEqual(res.body.user_groups, []);
        if (key === 'GET /api/group_tags') assert.deepEqual(res.body.group_tags, []);
        if (key === 'GET /api/events')
          assert.ok(
            res.body.events.every((event) => event.account === 'caller'),
            "another account's events",
          );
        if (key === 'POST /api/embed/introspect') assert.deepEqual(res.body, { success: 1, active: false });
        if (key === 'GET /api/api_tokens/current') assert.equal(res.body.account, 'caller');
        if (key === 'GET /api/api_tokens')
          assert.ok(!res.body.api_tokens.some((token: { id: number }) => token.id === victimTokenId), "the victim's token is listed");
        if (key === 'GET /api/api_tokens/history')
          assert.ok(!res.body.entries.some((entry: { api_token_id: number }) => entry.api_token_id === victimTokenId), "the victim's token history is shown");
        // The victim's group is as it was.
        const still = await t.request('GET', '/api/user', { token: victimToken, query: { user_group_id: victim.id, api_environment_tag: victim.env } });
        assert.equal(still.status, 200);
        assert.equal(still.body.user_group.token, victim.groupToken);
      });

      // The scope: the declared one, or write where the probe creates a group.
      if (row.probeNeedsWrite) assert.equal(access.scope, 'read', `${key}: the probe needs write, beyond the declared scope`);
      const scope = row.probeNeedsWrite ? 'write' : access.scope;
      if (scope === null) {
        await c.test(`${key}: declares no scope: a read-only and an admin-only API token are both answered`, async () => {
          for (const name of ['readOnly', 'adminOnly']) {
            const res = await send(row.probe(ownCustomer, freshId()), { token: tokens[name] });
            assert.ok(res.status < 400, `${key} with ${name}: ${res.status} ${res.text}`);
          }
        });
      }
      for (const [lacking, name] of scope === null ? [] : LACKING[scope]) {
        await c.test(`${key}: ${lacking} (the ${scope} scope is needed) -> 403 insufficient_scope`, async () => {
          await assertRefused(row.probe(ownCustomer, freshId()), { token: tokens[name] }, 403, 'insufficient_scope');
          if (key === 'POST /api/user') {
            await assertRefused({ method: 'POST', url: '/api/user', body: { user_group_id: freshId() } }, { token: tokens[name] }, 403, 'insufficient_scope');
          }
        });
      }

      await c.test(`${key}: a token restricted to Testing, as the route's environment rule (${access.environment}) says`, () =>
        environmentCell(key, row, access.environment),
      );
    });
  }

  /** A token restricted to Testing on a route, by the route's environment rule (auth/route-access.ts, EnvironmentRule). */
  async function environmentCell(key: string, row: RouteRow, rule: EnvironmentRule): Promise<void> {
    switch (rule) {
      case 'items':
      case 'none': {
        // Works on the account, or each item names its environment: the token is not refused for its own.
        const res = await send(row.probe(ownCustomer, freshId()), { token: tokens.testingOnly });
        assert.ok(res.status < 400, `${key}: ${res.status} ${res.text}`);
        return;
      }
      case 'introspected': {
        const before = await snapshot();
        const res = await send(row.probe(ownCustomer, freshId()), { token: tokens.testingOnly });
        assert.deepEqual(res.body, { success: 1, active: false });
        assert.equal(await snapshot(), before);
        const own = await send(row.probe(ownTesting, freshId()), { token: tokens.testingOnly });
        assert.equal(own.body.active, true, `${key} in Testing: ${own.text}`);
        return;
      }
      case 'token':
        return tokenEnvironmentCell(key, row);
      case 'request':
        await assertRefused(row.probe(ownCustomer, freshId()), { token: tokens.testingOnly }, 403, 'environment_forbidden');
        {
          // The same token does work in its own environment (so the refusal is about the environment).
          const own = await send(row.probe(ownTesting, freshId()), { token: tokens.testingOnly });
          assert.ok(own.status < 400, `${key} in Testing: ${own.status} ${own.text}`);
          if (key === 'POST /api/user') ownTesting.groupToken = own.body.user_group.token;
        }
        if (key === 'DELETE /api/user') ownTesting = await createGroup(tokens.rw, ownTesting.id, 'Testing');
        if (key === 'POST /api/group_tags/rename' || key === 'DELETE /api/group_tags') {
          const restored = await t.request('PUT', '/api/user', {
            token: tokens.rw,
            body: { user_group_id: ownTesting.id, api_environment_tag: 'Testing', group_tags: [`tag-${ownTesting.id}`] },
          });
          assert.equal(restored.status, 200, restored.text);
        }
        return;
    }
  }

  /** The `token` rule: what the route reaches is limited to the token's environment; the rest answers as absent. */
  async function tokenEnvironmentCell(key: string, row: RouteRow): Promise<void> {
    const res = await send(row.probe(ownCustomer, freshId()), { token: tokens.testingOnly });
    if (key === 'GET /api/events') {
      assert.equal(res.status, 200, res.text);
      assert.ok(res.body.events.length > 0, 'the Testing events of the suite');
      for (const event of res.body.events) assert.equal(event.data.api_environment_tag ?? event.data.allowed_environment, 'Testing', JSON.stringify(event));
    } else if (key === 'GET /api/events/stream') {
      // Served; which events it writes: test/events-stream.test.ts.
      assert.equal(res.status, 200, res.text);
    } else if (key.startsWith('GET /api/api_tokens') || key.startsWith('DELETE /api/api_tokens')) {
      const testingTokenIds = new Set(
        (await t.handle.db.selectFrom('api_tokens').select('id').where('allowed_environment', '=', 'Testing').execute()).map((r) => Number(r.id)),
      );
      if (key === 'DELETE /api/api_tokens/:id') {
        // The probe's token is unrestricted: not this admin's to see, so not found, and still active.
        assert.equal(res.status, 404, res.text);
        assert.equal(res.body.error.code, 'api_token_not_found');
        const customerOnly = await t.issueToken({ account: 'caller', env: 'Customer', scopes: ['read'] });
        await assertRefused({ method: 'DELETE', url: `/api/api_tokens/${customerOnly.id}` }, { token: tokens.testingOnly }, 404, 'api_token_not_found');
        const testingOwn = await t.issueToken({ account: 'caller', env: 'Testing', scopes: ['read'] });
        const revoked = await send({ method: 'DELETE', url: `/api/api_tokens/${testingOwn.id}` }, { token: tokens.testingOnly });
        assert.equal(revoked.status, 200, revoked.text);
        return;
      }
      assert.equal(res.status, 200, res.text);
      const ids: number[] =
        key === 'GET /api/api_tokens'
          ? res.body.api_tokens.map((token: { id: number }) => token.id)
          : res.body.entries.map((entry: { api_token_id: number }) => entry.api_token_id);
      assert.ok(ids.length > 0, `${key} shows the Testing tokens`);
      for (const id of ids) assert.ok(testingTokenIds.has(id), `${key} shows token ${id}, which is not restricted to Testing`);
    } else if (key.includes('/api/webhook_endpoints')) {
      if (key.includes(':id')) {
        assert.equal(res.status, 404, res.text);
        assert.equal(res.body.error.code, 'webhook_endpoint_not_found');
      } else if (key === 'GET /api/webhook_endpoints') {
        assert.equal(res.status, 200, res.text);
        const listed = res.body.webhook_endpoints.map((endpoint: { id: number; environment: string | null }) => [endpoint.id, endpoint.environment]);
        assert.ok(listed.length > 0 && listed.every(([, environment]: unknown[]) => environment === 'Testing'), JSON.stringify(listed));
      } else {
        assert.equal(res.status, 201, res.text);
        assert.equal(res.body.webhook_endpoint.environment, 'Testing', 'it receives only the events of Testing');
      }
      const own = await send(row.probe(ownTesting, freshId()), { token: tokens.testingOnly });
      assert.ok(own.status < 400, `${key} in Testing: ${own.status} ${own.text}`);
      if (key === 'DELETE /api/webhook_endpoints/:id')
        ownTesting.webhookEndpointId = webhookEndpoints.testing = await insertWebhookEndpoint('caller', 'Testing');
    } else {
      assert.fail(`${key} declares the token rule: say here what a token restricted to Testing sees of it`);
    }
  }

  // Embed tokens outside the service (docs/api.md, "The subject", "The viewer"): what a token
  // says, for every caller token that may mint one, beside what it may reach.
  it('POST /api/embed_token: subjects across tenants: a group of the same id in another account, or in the other environment, gets a subject of its own, whichever token mints it', async () => {
    for (const env of ['Customer', 'Testing'] as const) {
      const res = await t.request('POST', '/api/user', { token: victimToken, body: { user_group_id: 'namesake', api_environment_tag: env } });
      assert.equal(res.status, 201, res.text);
      assert.equal((await t.request('POST', '/api/user', { token: tokens.rw, body: { user_group_id: 'namesake', api_environment_tag: env } })).status, 201);
    }
    const subjectOf = async (token: string, env: 'Customer' | 'Testing') => {
      const res = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: 'namesake', api_environment_tag: env } });
      assert.equal(res.status, 200, res.text);
      const claims = decodeJwt(res.body.embed_token);
      return `${claims.sub} (${claims.ugs_account}/${claims.ugs_environment}/${claims.ugs_user_group_id})`;
    };
    const victims = [await subjectOf(victimToken, 'Customer'), await subjectOf(victimToken, 'Testing')];
    assert.deepEqual(victims, ['victim:Customer:namesake (victim/Customer/namesake)', 'victim:Testing:namesake (victim/Testing/namesake)']);
    const minted: Record<string, string> = {};
    for (const [name, env] of [
      ['rw', 'Customer'],
      ['rw', 'Testing'],
      ['readOnly', 'Customer'],
      ['noAdmin', 'Customer'],
      ['testingOnly', 'Testing'],
    ] as const) {
      minted[`${name} ${env}`] = await subjectOf(tokens[name], env);
    }
    assert.deepEqual(minted, {
      'rw Customer': 'caller:Customer:namesake (caller/Customer/namesake)',
      'rw Testing': 'caller:Testing:namesake (caller/Testing/namesake)',
      'readOnly Customer': 'caller:Customer:namesake (caller/Customer/namesake)',
      'noAdmin Customer': 'caller:Customer:namesake (caller/Customer/namesake)',
      'testingOnly Testing': 'caller:Testing:namesake (caller/Testing/namesake)',
    });
  });

  it("POST /api/embed_token: viewer attributes by scope: whichever token mints, the group's properties are signed as the group has them, and a name the service uses is 400 validation_failed, changing nothing", async () => {
    for (const env of ['Customer', 'Testing'] as const) {
      const res = await t.request('POST', '/api/user', {
        token: tokens.rw,
        body: { user_group_id: 'with-region', api_environment_tag: env, properties: { region: 'emea', customer_id: 'c-1' } },
      });
      assert.equal(res.status, 201, res.text);
    }
    for (const [name, env] of [
      ['rw', 'Customer'],
      ['readOnly', 'Customer'],
      ['noAdmin', 'Customer'],
      ['testingOnly', 'Testing'],
    ] as const) {
      const viewer = { id: 'mallory', attributes: { region: 'amer', customer_id: 'c-999' } };
      const res = await t.request('POST', '/api/embed_token', {
        token: tokens[name],
        body: { user_group_id: 'with-region', api_environment_tag: env, viewer },
      });
      assert.equal(res.status, 200, `${name}: ${res.text}`);
      const variables = decodeJwt(res.body.embed_token).ugs_variables as Record<string, unknown>;
      assert.deepEqual([variables.region, variables.customer_id, variables.viewer_attributes], ['emea', 'c-1', viewer.attributes], name);
      await assertRefused(
        {
          method: 'POST',
          url: '/api/embed_token',
          body: { user_group_id: 'with-region', api_environment_tag: env, viewer: { id: 'm', attributes: { ugs_account: 'victim' } } },
        },
        { token: tokens[name] },
        400,
        'validation_failed',
      );
    }
  });

  // The replay column (docs/security.md, "What each token can and cannot do"): a key is the
  // token's own. For every route that takes Idempotency-Key and each lesser token, two twin
  // groups go through the same steps, one with the key shared and one without it; the shared
  // key must change nothing of what the lesser token, or afterwards the privileged one, gets.
  const privileged = () => tokens.rw; // read, write and admin, in every environment
  const LESSER = {
    'a read-only token': () => tokens.readOnly,
    'a read,write token without admin': () => tokens.noAdmin,
    'a token restricted to Testing (the groups are in Customer)': () => tokens.testingOnly,
  };
  const withKey = (probe: Probe, key: string): Probe => ({ ...probe, headers: { ...probe.headers, 'idempotency-key': key } });
  type Answer = Awaited<ReturnType<typeof send>>;

  /** The routes that take Idempotency-Key: those the OpenAPI document declares it on, which follows each route's config (idempotency/idempotency.ts). */
  async function idempotentRoutes(): Promise<[string, RouteRow][]> {
    const doc = (await t.request('GET', '/openapi.json')).body as unknown as {
      paths: Record<string, Record<string, { parameters?: { name: string }[] }>>;
    };
    const keys = Object.entries(doc.paths).flatMap(([path, operations]) =>
      Object.entries(operations)
        .filter(([, operation]) => operation.parameters?.some((parameter) => parameter.name === 'Idempotency-Key'))
        .map(([method]) => `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`),
    );
    assert.ok(keys.length > 0, 'no route declares Idempotency-Key');
    return keys.map((key) => {
      assert.ok(ROUTES[key], `${key} takes Idempotency-Key but has no row`);
      return [key, ROUTES[key]];
    });
  }

  /**
   * One subtest per route that takes Idempotency-Key and lesser token; `cell` runs once per
   * operation of the route, with its request aimed at one of two groups of the caller in
   * Customer made alike (the key shared there), and the same request aimed at the other (the twin).
   */
  async function replayCells(
    c: TestContext,
    title: (route: string, lesser: string) => string,
    cell: (lesser: () => string, probe: Probe, twin: Probe, what: string) => Promise<void>,
  ): Promise<void> {
    const probesOf = (row: RouteRow, target: Target) => (row.idempotentProbes ?? ((to, fresh) => [row.probe(to, fresh)]))(target, freshId());
    for (const [key, row] of await idempotentRoutes()) {
      for (const [lesserName, lesser] of Object.entries(LESSER)) {
        await c.test(title(key, lesserName), async () => {
          const twins = probesOf(row, await createGroup(tokens.rw, freshId(), 'Customer'));
          const probes = probesOf(row, await createGroup(tokens.rw, freshId(), 'Customer'));
          for (const [i, probe] of probes.entries()) await cell(lesser, probe, twins[i], `${key} ${JSON.stringify(probe.body)}`);
        });
      }
    }
  }

  /** A request sent with a key another token used answers as the same request without a key (status and code), and is no replay. */
  function assertAnsweredAsWithoutKey(keyed: Answer, plain: Answer, what: string) {
    assert.equal(keyed.headers['idempotent-replayed'], undefined, `${what}: a replay of another token's answer: ${keyed.text}`);
    assert.equal(keyed.status, plain.status, `${what}: ${keyed.text}, without a key: ${plain.text}`);
    assert.equal(keyed.body?.error?.code, plain.body?.error?.code, what);
  }

  it('replay column: an answer stored for a privileged token is never replayed to a lesser token sending the same request and key; it answers as without a key', async (c) => {
    await replayCells(
      c,
      (route, lesser) => `${route}: the admin token's answer, then ${lesser} with the same key`,
      async (lesser, probe, twin, what) => {
        const key = crypto.randomUUID();
        const stored = await send(withKey(probe, key), { token: privileged() });
        assert.ok(stored.status < 300, `${what}: the admin token's own answer: ${stored.text}`);
        const before = await snapshot();
        const keyed = await send(withKey(probe, key), { token: lesser() });
        const changedNothing = (await snapshot()) === before;
        assert.equal((await send(withKey(twin, crypto.randomUUID()), { token: privileged() })).status, stored.status, `${what}: the twin`);
        const plain = await send(twin, { token: lesser() });
        assertAnsweredAsWithoutKey(keyed, plain, what);
        if (plain.status >= 400) assert.ok(changedNothing, `${what}: a refusal changed the database`);
        const secrets = [...(stored.text.match(/ugs_(api|grp)_\w+/g) ?? []), stored.body.embed_token].filter((secret) => secret !== undefined);
        for (const secret of secrets) assert.ok(!keyed.text.includes(secret), `${what}: the admin's token was handed over`);
      },
    );
  });

  it("replay column, the reverse: a lesser token's request with a key never poisons it; the privileged token sending it next gets its own answer", async (c) => {
    await replayCells(
      c,
      (route, lesser) => `${route}: ${lesser} first, then the admin token with the same key`,
      async (lesser, probe, twin, what) => {
        const key = crypto.randomUUID();
        const first = await send(withKey(probe, key), { token: lesser() });
        const keyed = await send(withKey(probe, key), { token: privileged() });
        assert.equal((await send(twin, { token: lesser() })).status, first.status, `${what}: the twin`);
        assertAnsweredAsWithoutKey(keyed, await send(twin, { token: privileged() }), what);
      },
    );
  });

  // API tokens over HTTP: the cells of "no escalation" beyond the rows above (docs/api.md,
  // "API tokens over HTTP"). Each refusal changes nothing.
  it('POST /api/api_tokens: a scope the caller lacks -> 403 insufficient_scope (admin does not imply read, write does not imply admin)', async () => {
    const readAdmin = (await t.issueToken({ account: 'caller', scopes: ['read', 'admin'] })).token;
    const adminOnly = (await t.issueToken({ account: 'caller', scopes: ['admin'] })).token;
    await assertRefused({ method: 'POST', url: '/api/api_tokens', body: { scopes: ['write'] } }, { token: readAdmin }, 403, 'insufficient_scope');
    await assertRefused({ method: 'POST', url: '/api/api_tokens', body: { scopes: ['read'] } }, { token: adminOnly }, 403, 'insufficient_scope');
  });

  it('POST /api/api_tokens: a token restricted to Testing asking for both environments -> 403 environment_forbidden', async () => {
    await assertRefused(
      { method: 'POST', url: '/api/api_tokens', body: { scopes: ['read'], allowed_environment: null } },
      { token: tokens.testingOnly },
      403,
      'environment_forbidden',
    );
  });

  it("DELETE /api/api_tokens/:id: the account's last active admin token revoking itself -> 409 last_admin_token", async () => {
    const solo = await t.issueToken({ account: 'solo-admin', scopes: ['admin'] });
    await assertRefused({ method: 'DELETE', url: `/api/api_tokens/${solo.id}` }, { token: solo.token }, 409, 'last_admin_token');
  });

  it('DELETE /api/api_tokens/:id: admins that expire or are restricted to one environment do not count as the last admin -> 409 last_admin_token', async () => {
    const lasting = await t.issueToken({ account: 'expiring-admins', scopes: ['admin'] });
    const expiring = await t.issueToken({ account: 'expiring-admins', scopes: ['admin'], expiresInMs: 3_600_000 });
    const restricted = await t.issueToken({ account: 'expiring-admins', scopes: ['admin'], env: 'Testing' });
    // Expiry alone would otherwise leave the account without a working admin token.
    await assertRefused({ method: 'DELETE', url: `/api/api_tokens/${lasting.id}` }, { token: expiring.token }, 409, 'last_admin_token');
    await assertRefused({ method: 'DELETE', url: `/api/api_tokens/${lasting.id}` }, { token: lasting.token }, 409, 'last_admin_token');
    // The restricted admin cannot even see the unrestricted one.
    await assertRefused({ method: 'DELETE', url: `/api/api_tokens/${lasting.id}` }, { token: restricted.token }, 404, 'api_token_not_found');
    // Another lasting admin: now the first may go.
    await t.issueToken({ account: 'expiring-admins', scopes: ['admin', 'read'] });
    const revoked = await send({ method: 'DELETE', url: `/api/api_tokens/${lasting.id}` }, { token: expiring.token });
    assert.equal(revoked.status, 200, revoked.text);
  });

  // The tag bound (docs/api.md, "Tags") is one account's and one environment's: at it, each
  // write that would add a tag there is refused and changes nothing, and nobody else's is.
  it('tags: an account at its tag bound in Customer -> 409 tag_limit_reached on every write that adds a tag there; its Testing, other accounts and the victim add tags as before', async () => {
    const full = (await t.issueToken({ account: 'tags-full', scopes: ['read', 'write'] })).token;
    const fullTesting = (await t.issueToken({ account: 'tags-full', scopes: ['read', 'write'], env: 'Testing' })).token;
    const filled = await t.request('POST', '/api/users/upsert', {
      token: full,
      body: {
        user_groups: Array.from({ length: TAG_BOUND / 50 }, (_, g) => ({
          user_group_id: `full-${g}`,
          group_tags: Array.from({ length: 50 }, (_, j) => `t-${g}-${j}`),
        })),
      },
    });
    assert.equal(filled.status, 200, filled.text.slice(0, 400));
    assert.equal(filled.body.counts.created, TAG_BOUND / 50);
    for (const probe of [
      { method: 'POST', url: '/api/user', body: { user_group_id: 'one-more', group_tags: ['one-more'] } },
      { method: 'GET', url: '/api/user', body: { user_group_id: 'one-more', group_tags: ['one-more'] } },
      { method: 'POST', url: '/api/user', headers: OVERRIDE, body: { user_group_id: 'one-more', group_tags: ['one-more'] } },
      { method: 'PUT', url: '/api/user', body: { user_group_id: 'full-0', group_tags: ['one-more'] } },
      { method: 'POST', url: '/api/group_tags', body: { name: 'one-more' } },
    ]) {
      await assertRefused(probe, { token: full }, 409, 'tag_limit_reached');
    }
    const upserted = await t.request('POST', '/api/users/upsert', {
      token: full,
      body: { user_groups: [{ user_group_id: 'one-more', group_tags: ['one-more'] }] },
    });
    assert.deepEqual(
      upserted.body.results.map((r) => r.error?.code),
      ['tag_limit_reached'],
    );
    // Everyone else: the same account's other environment, the caller, the victim.
    for (const [token, env] of [
      [fullTesting, 'Testing'],
      [tokens.rw, 'Customer'],
      [victimToken, 'Customer'],
    ] as const) {
      const res = await t.request('POST', '/api/group_tags', { token, body: { name: 'one-more', api_environment_tag: env } });
      assert.equal(res.status, 201, `${env}: ${res.text}`);
    }
  });
});
