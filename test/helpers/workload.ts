// A workload of every operation of the API, run by one caller in one environment, for the
// suites that capture the statements a request sends: test/query-plans.test.ts (each finds
// its index) and test/tenant-isolation.test.ts (each names the caller's account). The hot
// reads run concurrently, so that they batch as they do under load; the flows below go
// through the states a request needs (pages after a cursor, a token in its grace period, a
// hierarchy), and last every route's example request of test/helpers/route-requests.ts, the
// one the authorization matrix sends, is sent as the caller, aimed at a group of its own.
import assert from 'node:assert/strict';
import { decodeJwt } from 'jose';
import type { FastifyInstance } from 'fastify';
import type { Environment } from '../../src/db/schema.ts';
import type { BuiltApp, RequestOptions, ResponseBody } from './harness.ts';
import { QUIET_ENDPOINT, ROUTE_REQUESTS, WITHOUT_A_ROW, routesWithoutARow, type Target } from './route-requests.ts';

export interface WorkloadCaller {
  /** The app the requests go to: every one of its routes must have its example request (route-requests.ts). */
  app: FastifyInstance;
  request: BuiltApp['request'];
  /** An API token with read, write and admin, in `environment` (restricted to it or not). */
  token: string;
  environment: Environment;
  /** At least 60 user_group_ids of the caller's groups in `environment`, without parents. */
  existing: readonly string[];
  /** A prefix of some existing names and ids, for the search. */
  search: { id: string; name: string };
  /** Makes the ids this run creates its own, so that a caller can run the workload twice. */
  run: string;
}

