// One migration set for both dialects, listed explicitly (no directory scanning, so it
// survives bundling): the legacy list 0001-0014, recorded by Kysely's Migrator in
// kysely_migration and frozen (the release 0.1.0 reads that table and refuses to start on a name
// it does not know), then the expand and contract changes (schema-changes.ts), recorded in
// schema_changes. A new migration is one of those two kinds, never a legacy one. Several instances may start at once on an empty database: on
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
import { heavyOperations } from './migrations/0016-heavy-operations.ts';
import { instanceRegistry } from './migrations/0017-instance-registry.ts';
import { SERVICE_VERSION } from '../foundations/version.ts';
import {
  applyChanges,
  contractedPastThisCode,
  ensureChangeTable,
  legacyRefusalName,
  recordedChanges,
  type RecordedChange,
  type SchemaChange,
} from './schema-changes.ts';
import { secretKeys } from './migrations/0018-secret-keys.ts';
import { scopedIds } from './migrations/0019-scoped-ids.ts';
import { outboxByAccount } from './migrations/0020-outbox-by-account.ts';

export const MIGRATION_LOCK_KEY = 726_415_001; // arbitrary, fixed: "ugs migrations"
/** SQLite: how long a start waits for another process that is migrating (or writing). */
const MIGRATION_LOCK_WAIT_MS = 60_000;

/**
 * The legacy migrations, by name, in order (exported for the tests of a migration's data
 * rewrites). Frozen: add nothing here; a new migration goes to expandChanges or contractChanges.
 */
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

/** The legacy migrations' names, in the order they run. */
export const MIGRATION_NAMES = Object.keys(migrationsFor('sqlite'));

/**
 * Expand changes, in order: safe while the previous release serves the same database (add,
 * never drop or rename what it reads or writes). Run at every start.
 */
export function expandChanges(dialect: Dialect): SchemaChange[] {
  return [
    { name: '0016-heavy-operations', kind: 'expand', migration: heavyOperations(dialect) },
    { name: '0017-instance-registry', kind: 'expand', migration: instanceRegistry(dialect) },
    { name: '0018-secret-keys', kind: 'expand', migration: secretKeys() },
    { name: '0019-scoped-ids', kind: 'expand', migration: scopedIds() },
    { name: '0020-outbox-by-account', kind: 'expand', migration: outboxByAccount() },
  ];
}

/**
 * Contract changes, in order: each takes away what an older release still uses, so it runs only
 * with `ugs migrate --contract`, once no instance whose code does not know it is alive (or on a
 * new database). None yet.
 */
export function contractChanges(_dialect: Dialect): SchemaChange[] {
  return [];
}

/** The name of the last migration this code knows: what an instance records as its schema (the contract step compares). */
export function lastKnownChange(dialect: Dialect): string {
  return [...MIGRATION_NAMES, ...[...expandChanges(dialect), ...contractChanges(dialect)].map((change) => change.name)].sort().at(-1)!;
}

export interface MigrationOutcome {
  applied: string[];
  /** Expand changes a newer release made, which this code does not know (it works on them). */
  newer: string[];
}

export interface MigrationOptions {
  /** Also the contract changes (ugs migrate --contract). On a new, empty database they always run. */
  contract?: boolean;
  /** Called before contract changes run on a database in use, with those changes: throws to refuse (the live instances' check). */
  beforeContract?: (db: Kysely<Database>, pending: SchemaChange[]) => Promise<void>;
  /** Other change lists than this code's (tests of the mechanism). */
  changes?: { expand: SchemaChange[]; contract: SchemaChange[] };
}

/** A start or a migration that must not go on, with the one line that says why. */
export class SchemaRefused extends Error {}

