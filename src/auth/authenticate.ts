// The management API's authentication hook: every route behind it sees request.principal,
// and is refused before anything else of it runs when the token lacks the scope the route
// declares (route-access.ts).
import type { FastifyInstance, FastifyRequest, preParsingHookHandler, RouteOptions } from 'fastify';
import type { Actor } from '../audit/audit.repository.ts';
import { requireScope, type Principal, type Scope } from './principal.ts';
import { accessOf } from './route-access.ts';

/**
 * What verifies the API token of an Authorization header (api-tokens/api-token-authenticator.ts):
 * synchronously when it can, with a promise when it must ask the database; throws (or
 * rejects) with the 401.
 */
interface Authenticator {
  authenticate(authorization: string | undefined): Principal | Promise<Principal>;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

const asArray = <T>(value: T | T[] | undefined): T[] => (value === undefined ? [] : Array.isArray(value) ? value : [value]);

/**
 * The route's scope check: the first of its own preParsing hooks, so after authentication (the
 * plugin's onRequest hook) and the rate limit (a root preParsing hook: a refused request spends
 * its token's budget, as any other), and before the body is read, validated, or an
 * Idempotency-Key looked at.
 */
function scopeCheck(scope: Scope, action: string): preParsingHookHandler {
  return (request, _reply, payload, done) => {
    try {
      requireScope(principalOf(request), scope, action);
    } catch (err) {
      return done(err as Error);
    }
    done(null, payload);
  };
}

export function registerApiTokenAuth(app: FastifyInstance, authenticator: Authenticator): void {
  app.decorateRequest('principal', null);
  // Every route behind this hook declares that it takes an API token, and the scope it needs.
  app.addHook('onRoute', (route: RouteOptions) => {
    const access = accessOf(route);
    if (access?.token !== 'api') {
      throw new Error(`${[route.method].flat().join(',')} ${route.url} is behind API-token authentication: its operation must declare apiTokenAccess(…)`);
    }
    if (access.scope !== null) route.preParsing = [scopeCheck(access.scope, access.action), ...asArray(route.preParsing)] as RouteOptions['preParsing'];
  });
  // A callback hook: a token verified moments ago is answered synchronously, without the
  // promise an async hook costs on every request.
  app.addHook('onRequest', (request, _reply, done) => {
    let result: Principal | Promise<Principal>;
    try {
      result = authenticator.authenticate(request.headers.authorization);
    } catch (err) {
      return done(err as Error);
    }
    if (!(result instanceof Promise)) {
      request.principal = result;
      return done();
    }
    result.then(
      (principal) => {
        request.principal = principal;
        done();
      },
      (err: Error) => done(err),
    );
  });
}

export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error('route is not behind registerApiTokenAuth');
  return request.principal;
}

export function actorOf(request: FastifyRequest): Actor {
  return { kind: 'api_token', tokenId: principalOf(request).tokenId, requestId: request.id };
}
