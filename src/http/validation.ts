// Request validation. Bodies are checked strictly (no coercion, unknown fields refused, never
// silently removed); query strings are text by nature, so numbers and booleans there are
// coerced. Ajv's errors become the API's `validation_failed` with one detail per problem.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { Static, TSchema } from 'typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchemaValidationError } from 'fastify';
import { AppError, type ErrorDetail } from '../foundations/errors.ts';
import { STRING_FORMATS, type StringFormat } from './formats.ts';
import { TEXT_RULES } from './text.schemas.ts';

/**
 * Ajv, when a schema names a format it was not given, warns and takes every string. Here that
 * warning is an error: the schema does not compile, so the route, and the start, fail with
 * the format's name (the names are STRING_FORMATS', formats.ts).
 */
const logger = {
  log: console.log,
  error: console.error,
  warn: (message: unknown, ...rest: unknown[]) => {
    if (typeof message === 'string' && message.startsWith('unknown format')) {
      throw new Error(`${message}: a request schema names only the formats of src/http/formats.ts (${Object.keys(STRING_FORMATS).join(', ')})`);
    }
    console.warn(message, ...rest);
  },
};
const common = { strict: false, allErrors: true, useDefaults: false, removeAdditional: false, logger } as const;
const bodyAjv = new Ajv({ ...common, coerceTypes: false });
const queryAjv = new Ajv({ ...common, coerceTypes: true });
for (const ajv of [bodyAjv, queryAjv]) {
  for (const [name, { validate }] of Object.entries(STRING_FORMATS)) ajv.addFormat(name, { type: 'string', validate });
}

/**
 * Fastify refuses a body schema on GET routes; get-or-create (GET /api/user) takes a JSON body
 * anyway, as the interface this service implements defines it (docs/api.md, "GET /api/user").
 * Such a route keeps its body schema under `x-get-body` (the OpenAPI transform shows it as
 * the request body), and its handler reads the body with the function this returns: the
 * same rules as any body, and the body typed by its schema.
 */
export function getBodyOf<T extends TSchema>(schema: T): (body: unknown) => Static<T> {
  const validate = compiledOnFirstUse(schema, () => bodyAjv.compile<Static<T>>(schema));
  return (body) => {
    if (!validate(body)) throw validationError(validate.errors as FastifySchemaValidationError[], 'body');
    return body;
  };
}

/** A body validator for a route that checks only part of its declared body itself (the bulk upsert: its envelope). */
export function bodyValidator(schema: TSchema): ValidateFunction {
  return compiledOnFirstUse(schema, () => bodyAjv.compile(schema) as ValidateFunction);
}

export function registerValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart === 'querystring' || httpPart === 'params') {
      return withDecimalIntegers(
        schema as TSchema,
        compiledOnFirstUse(schema, () => queryAjv.compile(schema)),
      );
    }
    const ajv = httpPart === 'headers' ? queryAjv : bodyAjv;
    return compiledOnFirstUse(schema, () => ajv.compile(schema));
  });
}

/**
 * A validator that Ajv compiles when it first validates. Compiling every route's schemas at
 * once was much of a server's start (docs/performance.md, "The test suite"), and most
 * processes use a few routes: a command of the tool, a worker, a server of a test.
 * The formats the schema names are checked at once, so that an unknown one still stops the
 * start (the logger above).
 */
function compiledOnFirstUse<T = unknown>(schema: unknown, compile: () => ValidateFunction<T>): ValidateFunction<T> {
  for (const format of formatsNamed(schema)) {
    if (!Object.hasOwn(STRING_FORMATS, format)) logger.warn(`unknown format "${format}" ignored in schema`);
  }
  let compiled: ValidateFunction<T> | undefined;
  const validate = ((data: unknown) => {
    compiled ??= compile();
    const valid = compiled(data);
    validate.errors = compiled.errors;
    return valid;
  }) as ValidateFunction<T>;
  return validate;
}

/** The keywords of a schema that hold values, not schemas: a `format` inside them is data. */
const VALUE_KEYWORDS = new Set(['const', 'default', 'enum', 'examples', 'example']);

/** Every `format` keyword's value in a schema and its subschemas. */
function formatsNamed(schema: unknown, found: string[] = []): string[] {
  if (Array.isArray(schema)) {
    for (const item of schema) formatsNamed(item, found);
  } else if (schema !== null && typeof schema === 'object') {
    for (const [key, value] of Object.entries(schema)) {
      if (key === 'format' && typeof value === 'string') found.push(value);
      else if (key === 'properties' || key === 'patternProperties' || key === '$defs' || key === 'definitions') {
        for (const property of Object.values(value as object)) formatsNamed(property, found);
      } else if (!VALUE_KEYWORDS.has(key) && !key.startsWith('x-')) formatsNamed(value, found);
    }
  }
  return found;
}

const DECIMAL_DIGITS = /^[0-9]+$/;

/**
 * Integers in a query string or a path are written in decimal digits only (docs/api.md,
 * "Requests"). Ajv's coercion reads text as JavaScript does, so `0x10`, `1e2`, ` 500` and
 * `5.0` would pass as numbers and `DELETE /api/api_tokens/1e0` would act on token 1: such
 * text is refused before Ajv sees it.
 */
function withDecimalIntegers(schema: TSchema, validate: ValidateFunction): ValidateFunction {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
  const integers = Object.keys(properties).filter((name) => properties[name].type === 'integer');
  if (integers.length === 0) return validate;
  const strict = ((data: Record<string, unknown> | undefined) => {
    const loose = integers.filter((name) => typeof data?.[name] === 'string' && !DECIMAL_DIGITS.test(data[name] as string));
    if (loose.length > 0) {
      strict.errors = loose.map((name) => ({
        keyword: 'decimalDigits',
        instancePath: `/${name}`,
        schemaPath: '',
        params: {},
        message: 'must be decimal digits',
      }));
      return false;
    }
    const valid = validate(data);
    strict.errors = validate.errors;
    return valid;
  }) as ValidateFunction;
  return strict;
}

