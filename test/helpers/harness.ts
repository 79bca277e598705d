// The app built exactly as the server builds it, on a real database (a new one per call,
// dropped on close), driven through HTTP with Fastify's inject. Tokens are issued with the
// same code the CLI uses. Most suites need only forEachBackend and useTestApp; the parts
// (openTestDatabase, buildTestApp) are for suites that build several apps over one
// database, or an app with chosen keys, rate limits or a captured log.
import { COMMAND_LINE_ACTOR } from '../../src/audit/audit.repository.ts';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, describe } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { Static, TSchema } from 'typebox';
import { buildApp } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { Keyring } from '../../src/crypto/keyring.ts';
import type { DatabaseHandle, DatabaseOptions } from '../../src/db/database.ts';
import type { Environment } from '../../src/db/schema.ts';
import type { Metrics } from '../../src/metrics/metrics.ts';
import { openMigratedDatabase } from '../../src/process/runtime.ts';
import { issueApiToken, revokeApiToken } from '../../src/api-tokens/api-tokens.service.ts';
import type { Scope } from '../../src/auth/principal.ts';
import type { GetOrCreateResponse } from '../../src/user-groups/user-groups.schemas.ts';
import type { ErrorEnvelope } from '../../src/http/envelope.schemas.ts';
import { BACKENDS, createTestDatabase, type Backend } from './backends.ts';
import type { DeclaredEndpoints } from './endpoints.ts';

// ---- responses ----

/** A response schema's body without `success`, whose literals (1 here, 0 there) would intersect to never. */
type Fields<Schema extends TSchema> = Omit<Static<Schema>, 'success'>;

type Intersection<Union> = (Union extends unknown ? (whole: Union) => void : never) extends (whole: infer All) => void ? All : never;

/**
 * Every documented response body at once (each operation's, from its declaration:
 * test/helpers/endpoints.ts): a test reads any field of any answer without a cast, and a test
 * that reads a field the schemas no longer have (renamed, misspelled) stops compiling instead
 * of reading undefined.
 */
export type ResponseBody = { success: 0 | 1 } & Intersection<DeclaredEndpoints[keyof DeclaredEndpoints]> & Fields<typeof ErrorEnvelope>;

export interface HttpResult<Body = ResponseBody> {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  /** The parsed JSON body; undefined when the body is not JSON (read `text` then). */
  body: Body;
  text: string;
}

/**
 * The success body of each endpoint, as its operation's response schema says
 * (test/helpers/endpoints.ts, written by npm run generate:client). A request whose method and
 * path are literals is typed by its endpoint (as `h.post<Req, Res>` in Unkey's harness): a
 * test that reads a field its endpoint does not answer stops compiling. Every answer may be an
 * error, so `error` is readable on all of them.
 */
type Endpoints = Omit<DeclaredEndpoints, 'POST /api/user'> & {
  // Create and rotate answer UserGroupResponse; with X-HTTP-Method-Override: GET, get-or-create's.
  'POST /api/user': DeclaredEndpoints['POST /api/user'] & Partial<Fields<typeof GetOrCreateResponse>>;
};

/** What every answer has, success or error: a helper that only checks status, envelope or error takes HttpResult<AnyAnswer>. */
export type AnyAnswer = { success: 0 | 1 } & Fields<typeof ErrorEnvelope>;

export type EndpointBody<Method extends string, Path extends string> = `${Method} ${Path}` extends keyof Endpoints
  ? { success: 0 | 1 } & Endpoints[`${Method} ${Path}`] & Fields<typeof ErrorEnvelope>
  : ResponseBody;

/** The body parsed as JSON, or undefined for a body that is not (an empty one, text, HTML). */
export function parseBody(text: string): ResponseBody {
  try {
    return JSON.parse(text);
  } catch {
    // Typed as a body all the same: a test that expected JSON fails on its first assertion.
    return undefined as unknown as ResponseBody;
  }
}

// ---- requests and tokens ----

export interface RequestOptions {
  /** An API token, sent as `Authorization: Token …`. */
  token?: string | null;
  /** A user group or embed token, sent as `Authorization: Bearer …`. */
  bearer?: string;
  body?: unknown;
  /** A raw body string, sent as-is (for malformed JSON and size tests). */
  rawBody?: string;
  /** Query parameters; a null one is left out, so that a page's next_cursor can be passed on as it comes. */
  query?: Record<string, string | null>;
  headers?: Record<string, string>;
}

