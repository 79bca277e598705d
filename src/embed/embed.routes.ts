// The embed routes. /api/embed/* is called by browsers: it lives in its own encapsulated
// plugin, with CORS for the configured origins, so the management API never sends CORS
// headers. POST /api/embed_token and POST /api/embed/introspect belong to the management API
// and are registered behind its API-token hook. /.well-known/jwks.json and the discovery
// document beside it are public: their own plugin, with CORS for any origin.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import cors from '@fastify/cors';
import type { Config, EmbedSigningAlgorithm } from '../config.ts';
import { AppError } from '../foundations/errors.ts';
import { principalOf } from '../auth/authenticate.ts';
import * as operations from './embed.operations.ts';
import * as service from './embed.service.ts';
import { JWKS_MAX_AGE_SECONDS, type EmbedSigningKeys } from './signing-keys.ts';
import { BODY_LIMIT_BYTES } from '../http/json-body.ts';
import { embedContextJson } from './embed-context.json.ts';
import { INACTIVE_INTROSPECTION_JSON, activeIntrospectionJson } from './introspection.json.ts';
import { sendJson } from '../http/json-reply.ts';
import { notFoundHandler } from '../http/error-handler.ts';
import type { DiscoveryView } from './embed.schemas.ts';

const PREFLIGHT_MAX_AGE_SECONDS = 600;
const INTROSPECT_PATH = '/api/embed/introspect';

export async function registerEmbedRoutes(app: FastifyInstance, deps: service.EmbedDeps & Pick<Config, 'corsOrigins'>): Promise<void> {
  await app.register(
    async (plugin) => {
      const embed = plugin.withTypeProvider<TypeBoxTypeProvider>();
      // @fastify/cors would answer an OPTIONS that is not a preflight with a text/plain 400;
      // every answer of this service is the JSON envelope, so refuse it first, in our words.
      embed.addHook('onRequest', async (request) => {
        if (request.method !== 'OPTIONS') return;
        if (request.url.startsWith(INTROSPECT_PATH)) {
          // Not a browser route: the management API answers no preflight.
          throw new AppError('method_not_allowed', `OPTIONS is not allowed on ${INTROSPECT_PATH}; use POST`, { headers: { allow: 'POST' } });
        }
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
          schema: operations.embedContextOperation,
        },
        async (request, reply) => {
          const group = await service.resolveEmbedGroup(deps, {
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

export function registerEmbedTokenRoute(app: FastifyInstance, deps: service.EmbedDeps): void {
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/api/embed_token',
    {
      schema: operations.createEmbedTokenOperation,
      config: { idempotent: true, runsWithoutKeyWhilePrimaryAway: true },
    },
    async (request) => service.issueEmbedToken(deps, principalOf(request), request.body),
  );
}

/** RFC 7662 sends the token form-encoded; JSON is accepted too, like every other route. */
export function registerIntrospectionRoute(app: FastifyInstance, deps: service.EmbedDeps): void {
  app.register(async (plugin) => {
    plugin.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: BODY_LIMIT_BYTES }, (_request, text, done) => {
      const params = new URLSearchParams(text as string);
      const repeated = [...new Set(params.keys())].filter((name) => params.getAll(name).length > 1);
      if (repeated.length > 0) {
        // RFC 6749 §3.1: a parameter must not be included more than once.
        done(
          new AppError('validation_failed', `${repeated.join(', ')} is sent more than once`, {
            details: repeated.map((field) => ({ field, issue: 'repeated' })),
          }),
        );
        return;
      }
      done(null, Object.fromEntries(params));
    });
    plugin.withTypeProvider<TypeBoxTypeProvider>().post(INTROSPECT_PATH, { schema: operations.introspectOperation }, async (request, reply) => {
      // RFC 7662 §2.2: the answer is about a credential; no cache may keep it.
      reply.header('pragma', 'no-cache');
      const active = await service.introspectEmbedToken(deps, principalOf(request), request.body.token);
      return sendJson(reply, 200, active ? activeIntrospectionJson(active) : INACTIVE_INTROSPECTION_JSON);
    });
  });
}

/**
 * RFC 7517: the public keys of embed tokens, for verifiers anywhere; and the metadata that
 * lets a verifier configured with only the issuer find them (OpenID Connect Discovery's path
 * and field names, which libraries read; the service is no login provider).
 */
export async function registerWellKnownRoutes(app: FastifyInstance, keys: EmbedSigningKeys, issuer: string): Promise<void> {
  await app.register(
    async (plugin) => {
      // Public keys: any page may read them.
      await plugin.register(cors, { origin: '*', credentials: false, methods: ['GET'], maxAge: PREFLIGHT_MAX_AGE_SECONDS });
      plugin.withTypeProvider<TypeBoxTypeProvider>().get('jwks.json', { schema: operations.jwksOperation }, async (request, reply) => {
        reply.header('cache-control', `public, max-age=${JWKS_MAX_AGE_SECONDS}`);
        // Without `alg`, only the keys every verifier reads (docs/api.md, "Keys").
        const algorithms = request.query.alg?.split(',') as EmbedSigningAlgorithm[] | undefined;
        return sendJson(reply, 200, await keys.jwks(algorithms));
      });
      plugin.get('openid-configuration', { schema: operations.discoveryOperation }, async (_request, reply): Promise<DiscoveryView> => {
        reply.header('cache-control', `public, max-age=${JWKS_MAX_AGE_SECONDS}`);
        return { issuer, jwks_uri: `${issuer}/.well-known/jwks.json`, id_token_signing_alg_values_supported: await keys.algorithms() };
      });
    },
    // As for /api/embed/: the cors plugin's `OPTIONS *` route must stay under this prefix.
    { prefix: '/.well-known/' },
  );
}
