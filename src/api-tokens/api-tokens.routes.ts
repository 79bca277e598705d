// /api/api_tokens: an admin token manages its own account's API tokens (docs/api.md, "API
// tokens over HTTP"). HTTP in, service call, HTTP out; the rules live in
// auth/api-tokens.service.ts, shared with the command-line tool.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { DatabaseHandle } from '../db/database.ts';
import { actorOf, principalOf } from '../auth/authenticate.ts';
import * as service from './api-tokens.service.ts';
import * as operations from './api-tokens.operations.ts';
import type { AccountSlugs } from '../accounts/accounts.repository.ts';
import { apiTokenHistoryEntryJson, apiTokenJson } from './api-tokens.json.ts';

interface ApiTokenRouteDeps {
  database: DatabaseHandle;
  accountSlugs: AccountSlugs;
  now: () => Date;
}

export function registerApiTokenRoutes(app: FastifyInstance, deps: ApiTokenRouteDeps): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.get('/api/api_tokens', { schema: operations.listApiTokensOperation }, async (request) => {
    const principal = principalOf(request);
    const now = deps.now();
    const tokens = await service.listApiTokensAs(deps.database, principal);
    return { success: 1 as const, api_tokens: tokens.map((token) => apiTokenJson(token, now)) };
  });

  api.post('/api/api_tokens', { schema: operations.createApiTokenOperation, config: { idempotent: true } }, async (request, reply) => {
    const principal = principalOf(request);
    const now = deps.now();
    const { body } = request;
    const created = await service.createApiTokenAs(
      deps.database,
      principal,
      {
        name: body.name ?? null,
        scopes: body.scopes,
        allowedEnvironment: body.allowed_environment,
        defaultEnvironment: body.default_environment,
        expiresInSeconds: body.expires_in_seconds,
      },
      actorOf(request),
      now,
    );
    reply.code(201);
    return { success: 1 as const, token: created.token, api_token: apiTokenJson(created.listing, now) };
  });

  api.get('/api/api_tokens/current', { schema: operations.currentApiTokenOperation }, async (request) => {
    const principal = principalOf(request);
    const token = await service.currentApiToken(deps.database, principal);
    return { success: 1 as const, account: await deps.accountSlugs.get(principal.accountId), api_token: apiTokenJson(token, deps.now()) };
  });

  api.get('/api/api_tokens/history', { schema: operations.apiTokenHistoryOperation }, async (request) => {
    const entries = await service.apiTokenHistoryAs(deps.database, principalOf(request), request.query.limit ?? 100);

    return { success: 1 as const, entries: entries.map(apiTokenHistoryEntryJson) };
  });

  api.delete('/api/api_tokens/:id', { schema: operations.revokeApiTokenOperation }, async (request) => {
    const principal = principalOf(request);
    const now = deps.now();
    const revoked = await service.revokeApiTokenAs(deps.database, principal, request.params.id, actorOf(request), now);
    return { success: 1 as const, api_token: apiTokenJson(revoked, now) };
  });
}
