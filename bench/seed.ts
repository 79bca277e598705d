// The benchmark's own database (a fresh SQLite file, or a fresh PostgreSQL database next to
// the one given, dropped afterwards: made by test/helpers/backends.ts, as the tests' are) and
// its seed: many user groups written directly through Kysely with exactly the columns the
// service writes, in batched multi-row inserts inside transactions.
import crypto from 'node:crypto';
import pg from 'pg';
import { sql } from '../src/db/kysely.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { inTransaction } from '../src/db/transaction.ts';
import { issueApiToken } from '../src/api-tokens/api-tokens.service.ts';
import { generateToken, hashToken } from '../src/auth/token-format.ts';
import type { Keyring } from '../src/crypto/keyring.ts';
import type { NewUserGroup } from '../src/user-groups/user-groups.repository.ts';
import { insertTagRowsOfNewGroups } from '../src/user-groups/hierarchy/hierarchy.repository.ts';
import { loadConfig } from '../src/config.ts';
import { createScratchDatabase, type Backend } from '../scripts/scratch-database.ts';
import { benchLayout, treeParent } from './scenarios.ts';

/** The seed's groups carry one tag: the bound of a service with the default configuration. */
const SEED_TAG_BOUND = { maxTagsPerEnvironment: loadConfig({}).maxTagsPerEnvironment };

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
    const database = await createScratchDatabase('sqlite', { prefix: 'ugs_bench' });
    return { backend: 'sqlite', ...database, description: database.url };
  }
  if (!/^postgres(ql)?:\/\//.test(adminUrl)) throw new Error(`--database-url must be postgres://… (or sqlite:), got ${adminUrl}`);
  const database = await createScratchDatabase('postgres', { prefix: 'ugs_bench', adminUrl });
  const url = new URL(database.url);
  return { backend: 'postgres', ...database, description: `${url.protocol}//${url.host}${url.pathname}` };
}

export interface SeedResult {
  apiToken: string;
  accountId: number;
  /** Plaintext tokens of a random sample of the flat groups. */
  sampleTokens: string[];
  /** Plaintext tokens of a random sample of the groups three levels deep. */
  childTokens: string[];
  /** team_id of the group 90 % of the way into the listing. */
  deepAfterTeamId: number;
  seconds: number;
}

export const ROWS_PER_INSERT = 500; // 14 columns: 7,000 parameters, under SQLite's 32,766 and PostgreSQL's 65,535
export const ROWS_PER_TRANSACTION = 20_000;

/** The fields of flat seeded group i (also what the scenarios assume: id bench-<i>, name Group <i>). */
export function seededGroupFields(i: number) {
  return {
    provided_id: `bench-${i}`,
    name: `Group ${i}`,
    mapping: JSON.stringify({ '40': `${213 + (i % 7)}` }),
    properties: JSON.stringify({ region: i % 2 ? 'emea' : 'amer', plan: 'pro', seats: 1 + (i % 50) }),
    group_tags: i % 10 === 0 ? '["tenth"]' : '[]',
  };
}

