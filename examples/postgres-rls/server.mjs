// A data API for embedded dashboards: the dashboard calls it with the embed token it got
// from its backend, and gets the viewer's rows. It holds no secret of the User Group
// Service and imports none of its code: it verifies the token against the service's public
// keys (JWKS), and lets PostgreSQL's row-level security decide which rows the viewer sees.
// Its own SQL has no tenant filter.
//
//   JWKS_URL=http://127.0.0.1:3000/.well-known/jwks.json UGS_ISSUER=http://127.0.0.1:3000 \
//   DATABASE_URL=postgres://ugs_reader@127.0.0.1:5432/analytics node server.mjs
import http from 'node:http';
import pg from 'pg';
import { createRemoteJWKSet, jwtVerify } from 'jose';

const UGS_ISSUER = (process.env.UGS_ISSUER || 'http://127.0.0.1:3000').replace(/\/+$/, '');
const JWKS_URL = process.env.JWKS_URL || `${UGS_ISSUER}/.well-known/jwks.json`;
// The embed_id your backend binds tokens to, or the service's default audience.
const AUDIENCE = (process.env.AUDIENCE || 'ugs:embed').split(',').map((a) => a.trim());
// Never longer than the service's Cache-Control max-age (300 s), which is shorter than the
// time a rotated-in key waits before it signs: the cached set always knows the signing key.
const JWKS_CACHE_SECONDS = Number(process.env.JWKS_CACHE_SECONDS || 300);
// Pages allowed to call this API from a browser (comma-separated); none by default.
const ALLOWED_ORIGINS = (process.env.ALLOWED_ORIGINS || '').split(',').map((o) => o.trim()).filter(Boolean);
const HOST = process.env.HOST || '127.0.0.1';
const PORT = Number(process.env.PORT ?? 8090);

if (!process.env.DATABASE_URL) {
  console.error('set DATABASE_URL to the database, as the role setup.mjs created (not the tables\' owner)');
  process.exit(1);
}

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
const jwks = createRemoteJWKSet(new URL(JWKS_URL), { cacheMaxAge: JWKS_CACHE_SECONDS * 1000 });

class Refusal extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The verified claims of the request's embed token. */
async function viewer(req) {
  const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  if (!match) throw new Refusal(401, 'missing_token', 'send the embed token as Authorization: Bearer <token>');
  let payload;
  try {
    ({ payload } = await jwtVerify(match[1], jwks, { issuer: UGS_ISSUER, audience: AUDIENCE, algorithms: ['ES256', 'RS256', 'EdDSA'], typ: 'ugs-embed+jwt' }));
  } catch (err) {
    throw new Refusal(401, 'invalid_token', `the embed token is not valid (${err.code ?? 'ERR_JWT_INVALID'})`);
  }
  // A token bound to a page is good only from that page.
  if (payload.ugs_origin !== undefined && req.headers.origin !== undefined && req.headers.origin !== payload.ugs_origin) {
    throw new Refusal(403, 'origin_forbidden', 'this embed token is bound to another origin');
  }
  return payload;
}

/** Runs `query` with the viewer's claims as transaction-local settings, which the policies read. */
async function asViewer(claims, query) {
  const client = await pool.connect();
  try {
    await client.query('begin');
    // is_local = true: the settings end with the transaction, so a pooled connection never
    // carries one viewer's identity into the next request.
    await client.query("select set_config('ugs.user_group_id', $1, true), set_config('ugs.variables', $2, true)", [
      claims.sub,
      JSON.stringify(claims.ugs_variables ?? {}),
    ]);
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
  '/orders': 'select id, product, amount::float8 as amount from orders order by id',
  '/notices': 'select id, region, notice from regional_notices order by id',
};

function send(req, res, status, body, extra = {}) {
  const headers = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', vary: 'Origin', ...extra };
  if (req.headers.origin && ALLOWED_ORIGINS.includes(req.headers.origin)) {
    headers['access-control-allow-origin'] = req.headers.origin;
    headers['access-control-allow-headers'] = 'Authorization';
    headers['access-control-allow-methods'] = 'GET';
  }
  res.writeHead(status, headers);
  res.end(status === 204 ? undefined : JSON.stringify(body));
}

const server = http.createServer(async (req, res) => {
  const { pathname } = new URL(req.url, 'http://data-api');
  if (req.method === 'OPTIONS') return send(req, res, 204);
  const query = QUERIES[pathname];
  if (req.method !== 'GET' || !query) return send(req, res, 404, { error: { code: 'not_found', message: 'GET /orders or GET /notices' } });
  try {
    const claims = await viewer(req);
    send(req, res, 200, { user_group_id: claims.sub, rows: await asViewer(claims, query) });
  } catch (err) {
    if (err instanceof Refusal) {
      return send(req, res, err.status, { error: { code: err.code, message: err.message } }, err.status === 401 ? { 'www-authenticate': 'Bearer' } : {});
    }
    console.error(err);
    send(req, res, 500, { error: { code: 'internal_error', message: 'the query failed; see the data API log' } });
  }
});

server.listen(PORT, HOST, () => {
  const { port } = server.address();
  console.log(`data API listening on http://${HOST}:${port} (tokens of ${UGS_ISSUER}, audience ${AUDIENCE.join(', ')})`);
});
const stop = () => server.close(() => pool.end().then(() => process.exit(0)));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
