// GET /openapi.json is a valid OpenAPI 3.1 document, describes every route of the app with
// an operationId, and the responses the app really sends match the schemas it declares.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { BACKENDS } from './helpers/backends.ts';
import { startTestApp, type AnyAnswer, type HttpResult, type TestApp } from './helpers/harness.ts';

// ajv-formats is CommonJS: its default export arrives as the module object or the function.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv2020) => void;

/** Routes that are deliberately not part of the API description (the CORS preflight's `*` prints as `/*` under the front page's `/`). */
const UNDOCUMENTED = [/^\/$/, /^\/console/, /^\/docs/, /^\/openapi\.json$/, /^\/?\*$/];

/** Every (method, path) of the app, read from printRoutes' tree (Fastify has no route list). */
function appRoutes(app: FastifyInstance): Array<{ method: string; path: string }> {
  const stack: string[] = [''];
  const routes: Array<{ method: string; path: string }> = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const start = line.search(/[^│├└─\s]/u);
    if (start < 0) continue;
    const depth = Math.round(start / 4);
    const match = /^(\S+)(?: \(([^)]*)\))?/.exec(line.slice(start));
    if (!match) continue;
    const path = stack[depth - 1] + match[1];
    stack[depth] = path;
    stack.length = depth + 1;
    for (const method of (match[2] ?? '')
      .split(',')
      .map((m) => m.trim())
      .filter(Boolean))
      routes.push({ method, path });
  }
  return routes;
}

interface OpenApiOperation {
  operationId?: string;
  responses: Record<string, { content?: Record<string, { schema: object }> }>;
}
type OpenApiDocument = { openapi: string; paths: Record<string, Record<string, OpenApiOperation>>; components: { schemas: Record<string, object> } };

/** A schema with its references to the document's named schemas replaced by the schemas themselves. */
function dereference(schema: unknown, named: Record<string, object>): unknown {
  if (Array.isArray(schema)) return schema.map((item) => dereference(item, named));
  if (schema === null || typeof schema !== 'object') return schema;
  const ref = (schema as { $ref?: string }).$ref;
  if (ref !== undefined) {
    const target = named[ref.replace('#/components/schemas/', '')];
    assert.ok(target, `${ref} is a named schema of the document`);
    return dereference(target, named);
  }
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, dereference(value, named)]));
}