const ISSUE_BY_KEYWORD: Record<string, string> = {
  additionalProperties: 'unknown_field',
  required: 'required',
  type: 'wrong_type',
  minLength: 'too_short',
  maxLength: 'too_long',
  pattern: 'invalid_characters',
  enum: 'not_allowed',
  const: 'not_allowed',
  minimum: 'too_small',
  maximum: 'too_large',
  maxProperties: 'too_many_entries',
  maxItems: 'too_many_entries',
  minProperties: 'empty',
  propertyNames: 'invalid_key',
  anyOf: 'wrong_type',
  format: 'invalid_format',
  decimalDigits: 'wrong_type',
};

const RULE_BY_ISSUE: Record<string, (e: ErrorObject) => string> = {
  unknown_field: () => 'is not a known field',
  required: () => 'is required',
  wrong_type: (e) =>
    e.keyword === 'decimalDigits'
      ? 'must be a whole number written in decimal digits'
      : e.keyword === 'type'
        ? `must be of type ${String(e.params.type).split(',').join(' or ')}`
        : 'has the wrong type',

  too_short: (e) => `must be at least ${e.params.limit} characters`,
  too_long: (e) => `must be at most ${e.params.limit} characters`,
  invalid_characters: (e) => TEXT_RULES[e.params.pattern as string] ?? 'must be plain text',
  not_allowed: (e) => `must be one of ${((e.params.allowedValues as unknown[]) ?? [e.params.allowedValue]).map((v) => JSON.stringify(v)).join(', ')}`,
  too_small: (e) => `must be at least ${e.params.limit}`,
  too_large: (e) => `must be at most ${e.params.limit}`,
  too_many_entries: (e) => `must have at most ${e.params.limit} entries`,
  empty: () => 'must not be empty',
  invalid_key: () => 'has a key that is empty, longer than 64 characters or not plain text',
  invalid_format: (e) => `must be a valid ${STRING_FORMATS[e.params.format as StringFormat]?.described ?? e.params.format}`,
};

function fieldOf(error: ErrorObject, part: string): string {
  const base = error.instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
  const extra =
    error.keyword === 'additionalProperties'
      ? String(error.params.additionalProperty)
      : error.keyword === 'required'
        ? String(error.params.missingProperty)
        : error.keyword === 'propertyNames'
          ? String(error.params.propertyName ?? '')
          : '';
  const field = [base, extra].filter(Boolean).join('.');
  return field || (part === 'body' ? 'body' : part);
}

/** Turns Ajv's errors into details, keeping the most specific problem per field. */
function detailsFromAjv(errors: ErrorObject[], part: string): { details: ErrorDetail[]; message: string } {
  const byField = new Map<string, { issue: string; rule: string; specific: boolean }>();
  for (const error of errors) {
    if (error.keyword === 'if' || error.keyword === 'not') continue;
    // A key's own rule (too long) comes with the propertyNames error that names the key: keep that one.
    if (error.keyword !== 'propertyNames' && (error as { propertyName?: string }).propertyName !== undefined) continue;
    const field = fieldOf(error, part);
    const issue = ISSUE_BY_KEYWORD[error.keyword] ?? 'invalid';
    // Inside a union (string or integer), "wrong type" from one branch says less than
    // "too long" from the branch that matched the type: keep the specific one.
    const specific = error.keyword !== 'type' && error.keyword !== 'anyOf';
    const known = byField.get(field);
    if (known && (known.specific || !specific)) continue;
    const rule = RULE_BY_ISSUE[issue]?.(error) ?? error.message ?? 'is invalid';
    byField.set(field, { issue, rule, specific });
  }
  // A nullable object with a bad entry also fails its "or null" branch: "mapping must be of
  // type null" beside "mapping.a must be at least 0" says nothing true, so drop it.
  for (const [field, known] of byField) {
    if (!known.specific && [...byField].some(([other, o]) => o.specific && other.startsWith(`${field}.`))) byField.delete(field);
  }
  const details = [...byField].map(([field, { issue }]) => ({ field, issue }));
  const message = [...byField].map(([field, { rule }]) => `${field} ${rule}`).join('; ');
  return { details, message: message || 'request is invalid' };
}

export function validationError(errors: FastifySchemaValidationError[], part: string): AppError {
  if (part === 'body' && errors.some((e) => e.instancePath === '' && e.keyword === 'type')) {
    return new AppError('validation_failed', 'request body must be a JSON object', { details: [{ field: 'body', issue: 'wrong_type' }] });
  }
  const { details, message } = detailsFromAjv(errors as ErrorObject[], part);
  return new AppError('validation_failed', message, { details });
}

/**
 * A query string whose percent-escapes are not UTF-8 (`%ED%A0%80` is a lone surrogate) is
 * refused. The query parser would keep such an escape as its literal text, so `%ED` and
 * `%25ED` would both name the id "%ED". Only a query with a `%` in it costs a decoding.
 */
export function refuseMalformedQuery(request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void {
  const url = request.url;
  const start = url.indexOf('?');
  if (start === -1 || url.indexOf('%', start) === -1) return done();
  try {
    decodeURIComponent(url.slice(start + 1));
  } catch {
    return done(
      new AppError('validation_failed', 'the query string holds a percent-escape that is not UTF-8', {
        details: [{ field: 'querystring', issue: 'invalid_encoding' }],
      }),
    );
  }
  done();
}
