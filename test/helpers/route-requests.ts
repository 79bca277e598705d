// One example request of every route of the app (operational routes aside), and what it
// answers aimed at another account's object: the authorization matrix
// (test/authorization-matrix.test.ts) sends each against every way a caller can be wrong, and
// the workload of every operation (test/helpers/workload.ts), which the query-plan and
// tenant-isolation suites run, sends each as the caller, aimed at a group of its own. A new
// route gets its row here, once; until then every one of those suites fails naming it
// (routesWithoutARow).
import type { FastifyInstance } from 'fastify';
import { isOperational, routeTable } from './route-table.ts';

export interface Probe {
  method: string;
  url: string;
  body?: unknown;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  /** The answer is an endless stream (Server-Sent Events): only its start is read. */
  stream?: boolean;
}
export interface Target {
  /** A user_group_id and the environment it lives in. */
  id: string;
  env: 'Customer' | 'Testing';
  groupToken: string;
  /** An embed token of the group, issued by its own account. */
  embedToken: string;
  /** An API token of the group's account (not the caller's only admin token). */
  apiTokenId: number;
  /** A webhook endpoint of the group's account, in the group's environment or in every one. */
  webhookEndpointId: number;
}
export interface Expect {
  status: number | number[];
  code?: string;
}
export interface RouteRow {
  /** A request this route answers, aimed at `target`. */
  probe(target: Target, fresh: string): Probe;
  /** Aimed at another account's object, with a valid token of this account. */
  otherAccount?: Expect;
  /** The probe needs `write` though the route declares `read`: get-or-create of a group that does not exist creates it. */
  probeNeedsWrite?: boolean;
  /** The requests the replay column sends with an Idempotency-Key, one per operation of the route (default: the probe). */
  idempotentProbes?(target: Target, fresh: string): Probe[];
  /** The probe is the embed side's: sent with the target's group token as bearer, never an API token. */
  byGroupToken?: true;
  /** More requests of the route the workload sends besides the probe, for the statements other parameters make. */
  workload?(target: Target, fresh: string): Probe[];
}

