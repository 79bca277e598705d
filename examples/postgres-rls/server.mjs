// A data API for embedded dashboards: the dashboard calls it with the embed token it got
// from its backend, and gets the viewer's rows. It holds no secret of the User Group
// Service and imports none of its code: @fastify/jwt verifies the token against the
// service's public keys (JWKS, through get-jwks, as @fastify/jwt's own JWKS recipe does),
// it accepts only the tokens of its own account, and PostgreSQL's row-level security decides
// which rows the viewer sees. Its own SQL has no tenant filter.
//
//   UGS_ISSUER=http://127.0.0.1:3000 UGS_ACCOUNT=acme DATABASE_URL=postgres://ugs_reader@127.0.0.1:5432/analytics node server.mjs
import Fastify from 'fastify';
import cors from '@fastify/cors';
import fastifyJwt from '@fastify/jwt';
import buildGetJwks from 'get-jwks';
import pg from 'pg';
import { followRevocations } from '@ugs/client';

// The service's UGS_PUBLIC_URL: the iss of its tokens, and where its keys are.
const UGS_ISSUER = (process.env.UGS_ISSUER || 'http://127.0.0.1:3000').replace(/\/+$/, '');
// Your account's slug. Every account of the service signs with the same keys and the same
// issuer: a genuine token of another account is still not yours.
const UGS_ACCOUNT = process.env.UGS_ACCOUNT;
// The embed_id your backend binds tokens to, or the service's default audience.
const AUDIENCE = (process.env.AUDIENCE || 'ugs:embed').split(',').map((a) => a.trim());
// Never longer than the service's Cache-Control max-age (300 s), which is shorter than the
// time a rotated-in key waits before it signs. get-jwks caches each key by kid, so a token
// of a key it has not seen fetches the set again at once.
const JWKS_CACHE_SECONDS = Number(process.env.JWKS_CACHE_SECONDS || 300);
// Pages allowed to call this API from a browser (comma-separated); none by default.
const ALLOWED_ORIGINS = (process.env.ALLOWED_ORIGINS || '')
  .split(',')
  .map((o) => o.trim())
  .filter(Boolean);
const HOST = process.env.HOST || '127.0.0.1';
const PORT = Number(process.env.PORT ?? 8090);

if (!UGS_ACCOUNT) {
  console.error('set UGS_ACCOUNT to the slug of the account whose embed tokens this API serves');
  process.exit(1);
}
if (!process.env.DATABASE_URL) {
  console.error("set DATABASE_URL to the database, as the role setup.mjs created (not the tables' owner)");
  process.exit(1);
}

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
// Optional: an API token (read scope) of the account whose dashboards this API serves. With
// it, the API follows the service's change events and refuses embed tokens whose group was
// deleted, or whose group's token was rotated, since they were issued: as the service does,
// without asking it per request (docs/verify-embed-tokens.md, "Refusing revoked tokens offline").
const revocations = process.env.UGS_API_TOKEN
  ? followRevocations({
      baseUrl: process.env.UGS_URL || UGS_ISSUER,
      apiToken: process.env.UGS_API_TOKEN,
      onError: (err) => console.error(`revocations: ${err.message}; reconnecting`),
    })
  : undefined;
const getJwks = buildGetJwks({ issuersWhitelist: [UGS_ISSUER], ttl: JWKS_CACHE_SECONDS * 1000 });
const app = Fastify();

await app.register(cors, { origin: ALLOWED_ORIGINS, methods: ['GET'], allowedHeaders: ['Authorization'] });
await app.register(fastifyJwt, {
  decode: { complete: true },
  // The key the token's kid names, from the issuer you trust (never the token's own iss).
  // get-jwks converts keys with jwk-to-pem, which has no EdDSA: ES256 (the service's
  // default) and RS256 keys only.
  secret: (_request, token) => getJwks.getPublicKey({ domain: UGS_ISSUER, kid: token.header.kid, alg: token.header.alg }),
  verify: {
    algorithms: ['ES256', 'RS256'],
    allowedIss: UGS_ISSUER,
    allowedAud: AUDIENCE,
    requiredClaims: ['sub', 'exp', 'nbf', 'ugs_account', 'ugs_environment', 'ugs_user_group_id'],
  },
});

