// examples/postgres-rls's data API as its README runs it: its own PostgreSQL database and a
// role of its own (setup.mjs), then server.mjs as that role, for the tokens of one issuer.
// Several suites drive it (its own, the embed demo, the verifier matrix); each gets a fresh
// database and role, dropped by stop().
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { POSTGRES_URL, createTestDatabase } from './backends.ts';
import { ROOT, runNode, startExample, stopExample } from './processes.ts';

const EXAMPLE = path.join(ROOT, 'examples', 'postgres-rls');

export interface DataApi {
  url: string;
  /** The database as the data API's role sees it (not the tables' owner). */
  roleUrl: string;
  role: string;
  stop(): Promise<void>;
}

/** `env`: the data API's settings (UGS_ISSUER, AUDIENCE, ALLOWED_ORIGINS, JWKS_CACHE_SECONDS…). */
export async function startDataApi(env: Record<string, string>): Promise<DataApi> {
  const role = `ugs_data_${crypto.randomBytes(4).toString('hex')}`;
  const data = await createTestDatabase('postgres');
  const dropRole = async () => {
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    await admin.query(`drop role if exists ${admin.escapeIdentifier(role)}`);
    await admin.end();
  };
  try {
    const setup = await runNode([path.join(EXAMPLE, 'setup.mjs')], { ADMIN_DATABASE_URL: data.url, APP_ROLE: role });
    assert.equal(setup.code, 0, setup.stderr);
    const asRole = new URL(data.url);
    asRole.username = role;
    const process = await startExample(path.join(EXAMPLE, 'server.mjs'), { PORT: '0', DATABASE_URL: asRole.href, ...env });
    return {
      url: process.url,
      roleUrl: asRole.href,
      role,
      async stop() {
        await stopExample(process);
        await data.drop();
        await dropRole();
      },
    };
  } catch (err) {
    await data.drop();
    await dropRole();
    throw err;
  }
}
