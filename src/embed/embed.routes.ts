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
import { AUTH_ERRORS, BODY_ERRORS, errorResponses } from '../http/envelope.schemas.ts';
import { EmbedContextQuery, EmbedContextResponse, EmbedTokenBody, EmbedTokenResponse } from './embed.schemas.ts';
import { issueEmbedToken, resolveEmbedGroup, type EmbedDeps } from './embed.service.ts';
import { embedContextJson } from './embed-context.json.ts';
import { sendJson } from '../http/json-reply.ts';
import { notFoundHandler } from '../http/error-handler.ts';

const TAGS = ['Embed'];
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
          schema: {
            tags: TAGS,
            operationId: 'getEmbedContext',
            summary: 'What an embedded dashboard needs to know about the user group viewing it',
            description: [
              'Called from the browser with `Authorization: Bearer <token>` (`Token <token>` is accepted too), where the token is a user group token',
              'or an embed token from `POST /api/embed_token`. Answers the group\'s public fields and its dashboard variables; never a token.',
              'A user group token works while it is the group\'s current token, and after a rotation with `grace_period_seconds` until the grace period ends.',
              'An embed token works until its expiry, the next rotation of its group\'s token (grace periods do not extend it) or the deletion of its group.',
              'Errors: `401 invalid_token` when the token is missing, malformed, unknown, expired, rotated or its group deleted (all look the same);',
              '`401 wrong_token_kind` for an API token (never give one to a browser);',
              '`403 origin_forbidden` when the embed token is bound to an origin and the `Origin` header is missing or differs;',
              '`403 embed_id_forbidden` when the embed token is bound to an embed_id and the `embed_id` query parameter is missing or differs.',
              'CORS: answers preflights for the configured origins (`UGS_CORS_ORIGINS`, default any origin), never with credentials.',
            ].join(' '),
            security: [{ userGroupToken: [] }],
            querystring: EmbedContextQuery,
            response: {
              200: EmbedContextResponse,
              ...errorResponses('invalid_token', 'wrong_token_kind', 'origin_forbidden', 'embed_id_forbidden', 'validation_failed'),
            },
          },
        },
        async (request, reply) => {
          const row = await resolveEmbedGroup(deps, {
            authorization: request.headers.authorization,
            origin: request.headers.origin,
            embedId: request.query.embed_id,
          });
          return sendJson(reply, 200, embedContextJson(row));
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
      schema: {
        tags: TAGS,
        operationId: 'createEmbedToken',
        summary: 'Issue a short-lived embed token for a user group',
        description: [
          'Called from your backend with an API token (the `read` scope suffices). Answers a signed compact JWS (HS256, the signing key named by `kid`)',
          'whose claims hold no secret: `iss`, `aud`, `sub` (the team_id), `gen` (the group\'s token generation), `iat`, `exp`, and `embed_id` and `origin` when bound.',
          'Hand it to the browser instead of the long-lived user group token: `GET /api/embed/context` accepts it until `expires_at`,',
          'the next rotation of the group\'s token, or the group\'s deletion. With `origin`, only requests with that `Origin` header are accepted;',
          'with `embed_id`, only requests naming it as the `embed_id` query parameter. Unknown group (or one of another account): `404 user_group_not_found`.',
        ].join(' '),
        security: [{ apiToken: [] }],
        body: EmbedTokenBody,
        response: { 200: EmbedTokenResponse, ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, 'user_group_not_found') },
      },
    },
    async (request) => issueEmbedToken(deps, principalOf(request), request.body),
  );
}
