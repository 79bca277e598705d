// The SQL of the open event streams' leases (migration 0010; docs/api.md, "The stream"): one
// row per open stream on any instance, each statement naming its account.
import type { Kysely } from 'kysely';
import { sql } from '../db/kysely.ts';
import type { Dialect } from '../db/database.ts';
import type { Database } from '../db/schema.ts';

const STREAMS_LOCK_CLASS = 726_415_010; // arbitrary, fixed: "ugs event streams" (see hierarchy.repository.ts)

/**
 * Makes the account's stream opens take turns, so that two opens at the limit cannot both
 * count one stream free: SQLite's BEGIN IMMEDIATE already does; PostgreSQL takes a
 * transaction advisory lock of the account.
 */
export async function lockAccountStreams(trx: Kysely<Database>, dialect: Dialect, accountId: number): Promise<void> {
  if (dialect === 'postgres') await sql`select pg_advisory_xact_lock(${sql.lit(STREAMS_LOCK_CLASS)}, hashtext(${String(accountId)}))`.execute(trx);
}

/** Deletes the account's leases that lapsed (streams of an instance that died). */
export async function deleteLapsedStreams(trx: Kysely<Database>, accountId: number, now: string): Promise<void> {
  await trx.deleteFrom('event_streams').where('account_id', '=', accountId).where('lease_until', '<', now).execute();
}

/** The account's open streams, and how many of them the API token opened. */
export async function countOpenStreams(trx: Kysely<Database>, accountId: number, apiTokenId: number, now: string): Promise<{ account: number; token: number }> {
  const row = await trx
    .selectFrom('event_streams')
    .select((eb) => [
      eb.fn.countAll<number | string>().as('account'),
      eb.fn.sum<number | string | null>(eb.case().when('api_token_id', '=', apiTokenId).then(1).else(0).end()).as('token'),
    ])
    .where('account_id', '=', accountId)
    .where('lease_until', '>=', now)
    .executeTakeFirst();
  return { account: Number(row?.account ?? 0), token: Number(row?.token ?? 0) };
}

export async function insertStream(
  trx: Kysely<Database>,
  row: { accountId: number; apiTokenId: number; openedAt: string; leaseUntil: string },
): Promise<number> {
  const inserted = await trx
    .insertInto('event_streams')
    .values({ account_id: row.accountId, api_token_id: row.apiTokenId, opened_at: row.openedAt, lease_until: row.leaseUntil })
    .returning('id')
    .executeTakeFirstOrThrow();
  return Number(inserted.id);
}

/** Rows per renewal statement. */
const RENEW_CHUNK = 500;

/** Moves the leases of an account's streams that this instance serves on to `leaseUntil`. */
export async function renewStreams(db: Kysely<Database>, accountId: number, ids: readonly number[], leaseUntil: string): Promise<void> {
  for (let start = 0; start < ids.length; start += RENEW_CHUNK) {
    await db
      .updateTable('event_streams')
      .set({ lease_until: leaseUntil })
      .where('account_id', '=', accountId)
      .where('id', 'in', ids.slice(start, start + RENEW_CHUNK))
      .execute();
  }
}

export async function deleteStream(db: Kysely<Database>, accountId: number, id: number): Promise<void> {
  await db.deleteFrom('event_streams').where('account_id', '=', accountId).where('id', '=', id).execute();
}
