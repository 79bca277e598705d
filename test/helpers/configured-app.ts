// An app like the harness's, for suites that need what the harness does not expose: rate
// limits, a captured log, a chosen keyring, or an app rebuilt over the same database.
import crypto from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildApp, type AppDependencies } from '../../src/app.ts';
import { Keyring } from '../../src/crypto/keyring.ts';
import { openMigratedDatabase } from '../../src/runtime.ts';
import type { DatabaseHandle, DatabaseOptions } from '../../src/db/database.ts';
import { injectRequest, type HttpResult, type RequestOptions } from './harness.ts';

export { injectRequest, issueTestToken, testConfig } from './harness.ts';
import { testConfig } from './harness.ts';
import type { Config } from '../../src/config.ts';
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
  /** Configuration beyond the test defaults (rate limits, timeouts…). */
  config?: Partial<Config>;
  log?: LogCapture;
  apiTokenCacheMs?: number;
}

export interface OpenDatabase {
  backend: Backend;
  url: string;
  handle: DatabaseHandle;
  close(): Promise<void>;
}

export async function openTestDatabase(backend: Backend, options: DatabaseOptions = {}): Promise<OpenDatabase> {
  const database: TestDatabase = await createTestDatabase(backend);
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
    config: testConfig({ apiTokenCacheMs: options.apiTokenCacheMs ?? 0, ...options.config }),
    logger: options.log ? { level: 'info', stream: options.log } : false,
  });
  return { app, keyring, request: (method, path, opts = {}) => injectRequest(app, method, path, opts) };
}
