// An app built exactly as the server builds it, on a real database file or server, driven
// through HTTP with Fastify's inject. Tokens are issued with the same code the CLI uses.
import crypto from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { Keyring } from '../../src/crypto/keyring.ts';
import type { DatabaseHandle } from '../../src/db/database.ts';
import type { Environment } from '../../src/db/schema.ts';
import { openMigratedDatabase } from '../../src/runtime.ts';
import { issueApiToken, revokeApiToken } from '../../src/auth/api-tokens.service.ts';
import type { Scope } from '../../src/auth/principal.ts';
import { createTestDatabase, type Backend } from './backends.ts';

export interface TokenOptions {
  account?: string;
  scopes?: Scope[];
  env?: Environment | null;
  defaultEnv?: Environment;
  expiresInMs?: number;
}

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  text: string;
}

export interface RequestOptions {
  token?: string | null;
  body?: unknown;
  /** A raw body string, sent as-is (for malformed JSON and size tests). */
  rawBody?: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
}

export interface TestApp {
  backend: Backend;
  app: FastifyInstance;
  handle: DatabaseHandle;
  keyring: Keyring;
  databaseUrl: string;
  secretKey: string;
  /** Issues an API token (account "acme" unless told otherwise) and returns it with its id. */
  issueToken(options?: TokenOptions): Promise<{ id: number; token: string }>;
  revokeToken(id: number): Promise<void>;
  request(method: string, path: string, options?: RequestOptions & { bearer?: string }): Promise<HttpResult>;
  close(): Promise<void>;
}

/**
 * The configuration of a test app: the defaults a server gets from an empty environment,
 * with the API-token cache off (tests issue and revoke tokens between requests).
 */
export function testConfig(overrides: Partial<Config> = {}): Config {
  return { ...loadConfig({}), apiTokenCacheMs: 0, ...overrides };
}

export async function startTestApp(backend: Backend, options: { now?: () => Date; apiTokenCacheMs?: number } = {}): Promise<TestApp> {
  const database = await createTestDatabase(backend);
  const { handle } = await openMigratedDatabase({ databaseUrl: database.url });
  const secretKey = crypto.randomBytes(32).toString('base64');
  const keyring = new Keyring([Buffer.from(secretKey, 'base64')]);
  const app = await buildApp({
    database: handle,
    keyring,
    config: testConfig({ apiTokenCacheMs: options.apiTokenCacheMs ?? 0 }),
    now: options.now,
  });
  await app.ready();
  return {
    backend,
    app,
    handle,
    keyring,
    databaseUrl: database.url,
    secretKey,
    issueToken: (opts = {}) => issueTestToken(handle, opts),
    async revokeToken(id) {
      await revokeApiToken(handle, id, { tokenId: null, requestId: null }, new Date());
    },
    request: (method, path, opts = {}) => injectRequest(app, method, path, opts),
    async close() {
      await app.close();
      await handle.close();
      await database.drop();
    },
  };
}

/** One request through inject, with the API token (or a Bearer credential) and a JSON body. */
export async function injectRequest(
  app: FastifyInstance,
  method: string,
  path: string,
  opts: RequestOptions & { bearer?: string } = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Token ${opts.token}`;
  if (opts.bearer) headers.authorization = `Bearer ${opts.bearer}`;
  let payload: string | undefined;
  if (opts.rawBody !== undefined) payload = opts.rawBody;
  else if (opts.body !== undefined) payload = JSON.stringify(opts.body);
  if (payload !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
    headers['content-type'] = 'application/json';
  }
  const response = await app.inject({ method: method as never, url: path, query: opts.query, headers, payload });
  let body: unknown;
  try {
    body = response.json();
  } catch {
    body = undefined;
  }
  return { status: response.statusCode, headers: response.headers, body, text: response.body };
}

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
    { tokenId: null, requestId: null },
    new Date(),
  );
  return { id: issued.id, token: issued.token };
}
