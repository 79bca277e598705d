// What tools nobody on this project wrote need from GET /openapi.json: Redocly's OpenAPI
// rules pass without an error or a warning; every shape a client handles is a named schema;
// each error answer has one realistic example per code it can carry; every answer declares
// its headers; the get-or-create body is optional; the security schemes say how the API token
// is sent; every path parameter has an example; each operation has samples. (test/openapi.test.ts holds real answers to the schemas.)
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { errorStatus, type ErrorCode } from '../src/foundations/errors.ts';
import { openApiDocument } from '../scripts/openapi-document.ts';

// biome-ignore lint/suspicious/noExplicitAny: an OpenAPI document, walked by path
type Json = Record<string, any>;

const OPERATIONS = ['get', 'post', 'put', 'delete'];

describe('OpenAPI document for tools', () => {
  let doc: Json;
  const operations = () =>
    Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([method]) => OPERATIONS.includes(method))
        .map(([method, operation]) => ({ path, method, operation: operation as Json })),
    );

  before(async () => {
    doc = await openApiDocument();
  });

  it("openapi: Redocly with its recommended rules, and the rules Spectral's spectral:oas also has, reports no error and no warning", async () => {
    // Redocly's linter (@redocly/openapi-core, already here for openapi-typescript) replaced
    // Spectral, which brought 131 packages of its own. Its recommended set leaves a few of
    // spectral:oas's checks at a warning or off; they are errors here, under Redocly's names.
    const asInSpectral = [
      'struct', // oas3-schema
      'info-contact', // info-contact
      'operation-description', // operation-description
      'operation-operationId-unique', // operation-operationId-unique
      'operation-operationId-url-safe', // operation-operationId-valid-in-url
      'operation-parameters-unique', // operation-parameters
      'operation-tag-defined', // operation-tag-defined
      'operation-2xx-response', // operation-success-response
      'tag-description', // tag-description
      'path-declaration-must-exist', // path-declarations-must-exist
      'path-not-include-query', // path-not-include-query
      'no-path-trailing-slash', // path-keys-no-trailing-slash
      'path-params-defined', // path-params
      'no-enum-type-mismatch', // typed-enum
      'no-invalid-media-type-examples', // oas3-valid-media-example
      'no-invalid-schema-examples', // oas3-valid-schema-example
      'no-example-value-and-externalValue', // oas3-examples-value-or-externalValue
      'no-server-trailing-slash', // oas3-server-trailing-slash
      'no-empty-servers', // oas3-api-servers
      'no-unused-components', // oas3-unused-component
      'security-defined', // oas3-operation-security-defined, and stricter: every operation says what it needs
    ];
    const config = await createConfig({
      extends: ['recommended'],
      rules: {
        ...Object.fromEntries(asInSpectral.map((rule) => [rule, 'error'])),
        // The probes, /metrics and the JWKS answer no client error: there is none to describe.
        'operation-4xx-response': 'off',
      },
    } as Parameters<typeof createConfig>[0]);
    const results = await lintFromString({ source: JSON.stringify(doc), absoluteRef: '/openapi.json', config });
    const problems = results.map((r) => `${r.severity} ${r.ruleId}: ${r.message} at ${r.location[0]?.pointer}`);
    assert.deepEqual(problems, []);
  });

  it('openapi: every shape a client handles is a named schema, referenced', () => {
    const named = Object.keys(doc.components.schemas);
    for (const name of [
      'UserGroup',
      'UserGroupWithoutToken',
      'Error',
      'UserGroupResponse',
      'GetOrCreateResponse',
      'UserGroupList',
      'History',
      'EmbedContext',
      'EmbedToken',
      'CreateOrRotateRequest',
      'UpdateUserGroupRequest',
      'EmbedTokenRequest',
    ]) {
      assert.ok(named.includes(name), `${name} is a named schema (named: ${named.join(', ')})`);
    }
    for (const { path, method, operation } of operations()) {
      for (const [status, response] of Object.entries(operation.responses as Record<string, Json>)) {
        const schema = response.content?.['application/json']?.schema;
        if (schema) assert.ok(schema.$ref || schema.anyOf, `${method} ${path} ${status} refers to a named schema`);
        assert.notEqual(response.description, 'Default Response', `${method} ${path} ${status} says what it is`);
      }
    }
  });

  it('openapi: each error answer has one example per code it can carry, and the example is that code', () => {
    let examples = 0;
    for (const { path, method, operation } of operations()) {
      for (const [status, response] of Object.entries(operation.responses as Record<string, Json>)) {
        if (Number(status) < 400) continue;
        const media = response.content['application/json'];
        const codes = Object.keys(media.examples ?? {});
        assert.ok(codes.length > 0, `${method} ${path} ${status} has examples`);
        for (const code of codes) {
          assert.equal(errorStatus[code as ErrorCode], Number(status), `${code} belongs to ${status}`);
          assert.equal(media.examples[code].value.error.code, code);
          examples++;
        }
      }
    }
    assert.ok(examples > 60, `${examples} examples`);
    const statuses = (path: string, method: string) => Object.keys(doc.paths[path][method].responses);
    assert.ok(!statuses('/readyz', 'get').includes('429'), '/readyz is not rate limited');
    assert.ok(statuses('/api/users', 'get').includes('429'), 'the management API is');
  });

  it('openapi: every answer declares X-Request-Id; 429 and 503 Retry-After; 401 WWW-Authenticate; /api answers RateLimit', () => {
    for (const { path, method, operation } of operations()) {
      for (const [status, response] of Object.entries(operation.responses as Record<string, Json>)) {
        const headers = Object.keys(response.headers ?? {});
        const where = `${method} ${path} ${status}`;
        assert.ok(headers.includes('X-Request-Id'), where);
        if (status === '429' || status === '503') assert.ok(headers.includes('Retry-After'), where);
        if (status === '401') assert.ok(headers.includes('WWW-Authenticate'), where);
        if (path.startsWith('/api/') && status !== '401') assert.ok(headers.includes('RateLimit') && headers.includes('RateLimit-Policy'), where);
      }
    }
  });

  it('openapi: get-or-create and delete take an optional body; the method override and its answer are declared', () => {
    assert.equal(doc.paths['/api/user'].get.requestBody.required, false);
    assert.equal(doc.paths['/api/user'].delete.requestBody.required, false);
    const post = doc.paths['/api/user'].post;
    const override = post.parameters.find((p: Json) => p.name === 'X-HTTP-Method-Override');
    assert.deepEqual(override.schema.enum, ['GET']);
    assert.ok(JSON.stringify(post.responses['200'].content['application/json'].schema).includes('GetOrCreateResponse'));
  });

  it('openapi: the API token goes as Authorization: Token <token>, or as a bearer token; every operation has curl samples, the API ones TypeScript too', () => {
    const { apiToken, apiTokenBearer } = doc.components.securitySchemes;
    assert.deepEqual({ type: apiToken.type, in: apiToken.in, name: apiToken.name }, { type: 'apiKey', in: 'header', name: 'Authorization' });
    assert.match(apiToken.description, /`Authorization: Token <API token>`/);
    assert.deepEqual({ type: apiTokenBearer.type, scheme: apiTokenBearer.scheme }, { type: 'http', scheme: 'bearer' });
    for (const { path, method, operation } of operations()) {
      const samples: Json[] = operation['x-codeSamples'] ?? [];
      assert.ok(
        samples.some((s) => s.label === 'curl'),
        `${method} ${path} has a curl sample`,
      );
      if (path.startsWith('/api/'))
        assert.ok(
          samples.some((s) => s.lang === 'TypeScript'),
          `${method} ${path} has a TypeScript sample`,
        );
    }
  });

  it('openapi: every path parameter has an example, of its schema (Dredd, for one, fills the path with it)', () => {
    const parameters = operations().flatMap(({ path, method, operation }) =>
      ((operation.parameters ?? []) as Json[]).filter((p) => p.in === 'path').map((parameter) => ({ where: `${method} ${path}`, parameter })),
    );
    const templated = operations().filter(({ path }) => path.includes('{'));
    assert.ok(parameters.length >= templated.length && templated.length >= 6, `${parameters.length} path parameters`);
    for (const { where, parameter } of parameters) {
      assert.notEqual(parameter.example, undefined, `${where}: {${parameter.name}} has no example`);
      if (parameter.schema.type === 'integer') {
        assert.ok(Number.isSafeInteger(parameter.example) && parameter.example >= parameter.schema.minimum, `${where}: ${parameter.example}`);
      }
    }
  });

  it('openapi: no user-facing text speaks of internal documents', () => {
    assert.doesNotMatch(JSON.stringify(doc), /\bseed\b|contract|issue #/i);
  });
});
