// GET /metrics: counters and histograms move as requests are made, labelled by the route
// pattern (never the raw URL); database timings and pool gauges; one registry per app.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { DatabaseHandle } from '../src/db/database.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { createMetrics } from '../src/metrics/metrics.ts';
import type { RateLimitSettings } from '../src/http/rate-limit.ts';
import { buildTestApp, forEachBackend, issueTestToken, type HttpResult } from './helpers/harness.ts';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import net from 'node:net';
import { httpRequest, issueTokenWithCli, requestsInFlight, spawnServer } from './helpers/processes.ts';
import { eventually } from './helpers/wait.ts';
import { Scrape } from './helpers/prometheus.ts';

interface MetricsApp {
  app: FastifyInstance;
  handle: DatabaseHandle;
  token: string;
  call(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<Pick<HttpResult, 'status' | 'body'>>;
  scrape(): Promise<Scrape>;
  close(): Promise<void>;
}

/** An app wired as src/server.ts wires it: the metrics exist before the database, which reports its queries into them. */
async function startMetricsApp(database: TestDatabase, rateLimit?: Partial<RateLimitSettings>): Promise<MetricsApp> {
  const metrics = createMetrics();
  const { handle } = await openMigratedDatabase({ databaseUrl: database.url }, { onQuery: metrics.observeQuery });
  const { app } = await buildTestApp({ handle }, { config: rateLimit, metrics });
  await app.ready();
  const { token } = await issueTestToken(handle, { account: `acme${crypto.randomBytes(3).toString('hex')}` });
  return {
    app,
    handle,
    token,
    async call(method, url, body, headers = {}) {
      const response = await app.inject({
        method: method as never,
        url,
        headers: { authorization: `Token ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        payload: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.statusCode, body: response.body ? JSON.parse(response.body) : undefined };
    },
    async scrape() {
      const response = await app.inject({ method: 'GET', url: '/metrics' });
      assert.equal(response.statusCode, 200);
      return new Scrape(response.body);
    },
    async close() {
      await app.close();
      await handle.close();
    },
  };
}

const requests = 'ugs_http_requests_total';
const tokens = 'ugs_user_group_tokens_issued_total';

forEachBackend('metrics', (backend) => {
  let database: TestDatabase;
  let t: MetricsApp;
  before(async () => {
    database = await createTestDatabase(backend);
    t = await startMetricsApp(database);
  });
  after(async () => {
    await t?.close();
    await database?.drop();
  });

  it('GET /metrics answers the Prometheus text format without an API token', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    const scrape = new Scrape(response.body);
    assert.ok(scrape.has('process_cpu_user_seconds_total'), 'default process metrics are included');
    assert.ok(scrape.has('nodejs_heap_size_used_bytes'));
    assert.match(response.body, /# TYPE ugs_http_requests_total counter/);
    assert.match(response.body, /# TYPE ugs_http_request_duration_seconds histogram/);
  });

  it('requests are counted by method, route pattern and status; unknown paths share one "unmatched" series', async () => {
    const before = await t.scrape();
    const id = `m-${crypto.randomUUID()}`;
    assert.equal((await t.call('POST', '/api/user', { user_group_id: id })).status, 201);
    assert.equal((await t.call('POST', '/api/user', { user_group_id: id })).status, 409);
    assert.equal((await t.call('GET', `/api/user?user_group_id=${encodeURIComponent(id)}`)).status, 200);
    assert.equal((await t.call('GET', `/api/user?user_group_id=${encodeURIComponent(id)}-2`)).status, 201);
    assert.equal((await t.call('PUT', '/api/user', { user_group_id: `${id}-missing`, name: 'x' })).status, 404);
    assert.equal((await t.call('GET', '/api/users?limit=5')).status, 200);
    assert.equal((await t.call('GET', `/no/such/path/${id}`)).status, 404);
    assert.equal((await t.call('PATCH', '/api/user', { user_group_id: id })).status, 405);
    assert.equal((await t.call('GET', '/healthz')).status, 200);
    assert.equal((await t.call('GET', '/api/users', undefined, { authorization: 'Token nope' })).status, 401);
    const after = await t.scrape();

    const delta = (labels: Record<string, string>) => after.value(requests, labels) - before.value(requests, labels);
    assert.equal(delta({ method: 'POST', route: '/api/user', status: '201' }), 1);
    assert.equal(delta({ method: 'POST', route: '/api/user', status: '409' }), 1);
    assert.equal(delta({ method: 'GET', route: '/api/user', status: '200' }), 1);
    assert.equal(delta({ method: 'GET', route: '/api/user', status: '201' }), 1);
    assert.equal(delta({ method: 'PUT', route: '/api/user', status: '404' }), 1);
    assert.equal(delta({ method: 'GET', route: '/api/users', status: '200' }), 1);
    assert.equal(delta({ method: 'GET', route: '/api/users', status: '401' }), 1);
    assert.equal(delta({ method: 'GET', route: 'unmatched', status: '404' }), 1);
    assert.equal(delta({ method: 'PATCH', route: 'unmatched', status: '405' }), 1);
    assert.equal(delta({ method: 'GET', route: '/healthz', status: '200' }), 1);
    // The scrape before this one is itself counted.
    assert.ok(after.value(requests, { method: 'GET', route: '/metrics', status: '200' }) >= 1);

    // No series carries a raw URL: no ids, no query strings.
    for (const sample of after.samples) {
      for (const value of Object.values(sample.labels)) {
        assert.ok(!value.includes(id) && !value.includes('?'), `label value ${value} of ${sample.name} holds a raw URL`);
      }
    }
  });

  it('the latency histogram counts every request of a route, in seconds', async () => {
    const before = await t.scrape();
    for (let i = 0; i < 3; i++) assert.equal((await t.call('GET', '/healthz')).status, 200);
    const after = await t.scrape();
    const labels = { method: 'GET', route: '/healthz' };
    const count = (s: Scrape) => s.value('ugs_http_request_duration_seconds_count', labels);
    assert.equal(count(after) - count(before), 3);
    assert.equal(after.value('ugs_http_request_duration_seconds_bucket', { ...labels, le: '+Inf' }), count(after));
    const sum = after.value('ugs_http_request_duration_seconds_sum', labels);
    assert.ok(sum > 0 && sum < 10 * count(after), `sum ${sum} is in seconds`);
    const buckets = after.series('ugs_http_request_duration_seconds_bucket').filter((s) => s.labels.route === '/healthz');
    assert.ok(buckets.length > 5, 'several buckets');
  });

  it('user group tokens issued are counted by reason: create, get_or_create, rotate; failures count nothing', async () => {
    const before = await t.scrape();
    const id = `tok-${crypto.randomUUID()}`;
    const created = await t.call('POST', '/api/user', { user_group_id: id });
    assert.equal(created.status, 201);
    assert.equal((await t.call('POST', '/api/user', { user_group_id: id })).status, 409);
    assert.equal((await t.call('GET', `/api/user?user_group_id=${id}-b`)).status, 201);
    assert.equal((await t.call('GET', `/api/user?user_group_id=${id}-b`)).status, 200);
    const overridden = await t.call('POST', '/api/user', { user_group_id: `${id}-c`, properties: { a: 1 } }, { 'x-http-method-override': 'GET' });
    assert.equal(overridden.status, 201);
    const rotated = await t.call('POST', '/api/user', { current_token: created.body.user_group.token });
    assert.equal(rotated.status, 200);
    assert.equal((await t.call('POST', '/api/user', { current_token: created.body.user_group.token })).status, 404);
    const after = await t.scrape();

    const delta = (reason: string) => after.value(tokens, { reason }) - before.value(tokens, { reason });
    assert.equal(delta('create'), 1);
    assert.equal(delta('get_or_create'), 2);
    assert.equal(delta('rotate'), 1);
  });

  it('embed tokens issued are counted', async () => {
    const id = `emb-${crypto.randomUUID()}`;
    assert.equal((await t.call('POST', '/api/user', { user_group_id: id })).status, 201);
    const before = await t.scrape();
    const issued = await t.call('POST', '/api/embed_token', { user_group_id: id });
    assert.equal(issued.status, 200, JSON.stringify(issued.body));
    assert.equal((await t.call('POST', '/api/embed_token', { user_group_id: `${id}-missing` })).status, 404);
    const after = await t.scrape();
    assert.equal(after.value('ugs_embed_tokens_issued_total') - before.value('ugs_embed_tokens_issued_total'), 1);
  });

  it('database queries are timed by statement kind and outcome', async () => {
    const before = await t.scrape();
    assert.equal((await t.call('POST', '/api/user', { user_group_id: `db-${crypto.randomUUID()}` })).status, 201);
    const after = await t.scrape();
    const count = (s: Scrape, operation: string) => s.value('ugs_db_query_duration_seconds_count', { operation, outcome: 'ok' });
    assert.ok(count(after, 'select') > count(before, 'select'), 'the API token lookup is a select');
    assert.ok(count(after, 'insert') > count(before, 'insert'), 'creating a group inserts');
    for (const sample of after.series('ugs_db_query_duration_seconds_count')) {
      assert.match(sample.labels.operation, /^[a-z]+$/, 'operation is a keyword, never SQL text');
    }
  });

  it(backend === 'postgres' ? 'PostgreSQL pool gauges report total, idle and waiting connections' : 'SQLite has no pool gauges', async () => {
    assert.equal((await t.call('GET', '/api/users')).status, 200);
    const scrape = await t.scrape();
    if (backend === 'sqlite') {
      assert.equal(scrape.has('ugs_db_pool_connections_total'), false);
      return;
    }
    const total = scrape.value('ugs_db_pool_connections_total');
    const idle = scrape.value('ugs_db_pool_connections_idle');
    assert.ok(total >= 1, `total ${total}`);
    assert.ok(idle >= 0 && idle <= total, `idle ${idle} of ${total}`);
    assert.equal(scrape.value('ugs_db_pool_requests_waiting'), 0);
  });

  it('429 answers are counted in ugs_rate_limited_total by route', async () => {
    const limited = await startMetricsApp(database, { rateLimitMax: 2, rateLimitWindowMs: 60_000 });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await limited.call('GET', '/api/users')).status);
      assert.deepEqual(statuses, [200, 200, 429, 429]);
      const scrape = await limited.scrape();
      assert.equal(scrape.value('ugs_rate_limited_total', { route: '/api/users' }), 2);
      assert.equal(scrape.value(requests, { method: 'GET', route: '/api/users', status: '429' }), 2);
    } finally {
      await limited.close();
    }
  });

  it('each app counts in its own registry', async () => {
    const other = await startMetricsApp(database);
    try {
      const mine = (await t.scrape()).value(requests, { method: 'GET', route: '/readyz', status: '200' });
      for (let i = 0; i < 3; i++) assert.equal((await other.call('GET', '/readyz')).status, 200);
      assert.equal((await t.scrape()).value(requests, { method: 'GET', route: '/readyz', status: '200' }), mine);
      assert.equal((await other.scrape()).value(requests, { method: 'GET', route: '/readyz', status: '200' }), 3);
    } finally {
      await other.close();
    }
  });
});

forEachBackend('metrics of a real server process', (backend) => {
  it('ugs_http_requests_in_flight counts a request from its headers to its answer, and one whose client went away until it left', async () => {
    const database = await createTestDatabase(backend);
    const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    const { token } = await issueTokenWithCli(env);
    const server = await spawnServer(env);
    const inFlight = async () => new Scrape((await httpRequest(server.baseUrl, 'GET', '/metrics')).text).value('ugs_http_requests_in_flight') - 1;
    try {
      assert.equal(await inFlight(), 0, 'the scrape counts only itself');
      // Headers and half a body: the request has begun, and waits for the rest.
      const open = () => {
        const socket = net.connect(Number(new URL(server.baseUrl).port), '127.0.0.1');
        socket.on('error', () => undefined);
        socket.write(
          `POST /api/user HTTP/1.1\r\nHost: x\r\nAuthorization: Token ${token}\r\nContent-Type: application/json\r\nContent-Length: 30\r\n\r\n{"user_`,
        );
        return socket;
      };
      const [finished, abandoned] = [open(), open()];
      await requestsInFlight(server.baseUrl, 2);
      const answered = new Promise((resolve) => finished.once('data', resolve));
      finished.write('group_id": "in-flight"}');
      await answered;
      abandoned.destroy();
      await eventually('both requests left', async () => (await inFlight()) === 0);
    } finally {
      await server.stop('SIGTERM');
      await database.drop();
    }
  });

  it('src/server.ts times the database queries (migrations included) and serves /metrics', async () => {
    const database = await createTestDatabase(backend);
    const server = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') });
    try {
      const response = await fetch(`${server.baseUrl}/metrics`);
      assert.equal(response.status, 200);
      const scrape = new Scrape(await response.text());
      const queries = scrape.series('ugs_db_query_duration_seconds_count').reduce((sum, s) => sum + s.value, 0);
      assert.ok(queries > 0, 'queries were timed');
      assert.ok(scrape.has('process_resident_memory_bytes'));
    } finally {
      await server.stop('SIGTERM');
      await database.drop();
    }
  });
});
