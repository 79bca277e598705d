// What a route under /api needs of its caller, declared on the route's operation (the
// *.operations.ts files) where a reader of the route sees it, and checked before anything
// else of the route: the scope right after authentication and the rate limit, in the route's
// first preParsing hook (auth/authenticate.ts), so before the body is read, validated, or an
// Idempotency-Key is claimed or replayed (docs/api.md, "Scopes of the operations"). A route
// under /api without a declaration stops the app at start.
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { Scope } from './principal.ts';

/**
 * How a route treats an API token restricted to one environment (docs/api.md, "Scopes of the
 * operations"). Where the environment is known only from the body or from a row (the group a
 * `current_token` names), the service checks it; the route says which rule applies.
 * - `request`: the environment the request names (`api_environment_tag`, `allowed_environment`,
 *   or the group its `current_token` belongs to); another one is `403 environment_forbidden`;
 * - `items`: each item of a bulk request names its own; an item of another one fails alone;
 * - `token`: what the route reads or changes is limited to the token's environment; anything
 *   else answers as absent;
 * - `introspected`: an embed token of another environment is `active: false`;
 * - `none`: the route works on the account, in no environment.
 */
export type EnvironmentRule = 'request' | 'items' | 'token' | 'introspected' | 'none';
export const ENVIRONMENT_RULES: readonly EnvironmentRule[] = ['request', 'items', 'token', 'introspected', 'none'];

export type RouteAccess =
  | {
      /** An API token (`Authorization: Token|Bearer ugs_api_…`). */
      token: 'api';
      /** The scope every request of the route needs, or null: any valid API token. */
      scope: Scope | null;
      environment: EnvironmentRule;
      /** What the route does, as the `403 insufficient_scope` message says it ("updating a user group"). */
      action: string;
    }
  | {
      /** A user group token or an embed token (the embed side): its own group only, no scope. */
      token: 'user_group';
    };

/** The operation's fields that declare its access: the OpenAPI security requirement, and the declaration. */
export interface AccessFields {
  security: Record<string, string[]>[];
  'x-access': RouteAccess;
}

/**
 * A route called with an API token: `scope` (null for any), the environment rule, the action as
 * the 403 says it. Its security requirement names the two ways to send the token, as
 * alternatives (`Token` and `Bearer`: http/openapi.ts), each with the scope.
 */
export function apiTokenAccess(scope: Scope | null, environment: EnvironmentRule, action: string): AccessFields {
  const scopes = scope === null ? [] : [scope];
  return { security: [{ apiToken: scopes }, { apiTokenBearer: scopes }], 'x-access': { token: 'api', scope, environment, action } };
}

/** A route of the embed side, called with a user group token or an embed token. */
export function userGroupTokenAccess(): AccessFields {
  return { security: [{ userGroupOrEmbedToken: [] }], 'x-access': { token: 'user_group' } };
}

/** One registered route and what it declares. */
export interface DeclaredRoute {
  method: string;
  url: string;
  /** Router constraints, e.g. {"methodOverride":"GET"}; empty for none (as test/helpers/route-table.ts keys them). */
  constraints: string;
  access: RouteAccess;
}

const declared = new WeakMap<FastifyInstance, DeclaredRoute[]>();

/** The routes under /api of an app and their declared access, in the order they were registered. */
export function declaredRoutes(app: FastifyInstance): readonly DeclaredRoute[] {
  return declared.get(app) ?? [];
}

export function accessOf(route: Pick<RouteOptions, 'schema'>): RouteAccess | undefined {
  return (route.schema as { 'x-access'?: RouteAccess } | undefined)?.['x-access'];
}

/**
 * On the root app, before any route: every route under /api must declare its access (a
 * CORS preflight, which answers with no data, aside), or registering it throws and the app
 * does not start.
 */
export function requireDeclaredAccess(app: FastifyInstance): void {
  const routes: DeclaredRoute[] = [];
  declared.set(app, routes);
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith('/api/')) return;
    const methods = [route.method].flat();
    if (methods.every((method) => method === 'OPTIONS')) return;
    const access = accessOf(route);
    if (access === undefined) {
      throw new Error(
        `${methods.join(',')} ${route.url} declares no access: give its operation apiTokenAccess(…) or userGroupTokenAccess() (auth/route-access.ts)`,
      );
    }
    const constraints = route.constraints && Object.keys(route.constraints).length > 0 ? JSON.stringify(route.constraints) : '';
    for (const method of methods) routes.push({ method, url: route.url, constraints, access });
  });
}
