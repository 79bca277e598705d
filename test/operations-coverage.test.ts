// Every operation of the API has what docs/architecture.md, "Adding an operation", asks of it,
// and each test names the operation that lacks something and what it lacks, as the
// authorization matrix (test/authorization-matrix.test.ts) names a route without a row:
// - a method of @ugs/client that calls it (packages/client/src/);
// - a place in docs/api.md that names it, beside the generated "Scopes of the operations";
// - a line in CHANGELOG.md's "Unreleased" when the last release's OpenAPI document lacks it;
// - a place in the workload of every operation (test/helpers/workload.ts) that the query-plan
//   and tenant-isolation suites run: each route of the route table answers it with a success
//   (the workload sends every route's example request of test/helpers/route-requests.ts).
// One app over SQLite, through inject: no server process.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';
import { buildTestApp, issueTestToken, openTestDatabase, type BuiltApp, type OpenDatabase } from './helpers/harness.ts';
import { isOperational, routeTable } from './helpers/route-table.ts';
import { runEveryOperation } from './helpers/workload.ts';
import { methodOverrideStrategy } from '../src/http/method-override.ts';
import { keptReleases } from '../scripts/check-api.ts';
import { derivedCodeSamples } from '../src/http/derived-code-samples.ts';
import { UserGroupServiceClient } from '../packages/client/src/index.ts';
import { TEST_ENDPOINTS_FILE, testEndpointsSource } from '../scripts/generate-test-endpoints.ts';

interface Operation {
  operationId: string;
  tags?: string[];
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
}
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** Every operation of a document, as `METHOD /path` (the path as OpenAPI writes it: `{id}`). */
function operationsOf(document: Document): { key: string; operation: Operation }[] {
  return Object.entries(document.paths).flatMap(([route, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, operation]) => ({ key: `${method.toUpperCase()} ${route}`, operation })),
  );
}
const named = ({ key, operation }: { key: string; operation: Operation }) => `${operation.operationId} (${key})`;
/** The probes, metrics and the document itself are for operators, not for the client or the workload. */
const forOperators = (operation: Operation) => operation.tags?.includes('Operations') === true;

const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');