class Refusal extends Error {
  constructor(statusCode, code, message) {
    super(message);
    this.statusCode = statusCode;
    this.code = code;
  }
}

/** The verified claims of the request's embed token. */
async function claimsOf(request) {
  if (!/^Bearer\s+\S+$/i.test(request.headers.authorization ?? '')) {
    throw new Refusal(401, 'missing_token', 'send the embed token as Authorization: Bearer <token>');
  }
  let claims;
  try {
    claims = await request.jwtVerify();
  } catch (err) {
    throw new Refusal(401, 'invalid_token', `the embed token is not valid (${err.code ?? 'FST_JWT_AUTHORIZATION_TOKEN_INVALID'})`);
  }
  // Signed by the service, but for whom: a group is (environment, user_group_id) within an
  // account, and this API serves one account.
  if (claims.ugs_account !== UGS_ACCOUNT) throw new Refusal(401, 'invalid_token', 'the embed token is of another account');
  const revoked = revocations?.check(claims);
  if (revoked) throw new Refusal(401, 'invalid_token', `the embed token is no longer valid (${revoked})`);
  // A token bound to a page is good only from that page.
  if (claims.ugs_origin !== undefined && request.headers.origin !== undefined && request.headers.origin !== claims.ugs_origin) {
    throw new Refusal(403, 'origin_forbidden', 'this embed token is bound to another origin');
  }
  return claims;
}

/** Runs `query` with the viewer's claims as transaction-local settings, which the policies read. */
async function asViewer(claims, query) {
  const client = await pool.connect();
  try {
    await client.query('begin');
    // is_local = true: the settings end with the transaction, so a pooled connection never
    // carries one viewer's identity into the next request. A token that names no person
    // (no ugs_viewer) is the whole group: '' says so to the policies.
    await client.query(
      "select set_config('ugs.environment', $1, true), set_config('ugs.user_group_id', $2, true), set_config('ugs.variables', $3, true), set_config('ugs.viewer', $4, true)",
      [
        claims.ugs_environment,
        claims.ugs_user_group_id,
        JSON.stringify(claims.ugs_variables ?? {}),
        claims.ugs_viewer ? JSON.stringify(claims.ugs_viewer) : '',
      ],
    );
    const result = await client.query(query);
    await client.query('commit');
    return result.rows;
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

const QUERIES = {
  // No WHERE on the tenant: the database adds it.
  '/orders': 'select id, region, product, amount::float8 as amount from orders order by id',
  '/notices': 'select id, region, notice from regional_notices order by id',
};

app.addHook('onSend', async (_request, reply) => {
  reply.header('cache-control', 'no-store');
});
for (const [path, query] of Object.entries(QUERIES)) {
  app.get(path, async (request) => {
    const claims = await claimsOf(request);
    // The group (its environment and id), and the person within it when the token names one (ugs_viewer).
    return {
      environment: claims.ugs_environment,
      user_group_id: claims.ugs_user_group_id,
      viewer_id: claims.ugs_viewer?.id ?? null,
      rows: await asViewer(claims, query),
    };
  });
}
app.setNotFoundHandler((_request, reply) => reply.code(404).send({ error: { code: 'not_found', message: 'GET /orders or GET /notices' } }));
app.setErrorHandler((err, _request, reply) => {
  if (err instanceof Refusal) {
    if (err.statusCode === 401) reply.header('www-authenticate', 'Bearer');
    return reply.code(err.statusCode).send({ error: { code: err.code, message: err.message } });
  }
  console.error(err);
  return reply.code(500).send({ error: { code: 'internal_error', message: 'the query failed; see the data API log' } });
});

await revocations?.ready; // every revocation the service keeps, before the first request
const address = await app.listen({ host: HOST, port: PORT });
console.log(`data API listening on ${address} (tokens of ${UGS_ISSUER}, account ${UGS_ACCOUNT}, audience ${AUDIENCE.join(', ')})`);
const stop = () =>
  app
    .close()
    .then(() => revocations?.close())
    .then(() => pool.end())
    .then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