for (const backend of BACKENDS) {
  describe(`[${backend}] OpenAPI document`, () => {
    let t: TestApp;
    let doc: OpenApiDocument;
    let token: string;
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    const compiled = new Map<object, ValidateFunction>();

    before(async () => {
      t = await startTestApp(backend);
      token = (await t.issueToken()).token;
      const response = await t.request('GET', '/openapi.json');
      assert.equal(response.status, 200);
      doc = JSON.parse(response.text) as OpenApiDocument;
    });
    after(() => t.close());

    /** Checks that the response's status is declared for the operation and that its body matches the declared schema. */
    function assertConforms(method: string, path: string, response: HttpResult<AnyAnswer>): void {
      const operation = doc.paths[path.replace(/^\/api\/api_tokens\/\d+$/, '/api/api_tokens/{id}')]?.[method.toLowerCase()];
      assert.ok(operation, `${method} ${path} is documented`);
      const declared = operation.responses[String(response.status)];
      assert.ok(declared, `${method} ${path} declares status ${response.status} (declared: ${Object.keys(operation.responses).join(', ')})`);
      const contentType = String(response.headers['content-type']).split(';')[0];
      const media = declared.content?.[contentType];
      assert.ok(media, `${method} ${path} ${response.status} declares ${contentType} (declared: ${Object.keys(declared.content ?? {}).join(', ')})`);
      if (contentType !== 'application/json') return;
      let validate = compiled.get(media.schema);
      if (!validate) {
        validate = ajv.compile(dereference(media.schema, doc.components.schemas) as object);
        compiled.set(media.schema, validate);
      }
      assert.ok(validate(response.body), `${method} ${path} ${response.status}: ${ajv.errorsText(validate.errors)}\n${response.text}`);
    }

    it('is a valid OpenAPI 3.1 document', async () => {
      assert.equal(doc.openapi, '3.1.0');
      const result = await new Validator().validate(doc as never);
      assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
    });

    it('describes every route of the app, each with a unique operationId', () => {
      const routes = appRoutes(t.app).filter((r) => r.method !== 'HEAD' && !UNDOCUMENTED.some((p) => p.test(r.path)));
      assert.ok(routes.length >= 9, `found ${routes.length} routes: ${JSON.stringify(routes)}`);
      for (const { method, path } of routes) {
        const operation = doc.paths[path.replace(/:(\w+)/g, '{$1}')]?.[method.toLowerCase()];
        assert.ok(operation, `${method} ${path} is in the OpenAPI document`);
        assert.match(operation.operationId ?? '', /^[a-zA-Z]+$/, `${method} ${path} has an operationId`);
      }
      const ids = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
      assert.equal(new Set(ids).size, ids.length, `operationIds are unique: ${ids.join(', ')}`);
      // And nothing is documented that the app does not serve.
      for (const [path, operations] of Object.entries(doc.paths)) {
        for (const method of Object.keys(operations)) {
          assert.ok(t.app.hasRoute({ method: method.toUpperCase() as never, url: path.replace(/\{(\w+)\}/g, ':$1') }), `${method} ${path} is served`);
        }
      }
    });

    it('representative responses match the declared schema for their status', async () => {
      const id = `oa-${crypto.randomBytes(4).toString('hex')}`;
      const readOnly = (await t.issueToken({ scopes: ['read'] })).token;
      const calls: Array<[string, string, HttpResult]> = [];
      const call = async (method: string, path: string, options: Parameters<TestApp['request']>[2] = {}) => {
        const response = await t.request(method, path, options);
        calls.push([method, path.split('?')[0], response]);
        return response;
      };

      await call('GET', '/healthz');
      await call('GET', '/readyz');
      await call('GET', '/metrics');
      const created = await call('POST', '/api/user', { token, body: { user_group_id: id, properties: { a: { b: [1] } }, mapping: { '1': 2 } } });
      assert.equal(created.status, 201);
      await call('POST', '/api/user', { token, body: { user_group_id: id } }); // 409
      await call('POST', '/api/user', { token, body: { user_group_id: '' } }); // 400
      await call('POST', '/api/user', { body: { user_group_id: id } }); // 401
      await call('POST', '/api/user', { token: readOnly, body: { user_group_id: `${id}-ro` } }); // 403
      await call('POST', '/api/user', { token, rawBody: JSON.stringify({ user_group_id: id, properties: { x: 'y'.repeat(300_000) } }) }); // 413
      await call('POST', '/api/user', { token, rawBody: 'user_group_id=1', headers: { 'content-type': 'text/plain' } }); // 415
      await call('GET', '/api/user', { token, query: { user_group_id: id } }); // 200
      await call('GET', '/api/user', { token, body: { user_group_id: `${id}-2` } }); // 201
      await call('GET', '/api/user', { token, body: { user_group_id: id }, query: { user_group_id: id } }); // 400 ambiguous
      await call('PUT', '/api/user', { token, body: { user_group_id: id, name: 'Renamed', mapping: null } }); // 200
      await call('PUT', '/api/user', { token, body: { user_group_id: `${id}-missing`, name: 'x' } }); // 404
      const rotated = await call('POST', '/api/user', { token, body: { current_token: created.body.user_group.token } }); // 200
      assert.equal(rotated.status, 200);
      await call('POST', '/api/user', { token, body: { current_token: created.body.user_group.token } }); // 404
      await call('GET', '/api/users', { token, query: { limit: '1' } });
      await call('GET', '/api/users', { token, query: { limit: '0' } }); // 400
      await call('GET', '/api/user/history', { token, query: { user_group_id: id } });
      const embed = await call('POST', '/api/embed_token', { token, body: { user_group_id: id } });
      if (embed.status === 200) {
        await call('GET', '/api/embed/context', { headers: { authorization: `Bearer ${embed.body.embed_token}` } });
        await call('GET', '/api/embed/context', { headers: { authorization: `Bearer ${rotated.body.user_group.token}` } });
        await call('GET', '/api/embed/context', { headers: { authorization: 'Bearer nonsense' } }); // 401
      }
      await call('DELETE', '/api/user', { token, query: { user_group_id: id } }); // 200
      await call('DELETE', '/api/user', { token, query: { user_group_id: id } }); // 404

      const admin = (await t.issueToken({ scopes: ['read', 'write', 'admin'] })).token;
      const issued = await call('POST', '/api/api_tokens', { token: admin, body: { name: 'conformance', scopes: ['read'] } }); // 201
      assert.equal(issued.status, 201, issued.text);
      await call('GET', '/api/api_tokens', { token: admin });
      await call('GET', '/api/api_tokens', { token }); // 403 without admin
      await call('DELETE', `/api/api_tokens/${issued.body.api_token.id}`, { token: admin }); // 200
      await call('DELETE', `/api/api_tokens/${issued.body.api_token.id}`, { token: admin }); // 409
      await call('DELETE', '/api/api_tokens/999999', { token: admin }); // 404
      await call('GET', '/api/api_tokens/history', { token: admin });

      const statuses = new Set(calls.map(([, , r]) => r.status));
      for (const status of [200, 201, 400, 401, 403, 404, 409, 413, 415]) assert.ok(statuses.has(status), `a ${status} was checked`);
      for (const [method, path, response] of calls) assertConforms(method, path, response);
    });
  });
}