/** The requests the client's sources send, as `METHOD /path` with `{id}` for a value put in the path. */
function clientRequests(): Set<string> {
  const requests = new Set<string>();
  const asPath = (text: string) => text.replace(/\$\{encodeURIComponent\(String\((\w+)\)\)\}/g, '{$1}');
  for (const [, method, , url] of read('packages/client/src/client.ts').matchAll(/method: '([A-Z]+)', path: (['`])(\/[^'`]*)\2/g)) {
    requests.add(`${method} ${asPath(url)}`);
  }
  // The change events' stream is followed by followEvents, a GET of its own (events.ts).
  for (const [, url] of read('packages/client/src/events.ts').matchAll(/fetchImpl\(`\$\{base\}(\/[\w/.]+)/g)) requests.add(`GET ${url}`);
  return requests;
}

/** docs/api.md without "Scopes of the operations", whose table names every operation and is written by npm run generate:docs. */
function apiDocsProse(): string {
  const text = read('docs/api.md');
  const start = text.indexOf('\n## Scopes of the operations\n');
  assert.notEqual(start, -1, 'docs/api.md has a section "Scopes of the operations"');
  const end = text.indexOf('\n## ', start + 1);
  return text.slice(0, start) + text.slice(end);
}

/** The routes no workload can end: an answer that lasts until the client hangs up. */
const NOT_IN_WORKLOAD: Record<string, string> = {
  'GET /api/events/stream': "a Server-Sent Events stream never ends under inject; its reads are the feed's (eventsAfter), which GET /api/events runs",
};

describe('every operation has its client method, its docs, its changelog line and its place in the workload', () => {
  let database: OpenDatabase;
  let built: BuiltApp;
  let document: Document;
  /** The route table's keys (test/helpers/route-table.ts) the workload's requests reached with a success. */
  const reached = new Set<string>();

  before(async () => {
    database = await openTestDatabase('sqlite');
    built = await buildTestApp(database, { config: { webhookAllowPrivate: true } }); // the workload's webhook endpoint is on 127.0.0.1
    built.app.addHook('onResponse', async (request, reply) => {
      if (reply.statusCode >= 300 || request.routeOptions.url === undefined) return;
      const key = `${request.method} ${request.routeOptions.url}`;
      const override = methodOverrideStrategy.deriveConstraint(request.raw, undefined);
      const withOverride = `${key} ${JSON.stringify({ methodOverride: override })}`;
      reached.add(override && routeTable(built.app).some((route) => route.key === withOverride) ? withOverride : key);
    });
    await built.app.ready();
    document = (await built.app.inject({ method: 'GET', url: '/openapi.json' })).json();
  });

  after(async () => {
    await built?.app.close();
    await database?.close();
  });

  it('every operation of the API is called by a method of @ugs/client (packages/client/src/client.ts)', () => {
    const requests = clientRequests();
    const missing = operationsOf(document).filter((entry) => !forOperators(entry.operation) && !requests.has(entry.key));
    assert.deepEqual(
      missing.map(named),
      [],
      'operations no method of @ugs/client calls: give each a method named as its operationId in packages/client/src/client.ts',
    );
    const operations = new Set(operationsOf(document).map(({ key }) => key));
    assert.deepEqual(
      [...requests].filter((request) => !operations.has(request)),
      [],
      'requests of @ugs/client that are no operation of the OpenAPI document (a route missing?)',
    );
  });

  it('every operation is named in docs/api.md (`METHOD /path`), beside the generated table of scopes', () => {
    const prose = apiDocsProse();
    const escaped = (key: string) => key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    // A heading that names it (`### GET /api/users: list`), or a mention as code (`GET /api/users?…`, a row of a table).
    const describes = (key: string) => new RegExp(`^#+ (?:.*\\W)?\`?${escaped(key)}(?:\`|:|$| )|\`${escaped(key)}[\`?]`, 'm').test(prose);
    const missing = operationsOf(document).filter(({ key }) => !describes(key));
    assert.deepEqual(missing.map(named), [], 'operations docs/api.md does not describe: give each a section (### METHOD /path: …) or a row naming it');
  });

  it('every TypeScript code sample calls methods @ugs/client has (a derived one, the method named as the operationId)', () => {
    const methods = new Set(Object.getOwnPropertyNames(UserGroupServiceClient.prototype));
    const wrong = operationsOf(document).flatMap((entry) => {
      const samples = ((entry.operation as { 'x-codeSamples'?: { lang: string; source: string }[] })['x-codeSamples'] ?? []).filter(
        (sample) => sample.lang === 'TypeScript',
      );
      const called = samples.flatMap((sample) => [...sample.source.matchAll(/\bugs\.(\w+)\(/g)].map((m) => m[1]));
      return called.filter((name) => !methods.has(name)).map((name) => `${named(entry)}: ugs.${name}`);
    });
    assert.deepEqual(wrong, [], 'code samples that call no method of @ugs/client: name the method as the operationId, or give the feature samples of its own');
  });

  it('an operation its feature gives no code samples gets them from its declaration: curl with its token, @ugs/client by its operationId', () => {
    const schemas = (document as unknown as { components: { schemas: Record<string, unknown> } }).components.schemas;
    const samples = (route: string, method: string) =>
      derivedCodeSamples(route, method, document.paths[route][method] as unknown as Record<string, unknown>, schemas).map((sample) =>
        sample.source.split('\n').at(-1),
      );
    assert.deepEqual(samples('/api/user/lookup', 'get'), [
      'curl "$UGS/api/user/lookup?user_group_id=example_1" -H "Authorization: Token $TOKEN"',
      'const answer = await ugs.lookupUserGroup({ user_group_id: "example_1" });',
    ]);
    assert.deepEqual(samples('/api/webhook_endpoints/{id}/test', 'post'), [
      'curl -X POST "$UGS/api/webhook_endpoints/3/test" -H "Authorization: Token $TOKEN"',
      'const answer = await ugs.testWebhookEndpoint(3);',
    ]);
    assert.deepEqual(samples('/.well-known/jwks.json', 'get'), ['curl "$UGS/.well-known/jwks.json"']);
  });

  it("the test harness's type of every operation's answer (test/helpers/endpoints.ts) is what npm run generate:client writes", async () => {
    assert.equal(
      fs.readFileSync(TEST_ENDPOINTS_FILE, 'utf8'),
      await testEndpointsSource(document),
      'test/helpers/endpoints.ts is out of date: run npm run generate:client',
    );
  });

  it('every operation the last release lacks is named in CHANGELOG.md, under "Unreleased"', () => {
    const last = keptReleases().at(-1);
    assert.ok(last, 'a kept OpenAPI document in docs/openapi/');
    const released = new Set(operationsOf(JSON.parse(read(`docs/openapi/${last}.json`)) as Document).map(({ key }) => key));
    const unreleased = /^## \[Unreleased\]\n([\s\S]*?)^## /m.exec(read('CHANGELOG.md'))?.[1] ?? '';
    const missing = operationsOf(document).filter(({ key }) => !released.has(key) && !unreleased.includes(`\`${key}`));
    assert.deepEqual(missing.map(named), [], `operations added since ${last} that CHANGELOG.md's "Unreleased" does not name (as \`METHOD /path\`)`);
  });

  it('the workload of every operation (test/helpers/workload.ts) reaches every route, so that the query-plan and tenant suites check it', async () => {
    const token = (await issueTestToken(database.handle, { account: 'coverage', scopes: ['read', 'write', 'admin'] })).token;
    const existing = Array.from({ length: 60 }, (_, i) => `existing-${i}`);
    const created = await built.request('POST', '/api/users/upsert', {
      token,
      body: { user_groups: existing.map((user_group_id, i) => ({ user_group_id, name: `Existing ${i}` })) },
    });
    assert.equal(created.body.counts?.created, existing.length, created.text);
    reached.clear();
    await runEveryOperation({
      app: built.app,
      request: built.request,
      token,
      environment: 'Customer',
      existing,
      search: { id: 'existing-1', name: 'Existing 2' },
      run: 'coverage',
    });
    const routes = routeTable(built.app).filter((route) => !isOperational(route.url));
    const missing = routes.filter((route) => !reached.has(route.key) && !(route.key in NOT_IN_WORKLOAD)).map((route) => route.key);
    assert.deepEqual(
      missing,
      [],
      'routes the workload never answers with a success: give each its example request in ROUTE_REQUESTS (test/helpers/route-requests.ts), which the workload sends',
    );
    const stale = Object.keys(NOT_IN_WORKLOAD).filter((key) => !routes.some((route) => route.key === key) || reached.has(key));
    assert.deepEqual(stale, [], 'NOT_IN_WORKLOAD names a route that is gone, or that the workload reaches');
  });
});
