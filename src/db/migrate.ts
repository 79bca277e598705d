// One migration set for both dialects, listed explicitly (no directory scanning, so it
// survives bundling). Several instances may start at once on an empty database: on
// PostgreSQL a transaction-level advisory lock lets one migrate while the others wait; on
// SQLite the write lock, taken up front, does the same. Either way the whole run is one
// transaction on one connection, which is also what PgBouncer in transaction pool mode keeps
// on one server connection: a session-level lock there could be taken on one server
// connection and released on another.
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
import { changeEvents } from './migrations/0006-change-events.ts';
import { idempotencyKeys } from './migrations/0007-idempotency-keys.ts';
import { idempotencyKeysPerToken } from './migrations/0008-idempotency-keys-per-token.ts';
import { webhookCursors } from './migrations/0009-webhook-cursors.ts';
import { eventStreams } from './migrations/0010-event-streams.ts';
import { auditActor } from './migrations/0012-audit-actor.ts';
import { groupTagSet } from './migrations/0014-group-tag-set.ts';

const MIGRATION_LOCK_KEY = 726_415_001; // arbitrary, fixed: "ugs migrations"
/** SQLite: how long a start waits for another process that is migrating (or writing). */
const MIGRATION_LOCK_WAIT_MS = 60_000;

/** Every migration, by name, in order (exported for the tests of a migration's data rewrites). */
export function migrationsFor(dialect: Dialect): Record<string, Migration> {
  return {
    '0001-initial': initial(dialect),
    '0002-plans-without-statistics': plansWithoutStatistics(dialect),
    '0003-hierarchy-and-tags': hierarchyAndTags(dialect),
    '0004-embed-signing-keys': embedSigningKeys(),
    '0005-tenant-columns': tenantColumns(dialect),
    '0006-change-events': changeEvents(dialect),
    '0007-idempotency-keys': idempotencyKeys(dialect),
    '0008-idempotency-keys-per-token': idempotencyKeysPerToken(dialect),
    '0009-webhook-cursors': webhookCursors(dialect),
    '0010-event-streams': eventStreams(dialect),
    '0012-audit-actor': auditActor(),
    '0014-group-tag-set': groupTagSet(dialect),
  };
}

/** Every migration's name, in the order they run. */
export const MIGRATION_NAMES = Object.keys(migrationsFor('sqlite'));

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
    // Hold the lock from before the first read of the migration table to the end, so a
    // second process waits and then finds the work done. (Kysely's Migrator takes a session
    // lock of its own inside; it is released before the commit, on the same connection.)
    if (handle.dialect === 'postgres') await sql`begin`.execute(conn);
    else await retryWhileLocked(() => sql`begin immediate`.execute(conn), MIGRATION_LOCK_WAIT_MS);
    try {
      if (handle.dialect === 'postgres') await sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`.execute(conn);
      const outcome = await run(conn, true);
      await sql`commit`.execute(conn);
      return outcome;
    } catch (err) {
      await sql`rollback`.execute(conn).catch(() => undefined);
      throw err;
    }
  });
}
