// The management API's authentication hook: every route behind it sees request.principal.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Actor } from '../audit/audit.repository.ts';
import type { ApiTokenAuthenticator } from './api-tokens.service.ts';
import type { Principal } from './principal.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export function registerApiTokenAuth(app: FastifyInstance, authenticator: ApiTokenAuthenticator): void {
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (request) => {
    request.principal = await authenticator.authenticate(request.headers.authorization);
  });
}

export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error('route is not behind registerApiTokenAuth');
  return request.principal;
}

export function actorOf(request: FastifyRequest): Actor {
  return { tokenId: principalOf(request).tokenId, requestId: request.id };
}
