// The OpenAPI document (GET /openapi.json). The routes' own schemas give its paths; this
// module gives its top, and finishes what @fastify/swagger generates so that tools nobody on
// this project wrote (code generators, linters, reference renderers) read it right:
//   - every schema with a `title` becomes a named component (UserGroup, Error, …), referenced;
//   - each error answer gets one realistic example per code it can carry (x-error-codes);
//   - every answer declares its headers (X-Request-Id, Retry-After, RateLimit, …);
//   - GET and DELETE /api/user and DELETE /api/group_tags take their JSON body as optional, as the server does;
//   - POST /api/user declares X-HTTP-Method-Override and the answer it then gives;
//   - operations that take an Idempotency-Key declare it, and Idempotent-Replayed (idempotency/idempotency.ts);
//   - each operation carries code samples (x-codeSamples), from the features' docs or derived from its declaration;
//   - each operation's security requirement names the scope it needs, or is empty (public).
import type { FastifyDynamicSwaggerOptions, SwaggerTransformObject } from '@fastify/swagger';
import { ERROR_EXAMPLES } from './error-examples.ts';
import { derivedCodeSamples } from './derived-code-samples.ts';
import type { ErrorCode } from '../foundations/errors.ts';
import { SERVICE_VERSION } from '../foundations/version.ts';

export const openApiInfo: FastifyDynamicSwaggerOptions['openapi'] = {
  openapi: '3.1.0',
  info: {
    title: 'User Group Service',
    version: SERVICE_VERSION,
    description: [
      'Creates and keeps a user group for each of your customers and hands out the user group token an embedded dashboard uses.',
      'Every answer carries `success` (1 or 0) and an `X-Request-Id` header; errors carry `error.code`, `error.message` and `error.request_id`.',
      'Authenticate with `Authorization: Token <API token>` (the scheme apiToken; `Authorization: Bearer <API token>` works too, the scheme apiTokenBearer; issue tokens with `npx ugs token create`).',
      'Unknown fields are refused (`400 validation_failed`); bodies are JSON objects of at most 256 KiB sent as `application/json`.',
      'Any request may also meet the HTTP layer: `400 bad_request` (not valid HTTP), `408 request_timeout`, `431 headers_too_large`.',
      'The full reference: docs/api.md in the repository.',
    ].join('\n\n'),
    contact: { name: 'The maintainers of this deployment' },
    license: { name: 'MIT', identifier: 'MIT' },
  },
  servers: [{ url: '/', description: 'This server' }],
  components: {
    securitySchemes: {
      // What a caller sends (docs/api.md, "Requests"): the API token after the word Token, the
      // form every example and 401 challenge names, or after Bearer, which works as well. An
      // operation that takes an API token names both, as alternatives, each with the scope the
      // operation needs (auth/route-access.ts). Renderers title an http scheme by its type
      // ("HTTP Bearer") or its key; bearerFormat is what names the token it takes (/docs titles
      // each scheme with it, and the apiKey one by its own words: static/docs/docs.js).
      apiToken: {
        type: 'apiKey',
        in: 'header',
        name: 'Authorization',
        description:
          'Your API token (`ugs_api_…`), from your backend only, sent as `Authorization: Token <API token>`: the header is the word `Token`, a space and the token. The same token as `Authorization: Bearer <API token>` works too (the scheme apiTokenBearer).',
      },
      apiTokenBearer: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'API token (ugs_api_…), sent as Bearer',
        description: 'The same API token (`ugs_api_…`), sent as `Authorization: Bearer <API token>` instead.',
      },
      userGroupOrEmbedToken: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'user group token (ugs_grp_…) or embed token',
        description:
          'For the embed side, from the browser: a user group token (`ugs_grp_…`) or a short-lived embed token (a JWS from `POST /api/embed_token`), sent as `Authorization: Bearer <token>` (`Token <token>` is accepted too). Never accepted by the management API.',
      },
    },
    headers: {
      XRequestId: {
        description: "The request's id: the caller's own X-Request-Id when it sent a plain one not starting with req_, else one of the service's (`req_…`).",
        schema: { type: 'string' },
        example: 'req_5f0c2a9e1b3d00012c',
      },
      RetryAfter: { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 1 }, example: 2 },
      RateLimit: {
        description: 'What is left of the budget: `r` requests, `t` seconds until the window resets (when rate limits are on).',
        schema: { type: 'string' },
        example: '"api-token";r=59987;t=42',
      },
      RateLimitPolicy: {
        description: 'The budget: `q` requests per `w` seconds (when rate limits are on).',
        schema: { type: 'string' },
        example: '"api-token";q=60000;w=60',
      },
      WWWAuthenticate: { description: 'How to authenticate.', schema: { type: 'string' }, example: 'Token' },
      IdempotentReplayed: {
        description: 'Present (`true`) when this is the stored answer of an earlier request with the same Idempotency-Key, not a new run.',
        schema: { type: 'string', enum: ['true'] },
        example: 'true',
      },
    },
  },
  tags: [
    { name: 'User groups', description: 'The management API, called from your backend with an API token.' },
    { name: 'Tags', description: "The environment's tags as a set: listed with their counts, created, renamed and deleted on every group at once." },
    {
      name: 'Embed',
      description: 'What an embedded dashboard calls from the browser (CORS enabled), and the short-lived embed tokens your backend issues for it.',
    },
    { name: 'API tokens', description: "An API token with the admin scope manages its own account's API tokens." },
    { name: 'Change events', description: 'Every committed change of the account, in order: a feed to poll and a stream to follow.' },
    { name: 'Webhooks', description: "Endpoints that receive the account's change events, signed as the Standard Webhooks specification says." },
    { name: 'Operations', description: 'Health, readiness and metrics.' },
  ],
};

