// The migrations after 0014, in two kinds (docs/operations.md, "Upgrades, migrations and
// rollback"), recorded in `schema_changes` rather than in Kysely's `kysely_migration`:
//
// - expand: adds only (a table, a nullable column, an index, a copy). Run at every start, while
//   instances of the previous release still serve the same database; an older instance works
//   on an expanded database and ignores what it does not know.
// - contract changes: take away what an older release still reads or writes. Run only by
//   `ugs migrate --contract`, once no instance whose code does not know it is alive
//   (instances/instances.repository.ts), or on a new, empty database where nothing older can be.
//
// Why not Kysely's Migrator for these: it refuses to start when its table lists a migration
// it does not know ("corrupted migrations"), so an older instance could neither restart during
// a rollout nor serve after a rollback. Here an older instance starts on a database a newer
// release expanded, and refuses with one line on a database a newer release contracted. The
// release before this mechanism (0.1.0) reads only kysely_migration: a contract change also writes a
// row there that it does not know, so it refuses too, with a line naming what to run.
import type { Kysely, Migration } from 'kysely';
import { sql } from './kysely.ts';
import type { Database } from './schema.ts';

export type ChangeKind = 'expand' | 'contract';

/** One migration after 0014: its name (its number first, so that names sort in order), its kind and what it does. */
export interface SchemaChange {
  name: string;
  kind: ChangeKind;
  migration: Migration;
}

export interface RecordedChange {
  name: string;
  kind: ChangeKind;
  applied_by: string;
}

/** The record of what ran, created by the first start that knows it (itself an expand step: old code never reads it). */
export async function ensureChangeTable(db: Kysely<Database>): Promise<void> {
  await db.schema
    .createTable('schema_changes')
    .ifNotExists()
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('expand', 'contract')`))
    .addColumn('applied_at', 'text', (c) => c.notNull())
    /** The release whose code applied it (package.json's version). */
    .addColumn('applied_by', 'text', (c) => c.notNull())
    .execute();
}

export async function recordedChanges(db: Kysely<Database>): Promise<RecordedChange[]> {
  const rows = await sql<RecordedChange>`select name, kind, applied_by from schema_changes order by name`.execute(db);
  return rows.rows;
}

/** Applies `changes` that are not recorded yet, in the order given, recording each. */
export async function applyChanges(db: Kysely<Database>, changes: SchemaChange[], recorded: RecordedChange[], version: string): Promise<string[]> {
  const done = new Set(recorded.map((change) => change.name));
  const applied: string[] = [];
  for (const change of changes) {
    if (done.has(change.name)) continue;
    await change.migration.up(db);
    await sql`insert into schema_changes (name, kind, applied_at, applied_by)
      values (${change.name}, ${change.kind}, ${new Date().toISOString()}, ${version})`.execute(db);
    applied.push(change.name);
  }
  return applied;
}

/**
 * The row a contract change writes into kysely_migration for the release before this mechanism: its
 * Migrator stops at a name it does not know, and prints this one ("failed to start: corrupted
 * migrations: previously executed migration <this> is missing").
 */
export function legacyRefusalName(version: string): string {
  return `9999 contracted by ${version}: this release cannot serve the database, run ${version} or later (docs/operations.md, Rollback)`;
}

/** Refuses with one line when a newer release contracted this database past what `version` knows. */
export function contractedPastThisCode(recorded: RecordedChange[], known: SchemaChange[], version: string): string | null {
  const knownNames = new Set(known.map((change) => change.name));
  const unknown = recorded.filter((change) => change.kind === 'contract' && !knownNames.has(change.name));
  if (unknown.length === 0) return null;
  const by = [...new Set(unknown.map((change) => change.applied_by))].join(', ');
  return (
    `this database was contracted by release ${by} (${unknown.map((change) => change.name).join(', ')}), which ${version} does not know: ` +
    `run ${by} or later, or restore the backup taken before the contract step (docs/operations.md, "Rollback")`
  );
}