/** The fields of tree node j, group i (benchLayout): the root holds the mapping, each level adds properties. */
function treeGroupFields(i: number, j: number) {
  const level = treeParent(j) === null ? 1 : j % 100 === 0 ? 2 : 3;
  const own = [{ region: j % 2000 ? 'emea' : 'amer', plan: 'pro', currency: 'EUR', seats: 0 }, { plan: 'team', team: `t${j}` }, { seats: 1 + (j % 50) }][
    level - 1
  ];
  return {
    provided_id: `bench-${i}`,
    name: `Group ${i}`,
    mapping: level === 1 ? JSON.stringify({ '40': `${213 + (j % 7)}` }) : null,
    properties: JSON.stringify(own),
    group_tags: '[]',
    level,
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
    // PostgreSQL: no autovacuum on the benchmark's own tables, so that none analyzes them while
    // they are seeded or measured and the run measures one state from start to end (the
    // server's autovacuum setting may be on; this changes the bench's database only).
    // --analyze measures the other state.
    if (handle.dialect === 'postgres' && !analyze) {
      const { rows } = await sql<{ name: string }>`select tablename as name from pg_tables where schemaname = current_schema()`.execute(handle.db);
      for (const { name } of rows) await sql`alter table ${sql.id(name)} set (autovacuum_enabled = false)`.execute(handle.db);
    }
    const issued = await issueApiToken(
      handle,
      { accountSlug: 'bench', scopes: ['read', 'write'], allowedEnvironment: null, defaultEnvironment: 'Customer', expiresAt: null, name: 'bench' },
      { kind: 'command_line', tokenId: null, requestId: null },
      new Date(),
    );
    const account = await handle.db.selectFrom('accounts').select('id').where('slug', '=', 'bench').executeTakeFirstOrThrow();

    const { flat, tree } = benchLayout(groups);
    // Which groups' plaintext tokens to keep: uniform random samples, in random order.
    const pick = (wanted: number, from: number, keep: (j: number) => boolean) => {
      const chosen = new Set<number>();
      while (chosen.size < wanted) {
        const j = crypto.randomInt(from);
        if (keep(j)) chosen.add(j);
      }
      return chosen;
    };
    const sample = pick(Math.min(sampleSize, flat), flat, () => true);
    const childSample = tree === 0 ? new Set<number>() : pick(Math.min(sampleSize, (tree * 891) / 1000), tree, (j) => j % 1000 >= 100 && j % 100 !== 0);
    const sampleTokens = new Map<number, string>();
    const childTokens = new Map<number, string>();
    const at = new Date().toISOString();
    const tenant = { accountId: account.id, environment: 'Customer' as const };

    const groupRow = (
      fields: Pick<NewUserGroup, 'provided_id' | 'name' | 'mapping' | 'properties' | 'group_tags'>,
      parentTeamId: number | null,
      token: string,
    ): NewUserGroup => ({
      account_id: account.id,
      environment: 'Customer',
      ...fields,
      is_demo_group: 0,
      parent_team_id: parentTeamId,
      hierarchy_level: null,
      token_hash: hashToken(token),
      token_ciphertext: keyring.seal(token),
      created_at: at,
      updated_at: at,
    });
    /** Inserts rows in batched statements, and the tag rows of those that have tags (and their tags in the set); returns provided_id -> team_id. */
    const insert = async (rows: NewUserGroup[]) => {
      const teamIds = new Map<string, number>();
      await inTransaction(handle, async (trx) => {
        for (let offset = 0; offset < rows.length; offset += ROWS_PER_INSERT) {
          const inserted = await trx
            .insertInto('user_groups')
            .values(rows.slice(offset, offset + ROWS_PER_INSERT))
            .returning(['team_id', 'provided_id', 'group_tags'])
            .execute();
          // The tag rows, and the tags in the environment's tag set, as the service writes them.
          await insertTagRowsOfNewGroups(
            trx,
            inserted.map((row) => ({ tenant, teamId: row.team_id, tags: JSON.parse(row.group_tags) as string[] })),
            SEED_TAG_BOUND,
          );
          for (const row of inserted) teamIds.set(row.provided_id, row.team_id);
        }
      });
      return teamIds;
    };

    for (let start = 0; start < flat; start += ROWS_PER_TRANSACTION) {
      const end = Math.min(flat, start + ROWS_PER_TRANSACTION);
      const rows: NewUserGroup[] = [];
      for (let i = start; i < end; i++) {
        const token = generateToken('user_group');
        if (sample.has(i)) sampleTokens.set(i, token);
        rows.push(groupRow(seededGroupFields(i), null, token));
      }
      await insert(rows);
      onProgress(end);
    }

    // The trees, a level at a time: each level's parents have their team_ids by then.
    const treeTeamIds = new Map<string, number>();
    for (const level of [1, 2, 3]) {
      const rows: NewUserGroup[] = [];
      for (let j = 0; j < tree; j++) {
        const i = flat + j;
        const { level: nodeLevel, ...fields } = treeGroupFields(i, j);
        if (nodeLevel !== level) continue;
        const token = generateToken('user_group');
        if (childSample.has(j)) childTokens.set(j, token);
        const parent = treeParent(j);
        rows.push(groupRow(fields, parent === null ? null : treeTeamIds.get(`bench-${flat + parent}`)!, token));
      }
      for (let offset = 0; offset < rows.length; offset += ROWS_PER_TRANSACTION) {
        for (const [id, teamId] of await insert(rows.slice(offset, offset + ROWS_PER_TRANSACTION))) treeTeamIds.set(id, teamId);
      }
    }
    if (tree > 0) onProgress(groups);

    const deep = await handle.db
      .selectFrom('user_groups')
      .select('team_id')
      .where('account_id', '=', account.id)
      .where('environment', '=', 'Customer')
      .orderBy('team_id')
      .limit(1)
      .offset(Math.floor(flat * 0.9))
      .executeTakeFirstOrThrow();

    // The table as the API leaves it: no ANALYZE, the state of a new deployment or of a
    // table whose autovacuum has not caught up (the service must not depend on statistics).
    // --analyze measures the other state.
    if (analyze) await sql`analyze`.execute(handle.db);

    return {
      apiToken: issued.token,
      accountId: account.id,
      sampleTokens: [...sample].map((i) => sampleTokens.get(i)!),
      childTokens: [...childSample].map((j) => childTokens.get(j)!),
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

/**
 * Whether the planner has statistics on user_groups (PostgreSQL; null on SQLite), read when a
 * run ends, and whether autovacuum could have given them (the server's setting and the table's).
 */
export async function plannerStatistics(
  url: string,
): Promise<{ analyzed: boolean; lastAnalyze: string | null; lastAutoanalyze: string | null; autovacuum: { server: boolean; table: boolean } } | null> {
  if (!url.startsWith('postgres')) return null;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(`select last_analyze, last_autoanalyze from pg_stat_user_tables where relname = 'user_groups'`);
    const lastAnalyze = rows[0]?.last_analyze?.toISOString?.() ?? null;
    const lastAutoanalyze = rows[0]?.last_autoanalyze?.toISOString?.() ?? null;
    const server = (await client.query(`select current_setting('autovacuum') = 'on' as on`)).rows[0].on as boolean;
    const options = (await client.query(`select reloptions from pg_class where relname = 'user_groups' and relkind = 'r'`)).rows[0]?.reloptions as
      | string[]
      | null;
    const table = !(options ?? []).includes('autovacuum_enabled=false');
    return { analyzed: lastAnalyze !== null || lastAutoanalyze !== null, lastAnalyze, lastAutoanalyze, autovacuum: { server, table } };
  } finally {
    await client.end();
  }
}