/** Shows the `x-get-body` of GET routes as their request body (see getBodyOf in validation.ts). */
export function showGetBodies({ schema, url }: { schema: object; url: string }) {
  const fields = (schema ?? {}) as Record<string, unknown>;
  if (!fields['x-get-body']) return { schema, url };
  const { 'x-get-body': body, ...rest } = fields;
  return { schema: { ...rest, body }, url };
}

/** Code samples of one operation, as reference renderers read them. */
export interface CodeSample {
  lang: string;
  label: string;
  source: string;
}

type Json = Record<string, unknown>;

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head'];
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

/** The finishing pass over the generated document (see the top of this file). */
export function finishOpenApiDocument(codeSamples: Record<string, CodeSample[]>): SwaggerTransformObject {
  return (generated) => {
    if (!('openapiObject' in generated)) throw new Error('the service describes itself in OpenAPI 3, not Swagger 2');
    const document = structuredClone(generated.openapiObject) as Json & { paths: Record<string, Record<string, Json>>; components: Json & { schemas?: Json } };
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (!METHODS.includes(method)) continue;
        finishOperation(path, method, operation, codeSamples, (document.components.schemas ?? {}) as Json);
      }
    }
    document.components.schemas = { ...(document.components.schemas ?? {}) };
    document.paths = nameSchemas(document.paths, document.components.schemas as Json) as typeof document.paths;
    return document as ReturnType<SwaggerTransformObject>;
  };
}

const IDENTIFICATION_BODY =
  'The identification as JSON, instead of the query string (not both). Browsers and most HTTP clients cannot send a body with GET: use the query string, or POST with X-HTTP-Method-Override: GET.';
/** The operations whose JSON body is optional (the query string may say the same), and what their body is. */
const OPTIONAL_BODIES: Record<string, string> = {
  'get /api/user': IDENTIFICATION_BODY,
  'delete /api/user': IDENTIFICATION_BODY,
  'delete /api/group_tags': 'The tag as JSON, instead of the query string (not both).',
};

