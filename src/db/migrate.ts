// One migration set for both dialects, listed explicitly (no directory scanning, so it
// survives bundling). Several instances may start at once on an empty database: on
// PostgreSQL a session advisory lock lets one migrate while the others wait; on SQLite the
// loser of the write-lock race gets SQLITE_BUSY and simply tries again, finding the work done.
import { Migrator, sql, type Migration, type MigrationProvider } from 'kysely';
import type { DatabaseHandle, Dialect } from './database.ts';
import { initial } from './migrations/0001-initial.ts';

const MIGRATION_LOCK_KEY = 726_415_001; // arbitrary, fixed: "ugs migrations"

function migrationsFor(dialect: Dialect): Record<string, Migration> {
  return {
    '0001-initial': initial(dialect),
  };
}

export interface MigrationOutcome {
  applied: string[];
}

export async function migrateToLatest(handle: DatabaseHandle): Promise<MigrationOutcome> {
  const provider: MigrationProvider = { getMigrations: async () => migrationsFor(handle.dialect) };
  const migrator = new Migrator({ db: handle.db, provider });
  const run = async (): Promise<MigrationOutcome> => {
    const { error, results } = await migrator.migrateToLatest();
    if (error) throw error;
    return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) };
  };

  if (handle.dialect === 'postgres') {
    return handle.db.connection().execute(async (conn) => {
      await sql`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`.execute(conn);
      try {
        return await run();
      } finally {
        await sql`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`.execute(conn);
      }
    });
  }
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (attempt >= 20 || !String((err as { code?: string }).code).startsWith('SQLITE_BUSY')) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
    }
  }
}
