// The embed demo's backend: stands for YOUR application's server. It holds the API token
// (never sent to a browser), gets or creates the user group of the signed-in customer, and
// mints a short-lived embed token bound to the page's origin and to one dashboard.
// Plain Node (>= 20), no dependencies. Run: UGS_API_TOKEN=ugs_api_… node examples/embed-demo/backend.mjs
import http from 'node:http';

const UGS_URL = (process.env.UGS_URL || 'http://127.0.0.1:3000').replace(/\/$/, '');
const API_TOKEN = process.env.UGS_API_TOKEN;
const PAGE_ORIGIN = process.env.PAGE_ORIGIN || 'http://127.0.0.1:8081';
const HOST = process.env.HOST || '127.0.0.1';
const PORT = Number(process.env.PORT ?? 8080);
const EMBED_ID = process.env.EMBED_ID || 'sales-overview';
const TOKEN_LIFETIME_SECONDS = Number(process.env.EMBED_TOKEN_SECONDS || 600);

if (!API_TOKEN) {
  console.error('set UGS_API_TOKEN to an API token (npx ugs token create --account demo)');
  process.exit(1);
}

// In a real application the customer comes from the signed-in user's session. Here the page
// says which of two demo customers it views as (?customer=), so two groups can be compared.
// Their ids match the sample rows of examples/postgres-rls.
const CUSTOMERS = {
  'acme-corp': { user_group_id: 'acme-corp', name: 'ACME Corporation', properties: { region: 'emea', plan: 'enterprise', seats: 42 } },
  globex: { user_group_id: 'globex', name: 'Globex', properties: { region: 'amer', plan: 'team', seats: 7 } },
};
// The people of a customer who may view its dashboard. A real backend takes the viewer from
// the signed-in user; the demo lets the page pick one (?viewer=), so two people of one
// customer can be compared. Their region attribute narrows the rows the data API answers.
const VIEWERS = {
  'acme-corp': {
    ada: {
      id: 'ada',
      name: 'Ada Lovelace',
      email: 'ada@acme.example',
      time_zone: 'Europe/London',
      permissions: ['view_orders'],
      attributes: { region: 'emea' },
    },
    bruno: {
      id: 'bruno',
      name: 'Bruno Díaz',
      email: 'bruno@acme.example',
      time_zone: 'America/New_York',
      permissions: ['view_orders', 'export_csv'],
      attributes: { region: 'amer' },
    },
  },
};
const DEFAULT_CUSTOMER = process.env.USER_GROUP_ID || 'acme-corp';
if (!CUSTOMERS[DEFAULT_CUSTOMER]) {
  console.error(`USER_GROUP_ID must be one of ${Object.keys(CUSTOMERS).join(', ')}`);
  process.exit(1);
}

async function callService(path, { method = 'POST', body, headers = {} } = {}) {
  const response = await fetch(`${UGS_URL}${path}`, {
    method,
    headers: { authorization: `Token ${API_TOKEN}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await response.json();
  if (json.success !== 1) {
    const error = new Error(`${path}: ${response.status} ${json.error?.code}: ${json.error?.message}`);
    error.status = response.status;
    throw error;
  }
  return json;
}

async function createEmbedSession(customer, viewer) {
  // Get or create: a GET with a JSON body, sent as POST with X-HTTP-Method-Override because
  // fetch() cannot send a body with GET. An existing group is returned unchanged.
  await callService('/api/user', { body: customer, headers: { 'x-http-method-override': 'GET' } });
  const { embed_token, expires_at } = await callService('/api/embed_token', {
    body: {
      user_group_id: customer.user_group_id,
      expires_in_seconds: TOKEN_LIFETIME_SECONDS,
      embed_id: EMBED_ID,
      origin: PAGE_ORIGIN,
      // The person viewing, when there is one: the token then says who, within the customer.
      ...(viewer ? { viewer } : {}),
    },
  });
  return { embed_token, expires_at, embed_id: EMBED_ID, context_url: `${UGS_URL}/api/embed/context` };
}

function send(res, status, body) {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    // The page is served from another origin: allow exactly that one.
    'access-control-allow-origin': PAGE_ORIGIN,
    // @ugs/embed measures the token's lifetime on this server's clock: let the page read Date.
    'access-control-expose-headers': 'Date, Retry-After',
    vary: 'Origin',
  });
  res.end(JSON.stringify(body));
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://backend');
  if (req.method === 'GET' && url.pathname === '/embed-session') {
    // A real backend authenticates its own user here before minting anything.
    const customerId = url.searchParams.get('customer') || DEFAULT_CUSTOMER;
    const customer = CUSTOMERS[customerId];
    if (!customer) return send(res, 404, { error: `no such demo customer; one of ${Object.keys(CUSTOMERS).join(', ')}` });
    const viewerId = url.searchParams.get('viewer');
    const viewer = viewerId ? VIEWERS[customerId]?.[viewerId] : undefined;
    if (viewerId && !viewer) {
      const known = Object.keys(VIEWERS[customerId] ?? {}).join(', ') || 'none';
      return send(res, 404, { error: `no such viewer of ${customerId}; one of ${known}` });
    }
    try {
      send(res, 200, await createEmbedSession(customer, viewer));
    } catch (err) {
      console.error(err.message);
      send(res, 502, { error: 'the user group service refused the request; see the backend log' });
    }
    return;
  }
  send(res, 404, { error: 'not found' });
});

server.listen(PORT, HOST, () => {
  const { port } = server.address();
  console.log(`embed demo backend listening on http://${HOST}:${port} (service ${UGS_URL}, page origin ${PAGE_ORIGIN})`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
process.on('SIGINT', () => server.close(() => process.exit(0)));
