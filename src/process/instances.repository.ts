// The SQL of the instance registry (migration 0017; instance-registry.ts says what it is for).
import type { Kysely } from 'kysely';
import type { Database, InstanceRow } from '../db/schema.ts';

export type { InstanceRow };

export async function insertInstance(db: Kysely<Database>, row: InstanceRow): Promise<void> {
  await db.insertInto('instances').values(row).execute();
}

/** Moves the heartbeat on; false when the row is gone (removed as stale while this process was paused). */
export async function touchInstance(db: Kysely<Database>, id: string, seenAt: string): Promise<boolean> {
  const result = await db.updateTable('instances').set({ seen_at: seenAt }).where('id', '=', id).executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function deleteInstance(db: Kysely<Database>, id: string): Promise<void> {
  await db.deleteFrom('instances').where('id', '=', id).execute();
}

/** Rows whose heartbeat stopped before `before`: instances that died without saying so. */
export async function deleteInstancesSeenBefore(db: Kysely<Database>, before: string): Promise<void> {
  await db.deleteFrom('instances').where('seen_at', '<', before).execute();
}

/** The instances whose heartbeat is at `since` or later, oldest start first. */
export async function instancesSeenSince(db: Kysely<Database>, since: string): Promise<InstanceRow[]> {
  const rows = await db.selectFrom('instances').selectAll().where('seen_at', '>=', since).orderBy('started_at').orderBy('id').execute();
  return rows.map((row) => ({ ...row, pid: Number(row.pid) }));
}
