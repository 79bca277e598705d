// Random and mutated requests against every route: no answer is a 5xx, every answer is the
// API's envelope with a request id, and a request that fails changes nothing.
// Reproduce a failure with FUZZ_SEED=<seed printed by fast-check>; FUZZ_RUNS sets the runs.
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { forEachBackend, useTestApp } from './helpers/harness.ts';
import { routeTable } from './helpers/route-table.ts';
import { generateToken } from '../src/auth/token-format.ts';

const RUNS = Number(process.env.FUZZ_RUNS || 1500);
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : Date.now() % 2 ** 31;

const FIELDS = [
  'user_group_id',
  'name',
  'mapping',
  'properties',
  'is_demo_group',
  'api_environment_tag',
  'current_token',
  'grace_period_seconds',
  'limit',
  'cursor',
  'q',
  'expires_in_seconds',
  'embed_id',
  'origin',
  'user_groupid',
  '__proto__',
  'constructor',
];

interface FuzzRequest {
  method: string;
  url: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  payload: string | undefined;
}

function arbitraries(paths: string[], credentials: () => string[]) {
  const text = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.constantFrom('', ' ', 'Customer', 'Testing', 'customer', 'g1', 'g2', '0', '-1', '1e3', 'null', 'true', '\u0000', 'x'.repeat(300)),
  );
  const scalar = fc.oneof(text, fc.integer(), fc.double(), fc.boolean(), fc.constant(null));
  const value = fc.oneof(
    { weight: 3, arbitrary: scalar },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
    fc.dictionary(text, scalar, { maxKeys: 4 }),
  );
  const fieldName = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...FIELDS) }, { weight: 1, arbitrary: text });
  // Mostly well-shaped bodies with wrong values, some raw JSON, some garbage.
  const bodyObject = fc.dictionary(fieldName, value, { maxKeys: 6 });
  const validish = fc.record(
    {
      user_group_id: fc.oneof(fc.constantFrom('g1', 'g2', 'g3'), text, fc.integer()),
      name: text,
      api_environment_tag: fc.constantFrom('Customer', 'Testing', 'Other'),
      properties: fc.oneof(fc.constant(null), fc.dictionary(text, value, { maxKeys: 3 })),
      mapping: fc.oneof(fc.constant(null), fc.dictionary(text, fc.oneof(text, fc.integer()), { maxKeys: 3 })),
      is_demo_group: fc.oneof(fc.boolean(), scalar),
    },
    { requiredKeys: [] },
  );
  const payload = fc.oneof(
    { weight: 2, arbitrary: fc.constant(undefined) },
    { weight: 4, arbitrary: validish.map((b) => JSON.stringify(b)) },
    { weight: 3, arbitrary: bodyObject.map((b) => JSON.stringify(b)) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((b) => JSON.stringify(b)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 60 }) },
    {
      weight: 1,
      arbitrary: fc.constantFrom('{"__proto__":{"x":1}}', '{"a":{"constructor":{"prototype":{}}}}', '{', '[]', '""', 'null', '{"user_group_id":"g1",}'),
    },
  );
  const credential = fc.oneof(
    { weight: 5, arbitrary: fc.constant('valid') },
    { weight: 1, arbitrary: fc.constantFrom('none', 'group', 'garbage', 'unknown', 'readonly') },
  );
  const headers = fc.record(
    {
      'content-type': fc.constantFrom(
        'application/json',
        'application/json; charset=utf-8',
        'text/plain',
        'application/x-www-form-urlencoded',
        'APPLICATION/JSON',
        '',
      ),
      'x-http-method-override': fc.constantFrom('GET', 'get', 'POST', 'DELETE', 'x'),
      'x-request-id': fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('abc-123', 'a'.repeat(200))),
      accept: fc.constantFrom('application/json', 'text/html', '*/*'),
      origin: fc.constantFrom('https://example.com', 'null'),
    },
    { requiredKeys: [] },
  );
  const query = fc.dictionary(fieldName, fc.oneof(text, fc.integer().map(String)), { maxKeys: 4 });
  const path = fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...paths) },
    { weight: 1, arbitrary: fc.constantFrom('/api/user/', '/api/USER', '/api/user/../users', '/api/unknown', '/api/embed/', '/api//user', '/api/user%00') },
  );
  return fc
    .record({
      method: fc.constantFrom('GET', 'GET', 'POST', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'),
      url: path,
      query,
      headers,
      payload,
      credential,
      useQuery: fc.boolean(),
    })
    .map(({ method, url, query, headers, payload, credential, useQuery }): FuzzRequest => {
      const [valid, group, readOnly] = credentials();
      const auth: Record<string, string> = {
        valid: `Token ${valid}`,
        readonly: `Token ${readOnly}`,
        group: `Bearer ${group}`,
        garbage: 'Token ugs_api_garbage',
        unknown: `Token ${generateToken('api')}`,
      };
      const all: Record<string, string> = { ...headers };
      if (auth[credential]) all.authorization = auth[credential];
      if (url.startsWith('/api/embed/') && credential === 'valid') all.authorization = `Bearer ${group}`;
      return { method, url, query: useQuery ? query : {}, headers: all, payload };
    });
}