export async function migrateToLatest(handle: DatabaseHandle, options: MigrationOptions = {}): Promise<MigrationOutcome> {
  const provider: MigrationProvider = { getMigrations: async () => migrationsFor(handle.dialect) };
  const expand = options.changes?.expand ?? expandChanges(handle.dialect);
  const contract = options.changes?.contract ?? contractChanges(handle.dialect);
  const run = async (db: Kysely<Database>, disableTransactions: boolean): Promise<MigrationOutcome> => {
    const legacyDone = await legacyApplied(db, handle.dialect);
    const applied: string[] = [];
    // Kysely's Migrator only while a legacy migration is missing: past 0014 its table may hold
    // the row a contract change writes for the release 0.1.0, which the Migrator would refuse.
    if (!MIGRATION_NAMES.every((name) => legacyDone.includes(name))) {
      const { error, results } = await new Migrator({ db, provider, disableTransactions }).migrateToLatest();
      if (error) throw error;
      applied.push(...(results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName));
    }
    await ensureChangeTable(db);
    const recorded = await recordedChanges(db);
    const refusal = contractedPastThisCode(recorded, [...expand, ...contract], SERVICE_VERSION);
    if (refusal) throw new SchemaRefused(refusal);
    applied.push(...(await applyChanges(db, expand, recorded, SERVICE_VERSION)));
    const fresh = legacyDone.length === 0;
    if (options.contract || fresh) {
      const pending = contract.filter((change) => !recorded.some((r) => r.name === change.name));
      if (pending.length > 0 && !fresh) await options.beforeContract?.(db, pending);
      const contracted = await applyChanges(db, contract, recorded, SERVICE_VERSION);
      if (contracted.length > 0) await refuseLegacyRelease(db);
      applied.push(...contracted);
    }
    const known = new Set([...expand, ...contract].map((change) => change.name));
    return { applied, newer: recorded.filter((change: RecordedChange) => !known.has(change.name)).map((change) => change.name) };
  };

  return handle.db.connection().execute(async (conn) => {
    // Hold the lock from before the first read of the migration table to the end, so a
    // second process waits and then finds the work done. (Kysely's Migrator takes a session
    // lock of its own inside; it is released before the commit, on the same connection.)
    if (handle.dialect === 'postgres') await sql`begin`.execute(conn);
    else await retryWhileLocked(() => sql`begin immediate`.execute(conn), MIGRATION_LOCK_WAIT_MS);
    try {
      if (handle.dialect === 'postgres') await takeMigrationLock(conn);
      const outcome = await run(conn, true);
      await sql`commit`.execute(conn);
      return outcome;
    } catch (err) {
      await sql`rollback`.execute(conn).catch(() => undefined);
      throw err;
    }
  });
}

/**
 * PostgreSQL: the migration lock of this transaction, waited for as long as SQLite's
 * (MIGRATION_LOCK_WAIT_MS), one try every 100 ms. A blocking pg_advisory_xact_lock was cut by
 * the session's lock_timeout (database.ts, SESSION_SETTINGS): a process that started while
 * another migrated a new database on a loaded host failed its start instead of waiting.
 */
async function takeMigrationLock(conn: Kysely<Database>): Promise<void> {
  const giveUpAt = Date.now() + MIGRATION_LOCK_WAIT_MS;
  for (;;) {
    const { rows } = await sql<{ taken: boolean }>`select pg_try_advisory_xact_lock(${MIGRATION_LOCK_KEY}) as taken`.execute(conn);
    if (rows[0]?.taken) return;
    if (Date.now() >= giveUpAt) throw new Error(`another process held the migration lock for ${MIGRATION_LOCK_WAIT_MS / 1000} s: is a migration stuck?`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The legacy migrations recorded (none on a new database, where kysely_migration does not exist yet). */
async function legacyApplied(db: Kysely<Database>, dialect: Dialect): Promise<string[]> {
  const exists =
    dialect === 'postgres'
      ? await sql<{ found: string | null }>`select to_regclass('kysely_migration')::text as found`.execute(db).then((r) => r.rows[0]?.found != null)
      : await sql`select 1 from sqlite_master where type = 'table' and name = 'kysely_migration'`.execute(db).then((r) => r.rows.length > 0);
  if (!exists) return [];
  return (await sql<{ name: string }>`select name from kysely_migration`.execute(db)).rows.map((row) => row.name);
}

/** Once contracted, the release 0.1.0 (which reads only kysely_migration) refuses to start, naming the release to run. */
async function refuseLegacyRelease(db: Kysely<Database>): Promise<void> {
  const name = legacyRefusalName(SERVICE_VERSION);
  await sql`delete from kysely_migration where name like '9999 contracted by %'`.execute(db);
  await sql`insert into kysely_migration (name, timestamp) values (${name}, ${new Date().toISOString()})`.execute(db);
}
