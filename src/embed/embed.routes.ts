// The embed routes. /api/embed/* is called by browsers: it lives in its own encapsulated
// plugin, the only one with CORS, so the management API never sends CORS headers.
// POST /api/embed_token belongs to the management API and is registered behind its
// API-token hook.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import cors from '@fastify/cors';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { principalOf } from '../auth/authenticate.ts';
import { createEmbedTokenOperation, embedContextOperation } from './embed.operations.ts';
import { issueEmbedToken, resolveEmbedGroup, type EmbedDeps } from './embed.service.ts';
import { embedContextJson } from './embed-context.json.ts';
import { sendJson } from '../http/json-reply.ts';
import { notFoundHandler } from '../http/error-handler.ts';

const PREFLIGHT_MAX_AGE_SECONDS = 600;

export async function registerEmbedRoutes(app: FastifyInstance, deps: EmbedDeps & Pick<Config, 'corsOrigins'>): Promise<void> {
  await app.register(
    async (plugin) => {
      const embed = plugin.withTypeProvider<TypeBoxTypeProvider>();
      // @fastify/cors would answer an OPTIONS that is not a preflight with a text/plain 400;
      // every answer of this service is the JSON envelope, so refuse it first, in our words.
      embed.addHook('onRequest', async (request) => {
        if (request.method !== 'OPTIONS') return;
        const missing = ['origin', 'access-control-request-method'].filter((header) => !request.headers[header]);
        if (missing.length > 0) {
          throw new AppError('validation_failed', `OPTIONS here is only a CORS preflight: send ${missing.join(' and ')}`, {
            details: missing.map((field) => ({ field, issue: 'required' })),
          });
        }
      });
      await embed.register(cors, {
        origin: deps.corsOrigins === '*' ? '*' : deps.corsOrigins,
        // Tokens travel in the Authorization header, never in cookies.
        credentials: false,
        methods: ['GET'],
        allowedHeaders: ['Authorization', 'X-Request-Id'],
        exposedHeaders: ['X-Request-Id'],
        maxAge: PREFLIGHT_MAX_AGE_SECONDS,
      });
      // An unknown path or method under /api/embed/ answers with CORS headers too, so that
      // the page can read the error.
      embed.setNotFoundHandler(notFoundHandler(app));

      embed.get(
        '/context',
        {
          schema: embedContextOperation,
        },
        async (request, reply) => {
          const group = await resolveEmbedGroup(deps, {
            authorization: request.headers.authorization,
            origin: request.headers.origin,
            embedId: request.query.embed_id,
          });
          return sendJson(reply, 200, embedContextJson(group));
        },
      );
    },
    // The trailing slash matters: @fastify/cors adds an `OPTIONS *` route, which must become
    // /api/embed/* and not /api/embed*, which would also catch /api/embed_token.
    { prefix: '/api/embed/' },
  );
}

export function registerEmbedTokenRoute(app: FastifyInstance, deps: EmbedDeps): void {
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/api/embed_token',
    {
      schema: createEmbedTokenOperation,
    },
    async (request) => issueEmbedToken(deps, principalOf(request), request.body),
  );
}
