// The service's OpenAPI document, exactly as GET /openapi.json serves it, without a running
// server: the app is built on a throwaway SQLite file and asked for it. Used to generate the
// client's types (generate-client-types.ts), the docs of the operations (generate-operation-docs.ts)
// and by the tests that hold the document to them.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp } from '../src/app.ts';
import { declaredRoutes, type DeclaredRoute } from '../src/auth/route-access.ts';
import { loadConfig } from '../src/config.ts';
import { Keyring } from '../src/crypto/keyring.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';

/** The OpenAPI document, and the routes under /api with the access each declares (auth/route-access.ts), in the order they are registered. */
export async function describedApp(): Promise<{ document: Record<string, unknown>; routes: readonly DeclaredRoute[] }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-openapi-'));
  const { handle } = await openMigratedDatabase({ databaseUrl: `sqlite:${path.join(dir, 'ugs.sqlite')}` });
  const app = await buildApp({ config: loadConfig({}), database: handle, keyring: new Keyring([crypto.randomBytes(32)]) });
  try {
    const answer = await app.inject({ method: 'GET', url: '/openapi.json' });
    if (answer.statusCode !== 200) throw new Error(`GET /openapi.json answered ${answer.statusCode}: ${answer.body}`);
    return { document: answer.json(), routes: declaredRoutes(app) };
  } finally {
    await app.close();
    await handle.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export async function openApiDocument(): Promise<Record<string, unknown>> {
  return (await describedApp()).document;
}
