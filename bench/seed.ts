// The benchmark's own database (a fresh SQLite file, or a fresh PostgreSQL database next to
// the one given, dropped afterwards: made by test/helpers/backends.ts, as the tests' are) and
// its seed: many user groups written directly through Kysely with exactly the columns the
// service writes, in batched multi-row inserts inside transactions.
import crypto from 'node:crypto';
import pg from 'pg';
import { sql } from 'kysely';
import { openMigratedDatabase } from '../src/runtime.ts';
import { inTransaction } from '../src/db/transaction.ts';
import { issueApiToken } from '../src/auth/api-tokens.service.ts';
import { generateToken, hashToken } from '../src/auth/token-format.ts';
import type { Keyring } from '../src/crypto/keyring.ts';
import type { NewUserGroup } from '../src/user-groups/user-groups.repository.ts';
import { createTestDatabase, type Backend } from '../test/helpers/backends.ts';

export type { Backend };

export interface BenchDatabase {
  backend: Backend;
  url: string;
  /** Where it lives, for the report (never a password). */
  description: string;
  drop(): Promise<void>;
}

/** `adminUrl`: --database-url, a PostgreSQL database to create the benchmark's next to; SQLite when absent or sqlite:. */
export async function createBenchDatabase(adminUrl: string | undefined): Promise<BenchDatabase> {
  if (!adminUrl || adminUrl.startsWith('sqlite:')) {
    const database = await createTestDatabase('sqlite', { prefix: 'ugs_bench' });
    return { backend: 'sqlite', ...database, description: database.url };
  }
  if (!/^postgres(ql)?:\/\//.test(adminUrl)) throw new Error(`--database-url must be postgres://… (or sqlite:), got ${adminUrl}`);
  const database = await createTestDatabase('postgres', { prefix: 'ugs_bench', adminUrl });
  const url = new URL(database.url);
  return { backend: 'postgres', ...database, description: `${url.protocol}//${url.host}${url.pathname}` };
}

export interface SeedResult {
  apiToken: string;
  accountId: number;
  /** Plaintext tokens of a random sample of the seeded groups. */
  sampleTokens: string[];
  /** team_id of the group 90 % of the way into the listing. */
  deepAfterTeamId: number;
  seconds: number;
}

export const ROWS_PER_INSERT = 500; // 11 columns: 5,500 parameters, under SQLite's 32,766 and PostgreSQL's 65,535
export const ROWS_PER_TRANSACTION = 20_000;

/** The fields of seeded group i (also what the scenarios assume: id bench-<i>, name Group <i>). */
export function seededGroupFields(i: number) {
  return {
    provided_id: `bench-${i}`,
    name: `Group ${i}`,
    mapping: JSON.stringify({ '40': `${213 + (i % 7)}` }),
    properties: JSON.stringify({ region: i % 2 ? 'emea' : 'amer', plan: 'pro', seats: 1 + (i % 50) }),
  };
}

export async function seedDatabase(
  url: string,
  keyring: Keyring,
  groups: number,
  sampleSize: number,
  onProgress: (done: number) => void = () => undefined,
  analyze = false,
): Promise<SeedResult> {
  const started = performance.now();
  const { handle } = await openMigratedDatabase({ databaseUrl: url });
  try {
    const issued = await issueApiToken(
      handle,
      { accountSlug: 'bench', scopes: ['read', 'write'], allowedEnvironment: null, defaultEnvironment: 'Customer', expiresAt: null, name: 'bench' },
      { tokenId: null, requestId: null },
      new Date(),
    );
    const account = await handle.db.selectFrom('accounts').select('id').where('slug', '=', 'bench').executeTakeFirstOrThrow();

    // Which groups' plaintext tokens to keep: a uniform random sample, in random order.
    const sample = new Set<number>();
    const wanted = Math.min(sampleSize, groups);
    while (sample.size < wanted) sample.add(crypto.randomInt(groups));
    const sampleTokens = new Map<number, string>();

    const at = new Date().toISOString();
    for (let start = 0; start < groups; start += ROWS_PER_TRANSACTION) {
      const end = Math.min(groups, start + ROWS_PER_TRANSACTION);
      const rows: NewUserGroup[] = [];
      for (let i = start; i < end; i++) {
        const token = generateToken('user_group');
        if (sample.has(i)) sampleTokens.set(i, token);
        rows.push({
          account_id: account.id,
          environment: 'Customer',
          ...seededGroupFields(i),
          is_demo_group: 0,
          parent_team_id: null,
          hierarchy_level: null,
          group_tags: '[]',
          token_hash: hashToken(token),
          token_ciphertext: keyring.seal(token),
          created_at: at,
          updated_at: at,
        });
      }
      await inTransaction(handle, async (trx) => {
        for (let offset = 0; offset < rows.length; offset += ROWS_PER_INSERT) {
          await trx.insertInto('user_groups').values(rows.slice(offset, offset + ROWS_PER_INSERT)).execute();
        }
      });
      onProgress(end);
    }

    const deep = await handle.db
      .selectFrom('user_groups')
      .select('team_id')
      .where('account_id', '=', account.id)
      .where('environment', '=', 'Customer')
      .orderBy('team_id')
      .limit(1)
      .offset(Math.floor(groups * 0.9))
      .executeTakeFirstOrThrow();

    // The table as the API leaves it: no ANALYZE, the state of a new deployment or of a
    // table whose autovacuum has not caught up (the service must not depend on statistics).
    // --analyze measures the other state.
    if (analyze) await sql`analyze`.execute(handle.db);

    return {
      apiToken: issued.token,
      accountId: account.id,
      sampleTokens: [...sample].map((i) => sampleTokens.get(i)!),
      deepAfterTeamId: deep.team_id,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await handle.close();
  }
}

export function cursorAfter(teamId: number): string {
  return Buffer.from(JSON.stringify({ after: teamId })).toString('base64url');
}

/** Whether the planner has statistics on user_groups (PostgreSQL; null on SQLite), read when a run ends. */
export async function plannerStatistics(url: string): Promise<{ analyzed: boolean; lastAnalyze: string | null; lastAutoanalyze: string | null } | null> {
  if (!url.startsWith('postgres')) return null;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(`select last_analyze, last_autoanalyze from pg_stat_user_tables where relname = 'user_groups'`);
    const lastAnalyze = rows[0]?.last_analyze?.toISOString?.() ?? null;
    const lastAutoanalyze = rows[0]?.last_autoanalyze?.toISOString?.() ?? null;
    return { analyzed: lastAnalyze !== null || lastAutoanalyze !== null, lastAnalyze, lastAutoanalyze };
  } finally {
    await client.end();
  }
}
