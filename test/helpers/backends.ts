// Which databases the suite runs on: SQLite (a real file) always; PostgreSQL when
// TEST_POSTGRES_URL is set. Each test database is new and is dropped afterwards
// (scripts/scratch-database.ts), and is named after the run it belongs to (UGS_TEST_RUN_ID,
// CONTRIBUTING.md, "Test tiers"): two runs on one server never collide, and what a crashed run
// left behind is told apart by its name and swept by that run alone (sweepTestRun).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createScratchDatabase, onConnection, type Backend, type ScratchDatabase } from '../../scripts/scratch-database.ts';

export type { Backend };
export type TestDatabase = ScratchDatabase;

export const POSTGRES_URL = process.env.TEST_POSTGRES_URL || '';
export const BACKENDS: Backend[] = POSTGRES_URL ? ['sqlite', 'postgres'] : ['sqlite'];

/** What a run id may be: it goes into database names (PostgreSQL folds them to lower case) and directory names. */
const RUN_ID = /^[a-z0-9]{1,20}$/;

/**
 * This run's id: UGS_TEST_RUN_ID, which the test command (test/run-tests.ts) sets once for
 * all its files; else one of this process's own (its pid and start time), for a file run alone.
 */
export function testRunId(env: NodeJS.ProcessEnv = process.env): string {
  const given = env.UGS_TEST_RUN_ID;
  if (given === undefined || given === '') return `p${process.pid.toString(36)}t${Date.now().toString(36)}`;
  if (!RUN_ID.test(given)) throw new Error(`UGS_TEST_RUN_ID is 1-20 characters a-z and 0-9, not ${JSON.stringify(given)}`);
  return given;
}

export const TEST_RUN_ID = testRunId();

/** Starts the name of every scratch database of the run `runId` (and, with - for _, of its SQLite directories). */
export function testDatabasePrefix(runId: string = TEST_RUN_ID): string {
  return `ugs_test_${runId}`;
}

/** A new database of this run; a copy of `copyOf` (scripts/scratch-database.ts) when given. */
export function createTestDatabase(backend: Backend, copyOf?: string): Promise<TestDatabase> {
  return createScratchDatabase(backend, { prefix: testDatabasePrefix(), adminUrl: POSTGRES_URL, copyOf });
}

/**
 * Drops what the run `runId` left behind (a file that crashed before its cleanup): its
 * PostgreSQL databases on `adminUrl`'s server and its SQLite directories. Only names that start
 * with this run's own prefix and a separator: another run's, even one whose id starts the same,
 * is never touched. Answers what it dropped.
 */
export async function sweepTestRun(runId: string, adminUrl: string = POSTGRES_URL): Promise<string[]> {
  if (!RUN_ID.test(runId)) throw new Error(`not a run id: ${JSON.stringify(runId)}`);
  const prefix = testDatabasePrefix(runId);
  const swept: string[] = [];
  const dirPrefix = `${prefix.replaceAll('_', '-')}-`;
  for (const name of fs.readdirSync(os.tmpdir())) {
    if (!name.startsWith(dirPrefix)) continue;
    fs.rmSync(path.join(os.tmpdir(), name), { recursive: true, force: true });
    swept.push(name);
  }
  if (adminUrl) {
    const pg = (await import('pg')).default;
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    let names: string[];
    try {
      const rows = await client.query<{ datname: string }>('select datname from pg_database where starts_with(datname, $1)', [`${prefix}_`]);
      names = rows.rows.map((row) => row.datname);
    } finally {
      await client.end();
    }
    for (const name of names) {
      // Only what createScratchDatabase names: the prefix, a pid and a random part.
      if (!/^[a-z0-9_]+$/.test(name)) continue;
      await onConnection(adminUrl, `drop database if exists ${name} with (force)`);
      swept.push(name);
    }
  }
  return swept;
}
