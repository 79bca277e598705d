// The management API's authentication hook: every route behind it sees request.principal.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Actor } from '../audit/audit.repository.ts';
import type { Principal } from './principal.ts';

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

export function registerApiTokenAuth(app: FastifyInstance, authenticator: Authenticator): void {
  app.decorateRequest('principal', null);
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