function finishOperation(path: string, method: string, operation: Json, codeSamples: Record<string, CodeSample[]>, schemas: Json): void {
  const responses = operation.responses as Record<string, Json>;
  const limited = path.startsWith('/api/');
  for (const [status, response] of Object.entries(responses)) {
    const headers: Json = { 'X-Request-Id': header('XRequestId') };
    if (limited && status !== '401') Object.assign(headers, { RateLimit: header('RateLimit'), 'RateLimit-Policy': header('RateLimitPolicy') });
    if (status === '429' || status === '503') headers['Retry-After'] = header('RetryAfter');
    if (status === '401') headers['WWW-Authenticate'] = header('WWWAuthenticate');
    response.headers = headers;
    const media = (response.content as Record<string, Json> | undefined)?.['application/json'];
    const schema = media?.schema as Json | undefined;
    const codes = schema?.['x-error-codes'] as ErrorCode[] | undefined;
    if (media && schema && codes) {
      delete schema['x-error-codes'];
      delete media.example;
      media.examples = Object.fromEntries(codes.map((code) => [code, errorExample(code)]));
    }
  }
  if (operation['x-idempotent'] === true) declareIdempotencyKey(operation);
  const operationId = operation.operationId as string | undefined;
  // A feature's own samples, else those its declaration gives (derived-code-samples.ts).
  operation['x-codeSamples'] = (operationId && codeSamples[operationId]) || derivedCodeSamples(path, method, operation, schemas);
  // The document has no root-level security: an operation that names none (the probes,
  // metrics, the JWKS) needs no token, and says so rather than leaving readers to guess. One
  // that takes an API token names the scope it needs (auth/route-access.ts).
  operation.security ??= [];
  delete operation['x-access'];

  const optionalBody = OPTIONAL_BODIES[`${method} ${path}`];
  if (optionalBody) {
    const body = operation.requestBody as Json | undefined;
    if (body) {
      body.required = false;
      body.description = optionalBody;
    }
  }
  if (path === '/api/user' && method === 'post') {
    operation.parameters = [
      ...((operation.parameters as Json[] | undefined) ?? []),
      {
        name: 'X-HTTP-Method-Override',
        in: 'header',
        required: false,
        description:
          'Only `GET`: then this request is a get-or-create (GET /api/user) whose JSON body identifies the group, and it answers as that operation does.',
        schema: { type: 'string', enum: ['GET'] },
      },
    ];
    for (const status of ['200', '201']) {
      const media = (responses[status]?.content as Record<string, Json> | undefined)?.['application/json'];
      if (media) media.schema = { anyOf: [media.schema, ref('GetOrCreateResponse')] };
    }
  }
}

/** An operation that takes an Idempotency-Key (idempotency/idempotency.ts): the header, and which answers may be replays. */
function declareIdempotencyKey(operation: Json): void {
  delete operation['x-idempotent'];
  operation.parameters = [
    ...((operation.parameters as Json[] | undefined) ?? []),
    {
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description:
        'Makes a retry safe: a request with the same key and the same method, path and body within 24 h gets the first answer again (`Idempotent-Replayed: true`) and changes nothing. 1-255 printable ASCII characters; a UUID is a good key. Keys belong to the API token that sent them: retry with the same token. See docs/api.md, "Idempotent retries".',
      schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' },
      example: '5f2b7c1e-0d43-4a7a-9a55-2b8f3f0c9e12',
    },
  ];
  for (const [status, response] of Object.entries(operation.responses as Record<string, Json>)) {
    if (Number(status) < 500 && status !== '429') (response.headers as Json)['Idempotent-Replayed'] = header('IdempotentReplayed');
  }
}

function errorExample(code: ErrorCode): Json {
  const { summary, message, details } = ERROR_EXAMPLES[code];
  return { summary, value: { success: 0, error: { code, message, ...(details ? { details } : {}), request_id: 'req_5f0c2a9e1b3d00012c' } } };
}

/**
 * Every schema object with a `title` becomes components.schemas[title] and is replaced by a
 * reference to it, innermost first. Two different schemas with one title are a mistake in
 * the schemas, reported at once rather than one silently winning.
 */
function nameSchemas(node: unknown, components: Json): unknown {
  if (Array.isArray(node)) return node.map((child) => nameSchemas(child, components));
  if (node === null || typeof node !== 'object') return node;
  const named: Json = {};
  for (const [key, value] of Object.entries(node)) named[key] = key === 'examples' || key === 'example' ? value : nameSchemas(value, components);
  const title = named.title;
  if (typeof title !== 'string' || !('type' in named || 'anyOf' in named || 'properties' in named || 'enum' in named)) return named;
  const known = components[title] as Json | undefined;
  // A parameter's schema gives its description to the parameter: compare without annotations.
  if (known !== undefined && JSON.stringify(withoutAnnotations(known)) !== JSON.stringify(withoutAnnotations(named))) {
    throw new Error(`two different schemas are titled ${title}: give one another title\n${JSON.stringify(known)}\n${JSON.stringify(named)}`);
  }
  if (known !== undefined && Object.keys(known).length >= Object.keys(named).length) return ref(title);
  components[title] = named;
  return ref(title);
}

function withoutAnnotations(schema: Json): Json {
  const { description: _description, examples: _examples, example: _example, ...rest } = schema;
  return rest;
}