export const OVERRIDE = { 'x-http-method-override': 'GET' };
// Public, so that creating it passes the SSRF check; of a type nothing here produces, so that nothing is sent.
export const QUIET_ENDPOINT = { url: 'http://93.184.216.34/hook', types: ['embed_key.retired'] };
export const ROUTE_REQUESTS: Record<string, RouteRow> = {
  'GET /api/user': {
    probeNeedsWrite: true, // the probe names a group that does not exist in the caller's account: get-or-create creates
    probe: (t, fresh) => ({ method: 'GET', url: '/api/user', query: { user_group_id: fresh, api_environment_tag: t.env } }),
    // The caller's own namesake is created: another account's group is never returned.
    otherAccount: { status: 201 },
  },
  'POST /api/user {"methodOverride":"GET"}': {
    probeNeedsWrite: true,
    probe: (t, fresh) => ({ method: 'POST', url: '/api/user', headers: OVERRIDE, body: { user_group_id: fresh, api_environment_tag: t.env } }),
    otherAccount: { status: 201 },
  },
  'POST /api/user': {
    probe: (t) => ({ method: 'POST', url: '/api/user', body: { current_token: t.groupToken } }),
    otherAccount: { status: 404, code: 'token_not_found' },
    // Rotate, and create.
    idempotentProbes: (t, fresh) => [
      { method: 'POST', url: '/api/user', body: { current_token: t.groupToken } },
      { method: 'POST', url: '/api/user', body: { user_group_id: fresh, api_environment_tag: t.env } },
    ],
  },
  'PUT /api/user': {
    probe: (t) => ({ method: 'PUT', url: '/api/user', body: { user_group_id: t.id, api_environment_tag: t.env, name: 'changed by a probe' } }),
    otherAccount: { status: 404, code: 'user_group_not_found' },
  },
  'DELETE /api/user': {
    probe: (t) => ({ method: 'DELETE', url: '/api/user', query: { user_group_id: t.id, api_environment_tag: t.env } }),
    otherAccount: { status: 404, code: 'user_group_not_found' },
  },
  'POST /api/users/upsert': {
    // The item's environment decides: an item of a forbidden environment fails alone (200), so the probe names none.
    probe: (_t, fresh) => ({ method: 'POST', url: '/api/users/upsert', body: { user_groups: [{ user_group_id: fresh }] } }),
    otherAccount: { status: 200 }, // created in the caller's account: there is no way to name another
  },
  'GET /api/users': {
    probe: (t) => ({ method: 'GET', url: '/api/users', query: { api_environment_tag: t.env, q: t.id } }),
    otherAccount: { status: 200 },
  },
  'GET /api/user/lookup': {
    probe: (t) => ({ method: 'GET', url: '/api/user/lookup', query: { user_group_id: t.id, api_environment_tag: t.env } }),
    otherAccount: { status: 404, code: 'user_group_not_found' },
  },
  'GET /api/user/history': {
    probe: (t) => ({ method: 'GET', url: '/api/user/history', query: { user_group_id: t.id, api_environment_tag: t.env } }),
    otherAccount: { status: 200 },
  },
  // Each group of the suite carries a tag named after it (createGroup below).
  'GET /api/group_tags': {
    probe: (t) => ({ method: 'GET', url: '/api/group_tags', query: { api_environment_tag: t.env, q: `tag-${t.id}` } }),
    otherAccount: { status: 200 }, // the caller's own tags only
  },
  'POST /api/group_tags': {
    probe: (t, fresh) => ({ method: 'POST', url: '/api/group_tags', body: { name: `tag-${fresh}`, api_environment_tag: t.env } }),
    otherAccount: { status: 201 }, // created in the caller's account: there is no way to name another
  },
  'POST /api/group_tags/rename': {
    probe: (t, fresh) => ({
      method: 'POST',
      url: '/api/group_tags/rename',
      body: { name: `tag-${t.id}`, new_name: `renamed-${fresh}`, api_environment_tag: t.env },
    }),
    otherAccount: { status: 404, code: 'group_tag_not_found' },
  },
  'DELETE /api/group_tags': {
    probe: (t) => ({ method: 'DELETE', url: '/api/group_tags', query: { name: `tag-${t.id}`, api_environment_tag: t.env } }),
    otherAccount: { status: 404, code: 'group_tag_not_found' },
  },
  'POST /api/embed_token': {
    probe: (t) => ({ method: 'POST', url: '/api/embed_token', body: { user_group_id: t.id, api_environment_tag: t.env } }),
    otherAccount: { status: 404, code: 'user_group_not_found' },
  },
  'POST /api/embed/introspect': {
    probe: (t) => ({ method: 'POST', url: '/api/embed/introspect', body: { token: t.embedToken } }),
    otherAccount: { status: 200 }, // active: false
  },
  'GET /api/api_tokens': {
    probe: () => ({ method: 'GET', url: '/api/api_tokens' }),
    otherAccount: { status: 200 }, // the caller's own tokens only
  },
  'GET /api/api_tokens/current': {
    probe: () => ({ method: 'GET', url: '/api/api_tokens/current' }),
    otherAccount: { status: 200 }, // the caller's own token
  },
  'POST /api/api_tokens': {
    // A token restricted to one environment can create tokens for that environment only.
    probe: (t) => ({ method: 'POST', url: '/api/api_tokens', body: { scopes: ['read'], allowed_environment: t.env } }),
    otherAccount: { status: 201 }, // created in the caller's account: there is no way to name another
  },
  'DELETE /api/api_tokens/:id': {
    probe: (t) => ({ method: 'DELETE', url: `/api/api_tokens/${t.apiTokenId}` }),
    otherAccount: { status: 404, code: 'api_token_not_found' },
  },
  'GET /api/api_tokens/history': {
    probe: () => ({ method: 'GET', url: '/api/api_tokens/history' }),
    otherAccount: { status: 200 },
  },
  'GET /api/events': {
    probe: () => ({ method: 'GET', url: '/api/events' }),
    otherAccount: { status: 200 },
  },
  'GET /api/events/stream': {
    probe: () => ({ method: 'GET', url: '/api/events/stream', stream: true }),
    otherAccount: { status: 200 }, // the caller's own events from now on: there is no way to name another account
  },
  'GET /api/webhook_endpoints': {
    probe: () => ({ method: 'GET', url: '/api/webhook_endpoints' }),
    otherAccount: { status: 200 }, // the caller's own endpoints only
  },
  'POST /api/webhook_endpoints': {
    probe: () => ({ method: 'POST', url: '/api/webhook_endpoints', body: QUIET_ENDPOINT }),
    otherAccount: { status: 201 }, // created in the caller's account: there is no way to name another
  },
  'DELETE /api/webhook_endpoints/:id': {
    probe: (t) => ({ method: 'DELETE', url: `/api/webhook_endpoints/${t.webhookEndpointId}` }),
    otherAccount: { status: 404, code: 'webhook_endpoint_not_found' },
  },
  'POST /api/webhook_endpoints/:id/rotate_secret': {
    probe: (t) => ({ method: 'POST', url: `/api/webhook_endpoints/${t.webhookEndpointId}/rotate_secret` }),
    otherAccount: { status: 404, code: 'webhook_endpoint_not_found' },
  },
  'POST /api/webhook_endpoints/:id/enable': {
    probe: (t) => ({ method: 'POST', url: `/api/webhook_endpoints/${t.webhookEndpointId}/enable` }),
    otherAccount: { status: 404, code: 'webhook_endpoint_not_found' },
  },
  'GET /api/webhook_endpoints/:id/deliveries': {
    probe: (t) => ({ method: 'GET', url: `/api/webhook_endpoints/${t.webhookEndpointId}/deliveries` }),
    otherAccount: { status: 404, code: 'webhook_endpoint_not_found' },
  },
  'POST /api/webhook_endpoints/:id/test': {
    probe: (t) => ({ method: 'POST', url: `/api/webhook_endpoints/${t.webhookEndpointId}/test` }),
    otherAccount: { status: 404, code: 'webhook_endpoint_not_found' },
  },
  'GET /api/embed/context': {
    byGroupToken: true,
    probe: () => ({ method: 'GET', url: '/api/embed/context' }),
  },
};

/** The routes of the app (operational ones aside) without a row above, and the rows that are no route. */
export function routesWithoutARow(app: FastifyInstance): { missing: string[]; stale: string[] } {
  const routes = routeTable(app)
    .filter((route) => !isOperational(route.url))
    .map((route) => route.key);
  return { missing: routes.filter((key) => !(key in ROUTE_REQUESTS)), stale: Object.keys(ROUTE_REQUESTS).filter((key) => !routes.includes(key)) };
}

/** The message of a suite that finds a route without a row. */
export const WITHOUT_A_ROW =
  'routes without a row in ROUTE_REQUESTS (test/helpers/route-requests.ts), and rows that are no route: give each route its example request there';