/** One request through inject, with the API token (or a Bearer credential) and a JSON body. */
export async function injectRequest<Method extends string, Path extends string>(
  app: FastifyInstance,
  method: Method,
  path: Path,
  opts: RequestOptions = {},
): Promise<HttpResult<EndpointBody<Method, Path>>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Token ${opts.token}`;
  if (opts.bearer) headers.authorization = `Bearer ${opts.bearer}`;
  let payload: string | undefined;
  if (opts.rawBody !== undefined) payload = opts.rawBody;
  else if (opts.body !== undefined) payload = JSON.stringify(opts.body);
  if (payload !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
    headers['content-type'] = 'application/json';
  }
  const query = opts.query && Object.fromEntries(Object.entries(opts.query).filter((entry): entry is [string, string] => entry[1] !== null));
  const response = await app.inject({ method: method as never, url: path, query, headers, payload });
  return { status: response.statusCode, headers: response.headers, body: parseBody(response.body), text: response.body };
}

export interface TokenOptions {
  account?: string;
  scopes?: Scope[];
  env?: Environment | null;
  defaultEnv?: Environment;
  expiresInMs?: number;
}

/** Issues an API token (account "acme", read and write, unless told otherwise) and returns it with its id. */
export async function issueTestToken(handle: DatabaseHandle, opts: TokenOptions = {}): Promise<{ id: number; token: string }> {
  const issued = await issueApiToken(
    handle,
    {
      accountSlug: opts.account ?? 'acme',
      scopes: opts.scopes ?? ['read', 'write'],
      allowedEnvironment: opts.env ?? null,
      defaultEnvironment: opts.defaultEnv,
      expiresAt: opts.expiresInMs === undefined ? null : new Date(Date.now() + opts.expiresInMs),
      name: null,
    },
    COMMAND_LINE_ACTOR,
    new Date(),
  );
  return { id: issued.id, token: issued.token };
}

// ---- databases and apps ----

/**
 * The configuration of a test app: the defaults a server gets from an empty environment,
 * with the API-token cache off (tests issue and revoke tokens between requests).
 */
export function testConfig(overrides: Partial<Config> = {}): Config {
  return { ...loadConfig({}), apiTokenCacheMs: 0, ...overrides };
}

/** A log destination that keeps every JSON line, for assertions on what was logged. */
export class LogCapture extends Writable {
  readonly lines: Record<string, unknown>[] = [];
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    for (const line of chunk.toString().split('\n')) {
      if (line.trim()) this.lines.push(JSON.parse(line));
    }
    done();
  }
  text(): string {
    return this.lines.map((l) => JSON.stringify(l)).join('\n');
  }
}

export const newSecretKey = () => crypto.randomBytes(32);

export interface OpenDatabase {
  backend: Backend;
  url: string;
  handle: DatabaseHandle;
  close(): Promise<void>;
}

/** A new, migrated database (a copy of `copyOf`, when given); close() closes it and drops it. */
export async function openTestDatabase(backend: Backend, options: DatabaseOptions = {}, { copyOf }: { copyOf?: string } = {}): Promise<OpenDatabase> {
  const database = await createTestDatabase(backend, copyOf);
  const { handle } = await openMigratedDatabase({ databaseUrl: database.url }, options);
  return {
    backend,
    url: database.url,
    handle,
    async close() {
      await handle.close();
      await database.drop();
    },
  };
}

export interface AppOptions {
  /** The secret keys, newest first; one new key if absent. */
  keys?: Buffer[];
  /** Configuration beyond testConfig() (rate limits, timeouts, CORS…). */
  config?: Partial<Config>;
  /** Where the app logs (at info); it logs nothing if absent. */
  log?: LogCapture;
  now?: () => Date;
  /** The metrics registry, to share it with the database's onQuery (as src/server.ts does); a new one if absent. */
  metrics?: Metrics;
}

export interface BuiltApp {
  app: FastifyInstance;
  keyring: Keyring;
  request<Method extends string, Path extends string>(method: Method, path: Path, options?: RequestOptions): Promise<HttpResult<EndpointBody<Method, Path>>>;
}

/** Builds the app over an open database; add routes to `app` before the first request (or ready()) if needed. */
export async function buildTestApp(database: Pick<OpenDatabase, 'handle'>, options: AppOptions = {}): Promise<BuiltApp> {
  const keyring = new Keyring(options.keys ?? [newSecretKey()]);
  const app = await buildApp({
    database: database.handle,
    keyring,
    config: testConfig(options.config),
    logger: options.log ? { level: 'info', stream: options.log } : false,
    now: options.now,
    metrics: options.metrics,
  });
  return { app, keyring, request: (method, path, opts = {}) => injectRequest(app, method, path, opts) };
}

export interface TestApp extends BuiltApp {
  backend: Backend;
  handle: DatabaseHandle;
  databaseUrl: string;
  /** The current secret key, base64, as UGS_SECRET_KEY would hold it. */
  secretKey: string;
  issueToken(options?: TokenOptions): Promise<{ id: number; token: string }>;
  revokeToken(id: number): Promise<void>;
  /** Closes the app and the database, and drops the database. */
  close(): Promise<void>;
}

/** A new database and a ready app over it. */
export async function startTestApp(backend: Backend, options: AppOptions = {}): Promise<TestApp> {
  const keys = options.keys ?? [newSecretKey()];
  const database = await openTestDatabase(backend);
  const built = await buildTestApp(database, { ...options, keys });
  await built.app.ready();
  return {
    ...built,
    backend,
    handle: database.handle,
    databaseUrl: database.url,
    secretKey: keys[0].toString('base64'),
    issueToken: (opts = {}) => issueTestToken(database.handle, opts),
    async revokeToken(id) {
      await revokeApiToken(database.handle, id, COMMAND_LINE_ACTOR, new Date());
    },
    async close() {
      await built.app.close();
      await database.close();
    },
  };
}

/** Creates a user group over HTTP (asserting 201) and returns it as the answer shows it. */
export async function createGroup(t: Pick<SuiteApp, 'request' | 'token'>, body: Record<string, unknown>, token = t.token) {
  const res = await t.request('POST', '/api/user', { token, body });
  assert.equal(res.status, 201, res.text);
  return res.body.user_group;
}

/**
 * Concurrent get-or-create calls of one new identity: each answered 200 or 201, exactly one
 * created it (201, new_user_group: true), and all carry one team_id and one token. Returns
 * the answer that created it.
 */
export function assertExactlyOneCreated<R extends { status: number; body: ResponseBody }>(responses: readonly R[]): R {
  for (const r of responses) assert.ok(r.status === 200 || r.status === 201, `unexpected ${r.status}: ${JSON.stringify(r.body)}`);
  const created = responses.filter((r) => r.body.new_user_group === true);
  assert.equal(created.length, 1, 'exactly one response says new_user_group: true');
  assert.equal(created[0].status, 201);
  assert.equal(responses.filter((r) => r.status === 201).length, 1);
  assert.equal(new Set(responses.map((r) => r.body.user_group.team_id)).size, 1, 'one team_id');
  assert.equal(new Set(responses.map((r) => r.body.user_group.token)).size, 1, 'one token');
  return created[0];
}

/** The ways a JSON body reaches /api/user: each method that takes one, and POST overriding to GET. */
export const BODY_METHODS = [
  ['POST', {}],
  ['PUT', {}],
  ['GET', {}],
  ['DELETE', {}],
  ['POST', { 'x-http-method-override': 'GET' }],
] as const;

// ---- suites ----

/** One describe per backend the run covers, titled `[backend] title`. */
export function forEachBackend(title: string, suite: (backend: Backend) => void): void {
  for (const backend of BACKENDS) describe(`[${backend}] ${title}`, () => suite(backend));
}

/** The suite's app, and an API token of account "acme" with read and write. */
export interface SuiteApp extends TestApp {
  token: string;
  tokenId: number;
}

/**
 * Starts an app before the current describe's first test and closes it after its last.
 * The fields of what it returns are filled in by that before hook: read them in hooks and
 * tests, not while the suite is being declared.
 */
export function useTestApp(backend: Backend, options: AppOptions = {}): SuiteApp {
  const suite = {} as SuiteApp; // filled in below, before the first test runs
  before(async () => {
    Object.assign(suite, await startTestApp(backend, options));
    const { id, token } = await suite.issueToken();
    Object.assign(suite, { token, tokenId: id });
  });
  // close is missing when the before hook failed to start the app: nothing to close then.
  after(() => suite.close?.());
  return suite;
}