/** Runs every operation once (the hot reads twenty times at once); every answer must succeed. */
export async function runEveryOperation(caller: WorkloadCaller): Promise<void> {
  const { token, environment: env, existing, run } = caller;
  assert.deepEqual(routesWithoutARow(caller.app), { missing: [], stale: [] }, WITHOUT_A_ROW);
  const request = (method: string, path: string, options: RequestOptions = {}): Promise<ResponseBody> =>
    caller.request(method, path, { token, ...options }).then((answer) => {
      assert.ok(answer.status < 300, `${method} ${path}: ${answer.status} ${answer.text}`);
      return answer.body;
    });
  const id = (name: string) => `${run}-${name}`;
  const hits = await Promise.all(
    existing.slice(0, 20).map((user_group_id) => request('GET', '/api/user', { body: { user_group_id, api_environment_tag: env } })),
  );
  await Promise.all(existing.slice(20, 40).map((user_group_id) => request('GET', '/api/user', { query: { user_group_id, api_environment_tag: env } })));
  const tokens: string[] = hits.map((hit) => hit.user_group.token);
  await Promise.all(tokens.map((bearer) => caller.request('GET', '/api/embed/context', { bearer })));
  await request('GET', '/api/user', { body: { user_group_id: id('new'), properties: { a: 1 }, api_environment_tag: env } });
  // The same get-or-create as POST with X-HTTP-Method-Override: GET, for clients that cannot send a body with GET.
  await request('POST', '/api/user', { body: { user_group_id: id('new'), api_environment_tag: env }, headers: { 'x-http-method-override': 'GET' } });
  await request('POST', '/api/user', { body: { user_group_id: id('created'), api_environment_tag: env } });
  await request('PUT', '/api/user', { body: { user_group_id: id('created'), name: 'Renamed', api_environment_tag: env } });
  // An idempotent create, and its retry: the stored answer again.
  const idempotent = { body: { user_group_id: id('idempotent'), api_environment_tag: env }, headers: { 'idempotency-key': id('key') } };
  const first = await request('POST', '/api/user', idempotent);
  const replayed = await request('POST', '/api/user', idempotent);
  assert.equal(replayed.user_group.token, first.user_group.token, 'an idempotent retry answers the first answer');
  const rotated = await request('POST', '/api/user', { body: { current_token: tokens[0], grace_period_seconds: 60 } });
  assert.equal((await caller.request('GET', '/api/embed/context', { bearer: tokens[0] })).status, 200, 'a retired token in its grace period');
  await request('POST', '/api/user', { body: { current_token: rotated.user_group.token, grace_period_seconds: 60 } });
  const embeds = await Promise.all(
    existing.slice(40, 50).map((user_group_id) => request('POST', '/api/embed_token', { body: { user_group_id, api_environment_tag: env } })),
  );
  await Promise.all(embeds.map(({ embed_token }) => caller.request('GET', '/api/embed/context', { bearer: embed_token })));
  const introspected = await Promise.all(embeds.map(({ embed_token }) => request('POST', '/api/embed/introspect', { body: { token: embed_token } })));
  assert.ok(
    introspected.every((answer) => answer.active === true),
    'the embed tokens are active',
  );
  // An embed token that names a viewer: its subject names the caller's account, this
  // environment and the id; the viewer's attributes never replace the group's properties; an
  // attribute named like a claim is refused before any lookup.
  const viewed = existing[50];
  const viewer = { id: id('viewer'), attributes: { owner: 'someone else', env: 'elsewhere', region: 'nowhere' } };
  const [withViewer, group] = await Promise.all([
    request('POST', '/api/embed_token', { body: { user_group_id: viewed, api_environment_tag: env, viewer } }),
    request('GET', '/api/user/lookup', { query: { user_group_id: viewed, api_environment_tag: env } }),
  ]);
  const claims = decodeJwt(withViewer.embed_token);
  assert.equal(claims.sub, `${claims.ugs_account}:${env}:${viewed}`);
  const { user_group_id, user_group_name, viewer_id, viewer_attributes, ...properties } = claims.ugs_variables as Record<string, unknown>;
  assert.deepEqual([user_group_id, viewer_id, viewer_attributes], [viewed, viewer.id, viewer.attributes]);
  assert.deepEqual(properties, group.user_group.computed_properties ?? {}, "the group's properties, as the group has them");
  const reserved = await caller.request('POST', '/api/embed_token', {
    token,
    body: { user_group_id: viewed, api_environment_tag: env, viewer: { id: 'v', attributes: { ugs_account: 'other' } } },
  });
  assert.equal(reserved.status, 400, reserved.text);
  const page = await request('GET', '/api/users', { query: { limit: '20', api_environment_tag: env } });
  await request('GET', '/api/users', { query: { limit: '20', cursor: page.next_cursor, api_environment_tag: env } });
  await request('GET', '/api/users', { query: { q: caller.search.id, api_environment_tag: env } });
  await request('GET', '/api/users', { query: { q: caller.search.name, api_environment_tag: env } });
  await request('GET', '/api/users', { query: { q: '\u{10FFFF}', api_environment_tag: env } });
  await request('GET', '/api/user/history', { query: { user_group_id: id('created'), api_environment_tag: env } });
  await request('DELETE', '/api/user', { query: { user_group_id: id('created'), api_environment_tag: env } });
  await request('GET', '/api/user/history', { query: { user_group_id: id('created'), api_environment_tag: env } }); // a deleted group's
  // The hierarchy: a parent and a child with tags and levels, read, renamed, moved, listed
  // by each filter and all of them at once, and deleted with its subtree.
  const parent = id('parent');
  const child = id('child');
  await request('POST', '/api/user', {
    body: { user_group_id: parent, group_tags: ['vip'], hierarchy_level: 'Customer', properties: { p: 1 }, api_environment_tag: env },
  });
  await request('POST', '/api/user', {
    body: { user_group_id: child, parent_user_group_id: parent, group_tags: ['vip'], hierarchy_level: 'User', api_environment_tag: env },
  });
  const family = await Promise.all(
    [child, child, parent].map((user_group_id) => request('GET', '/api/user', { body: { user_group_id, api_environment_tag: env } })),
  );
  await Promise.all(family.map((member) => caller.request('GET', '/api/embed/context', { bearer: member.user_group.token })));
  await request('PUT', '/api/user', { body: { user_group_id: child, group_tags: ['vip', 'new'], new_user_group_id: `${child}-2`, api_environment_tag: env } });
  await request('PUT', '/api/user', { body: { user_group_id: `${child}-2`, parent_user_group_id: null, api_environment_tag: env } });
  await request('PUT', '/api/user', { body: { user_group_id: `${child}-2`, parent_user_group_id: parent, hierarchy_level: 'User', api_environment_tag: env } });
  await request('PUT', '/api/user', { body: { user_group_id: parent, hierarchy_level: 'Customer', parent_user_group_id: null, api_environment_tag: env } });
  await request('GET', '/api/users', { query: { tag: 'vip', api_environment_tag: env } });
  await request('GET', '/api/users', { query: { parent_user_group_id: parent, api_environment_tag: env } });
  await request('GET', '/api/users', { query: { hierarchy_level: 'User', api_environment_tag: env } });
  await request('GET', '/api/users', { query: { q: run, tag: 'vip', parent_user_group_id: parent, hierarchy_level: 'User', api_environment_tag: env } });
  await request('GET', '/api/users', { query: { parent_user_group_id: parent, tag: 'vip', hierarchy_level: 'User', api_environment_tag: env } });
  await request('GET', '/api/user/history', { query: { user_group_id: `${child}-2`, api_environment_tag: env } });
  // The tag set: listed a page at a time and by prefix; a tag created, the family's tag renamed
  // onto it (a merge) and back, and tags deleted, named by query string and by body.
  const tagPage = await request('GET', '/api/group_tags', { query: { limit: '1', api_environment_tag: env } });
  await request('GET', '/api/group_tags', { query: { limit: '1', cursor: tagPage.next_cursor, api_environment_tag: env } });
  await request('GET', '/api/group_tags', { query: { q: 'vi', api_environment_tag: env } });
  await request('POST', '/api/group_tags', { body: { name: id('tag'), api_environment_tag: env } });
  await request('POST', '/api/group_tags/rename', { body: { name: 'vip', new_name: id('tag'), api_environment_tag: env } });
  await request('POST', '/api/group_tags/rename', { body: { name: id('tag'), new_name: 'vip', api_environment_tag: env } });
  await request('DELETE', '/api/group_tags', { query: { name: 'new', api_environment_tag: env } });
  await request('POST', '/api/group_tags', { body: { name: id('gone'), api_environment_tag: env } });
  await request('DELETE', '/api/group_tags', { body: { name: id('gone'), api_environment_tag: env } });
  await request('DELETE', '/api/user', { query: { user_group_id: parent, cascade: 'true', api_environment_tag: env } });
  // API tokens over HTTP: list, who am I, create, revoke, their history.
  await request('GET', '/api/api_tokens');
  await request('GET', '/api/api_tokens/current');
  const created = await request('POST', '/api/api_tokens', { body: { scopes: ['read'], allowed_environment: env, name: id('token') } });
  await request('DELETE', `/api/api_tokens/${created.api_token.id}`);
  await request('GET', '/api/api_tokens/history');
  // Bulk upsert: plain new groups (inserted at once), changes to existing ones (updated at once), a child of a new one, a failure.
  await request('POST', '/api/users/upsert', {
    body: {
      user_groups: [
        { user_group_id: id('bulk-1'), api_environment_tag: env, group_tags: ['vip'] },
        { user_group_id: id('bulk-2'), api_environment_tag: env },
        { user_group_id: existing[0], api_environment_tag: env, properties: { bulk: true } },
        ...existing.slice(1, 4).map((groupId) => ({ user_group_id: groupId, api_environment_tag: env, name: `bulk ${groupId}` })),
        { user_group_id: id('bulk-child'), api_environment_tag: env, parent_user_group_id: id('bulk-1') },
        { user_group_id: id('bulk-orphan'), api_environment_tag: env, parent_user_group_id: id('no-such-parent') },
        // A run of new groups long enough to be a part of its own on PostgreSQL, whose read of 120 ids must still probe the index.
        ...Array.from({ length: 120 }, (_, i) => ({ user_group_id: id(`bulk-run-${i}`), api_environment_tag: env, name: `Run ${i}` })),
      ],
    },
  });
  // Webhook endpoints: create, list, deliveries, a test send (to a port nobody listens on), rotate, delete.
  const endpoint = await request('POST', '/api/webhook_endpoints', { body: { url: 'http://127.0.0.1:9/hook', types: ['user_group.created'] } });
  const endpointId = endpoint.webhook_endpoint.id;
  await request('GET', '/api/webhook_endpoints');
  await request('GET', `/api/webhook_endpoints/${endpointId}/deliveries`);
  await request('POST', `/api/webhook_endpoints/${endpointId}/test`);
  await request('POST', `/api/webhook_endpoints/${endpointId}/rotate_secret`);
  await request('POST', `/api/webhook_endpoints/${endpointId}/enable`);
  await request('DELETE', `/api/webhook_endpoints/${endpointId}`);
  // Change events: the feed, filtered and not, from the start and from a cursor.
  await request('GET', '/api/events');
  await request('GET', '/api/events', { query: { after: '1', types: 'user_group.created,user_group.deleted', limit: '5' } });
  // Every route's example request (route-requests.ts), aimed at a group of the caller's made for it
  // alone, with a tag named after it, an embed token, an API token and a webhook endpoint.
  // The endpoints a row made are deleted after it, so that no run reaches the account's bound of endpoints.
  const endpointIds = async (): Promise<number[]> =>
    (await request('GET', '/api/webhook_endpoints')).webhook_endpoints.map((endpoint: { id: number }) => endpoint.id);
  const keptEndpoints = new Set(await endpointIds());
  let fresh = 0;
  for (const [key, row] of Object.entries(ROUTE_REQUESTS)) {
    const target = await exampleTarget(id(`example-${++fresh}`));
    for (const probe of [row.probe(target, id(`fresh-${fresh}`)), ...(row.workload?.(target, id(`fresh-${fresh}-more`)) ?? [])]) {
      if (probe.stream) continue; // an endless answer: the feed's reads are GET /api/events's
      const answer = await caller.request(probe.method, probe.url, {
        ...(row.byGroupToken ? { bearer: target.groupToken } : { token }),
        query: probe.query,
        body: probe.body,
        headers: probe.headers,
      });
      assert.ok(answer.status < 300, `${key}, its example request (test/helpers/route-requests.ts): ${answer.status} ${answer.text}`);
    }
    for (const endpointId of await endpointIds()) if (!keptEndpoints.has(endpointId)) await request('DELETE', `/api/webhook_endpoints/${endpointId}`);
  }

  async function exampleTarget(user_group_id: string): Promise<Target> {
    const group = await request('POST', '/api/user', { body: { user_group_id, api_environment_tag: env, group_tags: [`tag-${user_group_id}`] } });
    const embed = await request('POST', '/api/embed_token', { body: { user_group_id, api_environment_tag: env } });
    const apiToken = await request('POST', '/api/api_tokens', { body: { scopes: ['read'], allowed_environment: env } });
    const endpoint = await request('POST', '/api/webhook_endpoints', { body: { url: 'http://127.0.0.1:9/hook', types: QUIET_ENDPOINT.types } });
    return {
      id: user_group_id,
      env,
      groupToken: group.user_group.token,
      embedToken: embed.embed_token,
      apiTokenId: apiToken.api_token.id,
      webhookEndpointId: endpoint.webhook_endpoint.id,
    };
  }
}
