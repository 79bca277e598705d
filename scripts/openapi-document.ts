// The service's OpenAPI document, exactly as GET /openapi.json serves it, without a running
// server: the app is built on a throwaway SQLite file and asked for it. Used to generate the
// client's types (generate-client-types.ts) and by the tests that hold the document to them.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { Keyring } from '../src/crypto/keyring.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';

export async function openApiDocument(): Promise<Record<string, unknown>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-openapi-'));
  const { handle } = await openMigratedDatabase({ databaseUrl: `sqlite:${path.join(dir, 'ugs.sqlite')}` });
  const app = await buildApp({ config: loadConfig({}), database: handle, keyring: new Keyring([crypto.randomBytes(32)]) });
  try {
    const answer = await app.inject({ method: 'GET', url: '/openapi.json' });
    if (answer.statusCode !== 200) throw new Error(`GET /openapi.json answered ${answer.statusCode}: ${answer.body}`);
    return answer.json();
  } finally {
    await app.close();
    await handle.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