forEachBackend('fuzz', (backend) => {
  const t = useTestApp(backend);
  let readOnly: string;
  let groupToken: string;

  async function snapshot(): Promise<string> {
    const groups = await t.handle.db.selectFrom('user_groups').selectAll().orderBy('team_id').execute();
    const apiTokens = await t.handle.db.selectFrom('api_tokens').selectAll().orderBy('id').execute();
    const retired = await t.handle.db.selectFrom('retired_tokens').selectAll().orderBy('token_hash').execute();
    const audit = await t.handle.db
      .selectFrom('audit_log')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirst();
    return JSON.stringify({ groups, apiTokens, retired, audit: Number(audit?.n) });
  }

  before(async () => {
    readOnly = (await t.issueToken({ scopes: ['read'] })).token;
    for (const id of ['g1', 'g2']) {
      const res = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id, properties: { plan: 'pro' } } });
      groupToken = res.body.user_group.token;
    }
  });

  it(`random and mutated requests on every route (seed ${SEED}, ${RUNS} runs)`, async () => {
    const paths = [
      ...new Set(
        routeTable(t.app)
          .map((r) => r.url)
          // The event stream answers a valid request with a stream that never ends, which inject
          // would wait for; its refusals are tested in test/events-stream.test.ts.
          .filter((u) => u.startsWith('/api/') && u !== '/api/events/stream'),
      ),
    ];
    const counts = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        arbitraries(paths, () => [t.token, groupToken, readOnly]),
        async (request) => {
          const before = await snapshot();
          const res = await t.app.inject({
            method: request.method as never,
            url: request.url,
            query: request.query,
            headers: request.headers,
            payload: request.payload,
          });
          counts.set(res.statusCode, (counts.get(res.statusCode) ?? 0) + 1);
          const where = `${request.method} ${request.url} -> ${res.statusCode} ${res.body.slice(0, 300)}`;
          assert.ok(res.statusCode < 500, where);
          const requestId = res.headers['x-request-id'];
          assert.ok(typeof requestId === 'string' && requestId.length > 0, `no X-Request-Id: ${where}`);
          if (request.method === 'HEAD' || (request.method === 'OPTIONS' && res.statusCode === 204)) return; // no body by definition
          const body = JSON.parse(res.body);
          if (res.statusCode >= 400) {
            assert.equal(body.success, 0, where);
            assert.equal(typeof body.error?.code, 'string', where);
            assert.equal(typeof body.error?.message, 'string', where);
            assert.equal(body.error.request_id, requestId, where);
            assert.equal(await snapshot(), before, `a failed request changed the database: ${where}`);
          } else {
            assert.equal(body.success, 1, where);
          }
        },
      ),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
    // The run reached past validation, not only 400s.
    const statuses = [...counts.keys()];
    assert.ok(
      statuses.some((s) => s < 300),
      `no success among ${JSON.stringify([...counts])}`,
    );
    assert.ok(statuses.includes(400) && statuses.includes(401), `statuses ${JSON.stringify([...counts])}`);
  });
});
