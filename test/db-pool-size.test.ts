// UGS_DB_POOL_SIZE bounds the PostgreSQL connections one instance opens: under more
// concurrent requests than that, they wait for a connection instead of opening another.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import pg from 'pg';
import { createTestDatabase, POSTGRES_URL, type TestDatabase } from './helpers/backends.ts';
import { httpRequest, issueTokenWithCli, spawnServer } from './helpers/processes.ts';

const skip = POSTGRES_URL ? false : 'SKIPPED: no TEST_POSTGRES_URL';

describe('the PostgreSQL pool size', { skip }, () => {
  let database: TestDatabase | undefined;
  after(async () => database?.drop());

  it('UGS_DB_POOL_SIZE=2: 60 concurrent writes and reads are all answered on at most 2 connections', async () => {
    database = await createTestDatabase('postgres');
    const env = { DATABASE_URL: database.url, UGS_DB_POOL_SIZE: '2', UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    const { token } = await issueTokenWithCli(env); // it exits, and its connection with it, before the server starts
    const server = await spawnServer(env);
    const observer = new pg.Client({ connectionString: database.url });
    await observer.connect();
    try {
      const answers = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          i % 2 === 0
            ? httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: `pooled-${i}` } })
            : httpRequest(server.baseUrl, 'GET', `/api/user?user_group_id=pooled-${i}`, { token }),
        ),
      );
      for (const res of answers) assert.equal(res.status, 201, res.text);
      // Idle connections stay in the pool (30 s): what is open now is what the load opened.
      const { rows } = await observer.query(
        "select count(*)::int as n from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()",
      );
      assert.equal(rows[0].n, 2, 'the pool grew to its size and no further');
    } finally {
      await observer.end();
      assert.equal((await server.stop()).code, 0);
    }
  });
});
