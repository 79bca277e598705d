// An app like the harness's, for suites that need what the harness does not expose: rate
// limits, a captured log, a chosen keyring, or an app rebuilt over the same database.
import crypto from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildApp, type AppDependencies } from '../../src/app.ts';
import { Keyring } from '../../src/crypto/keyring.ts';
import type { DatabaseHandle } from '../../src/db/database.ts';
import { openMigratedDatabase } from '../../src/runtime.ts';
import { issueApiToken } from '../../src/auth/api-tokens.service.ts';
import type { HttpResult, RequestOptions, TokenOptions } from './harness.ts';
import { createTestDatabase, type Backend, type TestDatabase } from './backends.ts';

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

export interface AppOptions {
  keys?: Buffer[];
  rateLimit?: AppDependencies['rateLimit'];
  log?: LogCapture;
  apiTokenCacheMs?: number;
}

export interface OpenDatabase {
  backend: Backend;
  url: string;
  handle: DatabaseHandle;
  close(): Promise<void>;
}

export async function openTestDatabase(backend: Backend): Promise<OpenDatabase> {
  const database: TestDatabase = await createTestDatabase(backend);
  const { handle } = await openMigratedDatabase({ databaseUrl: database.url });
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

export interface BuiltApp {
  app: FastifyInstance;
  keyring: Keyring;
  request(method: string, path: string, options?: RequestOptions & { bearer?: string }): Promise<HttpResult>;
}

/** Builds the app over an open database; add routes to `app` before the first request if needed. */
export async function buildTestApp(database: OpenDatabase, options: AppOptions = {}): Promise<BuiltApp> {
  const keyring = new Keyring(options.keys ?? [newSecretKey()]);
  const app = await buildApp({
    database: database.handle,
    keyring,
    config: { apiTokenCacheMs: options.apiTokenCacheMs ?? 0, corsOrigins: '*' },
    rateLimit: options.rateLimit,
    logger: options.log ? { level: 'info', stream: options.log } : false,
  });
  return { app, keyring, request: (method, path, opts = {}) => injectRequest(app, method, path, opts) };
}

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
