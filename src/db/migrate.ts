// One migration set for both dialects, listed explicitly (no directory scanning, so it
// survives bundling). Several instances may start at once on an empty database: on
// PostgreSQL a session advisory lock lets one migrate while the others wait; on SQLite the
// write lock, taken up front, does the same.
import { Migrator, sql } from './kysely.ts';
import type { Kysely, Migration, MigrationProvider } from 'kysely';
import type { Database } from './schema.ts';
import type { DatabaseHandle, Dialect } from './database.ts';
import { retryWhileLocked } from './sqlite-lock.ts';
import { initial } from './migrations/0001-initial.ts';
import { plansWithoutStatistics } from './migrations/0002-plans-without-statistics.ts';
import { hierarchyAndTags } from './migrations/0003-hierarchy-and-tags.ts';
import { embedSigningKeys } from './migrations/0004-embed-signing-keys.ts';
import { tenantColumns } from './migrations/0005-tenant-columns.ts';

const MIGRATION_LOCK_KEY = 726_415_001; // arbitrary, fixed: "ugs migrations"
/** SQLite: how long a start waits for another process that is migrating (or writing). */
const MIGRATION_LOCK_WAIT_MS = 60_000;

function migrationsFor(dialect: Dialect): Record<string, Migration> {
  return {
    '0001-initial': initial(dialect),
    '0002-plans-without-statistics': plansWithoutStatistics(dialect),
    '0003-hierarchy-and-tags': hierarchyAndTags(dialect),
    '0004-embed-signing-keys': embedSigningKeys(),
    '0005-tenant-columns': tenantColumns(dialect),
  };
}

export interface MigrationOutcome {
  applied: string[];
}

export async function migrateToLatest(handle: DatabaseHandle): Promise<MigrationOutcome> {
  const provider: MigrationProvider = { getMigrations: async () => migrationsFor(handle.dialect) };
  const run = async (db: Kysely<Database>, disableTransactions: boolean): Promise<MigrationOutcome> => {
    const { error, results } = await new Migrator({ db, provider, disableTransactions }).migrateToLatest();
    if (error) throw error;
    return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) };
  };

  return handle.db.connection().execute(async (conn) => {
    if (handle.dialect === 'postgres') {
      await sql`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`.execute(conn);
      try {
        return await run(handle.db, false);
      } finally {
        await sql`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`.execute(conn);
      }
    }
    // SQLite: hold the write lock from before the first read of the migration table to the
    // end, so a second process waits and then finds the work done.
    await retryWhileLocked(() => sql`begin immediate`.execute(conn), MIGRATION_LOCK_WAIT_MS);
    try {
      const outcome = await run(conn, true);
      await sql`commit`.execute(conn);
      return outcome;
    } catch (err) {
      await sql`rollback`.execute(conn).catch(() => undefined);
      throw err;
    }
  });
}
