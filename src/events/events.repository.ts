// The SQL of the event feed (docs/api.md, "Change events"): the sequencer's moves from the
// outbox into the feed, the feed's reads (each names its account, and the environment a
// token is restricted to, docs/security.md "Tenant isolation"), and retention.
import type { Kysely, Selectable } from 'kysely';
import { sql } from '../db/kysely.ts';
import { multiRowInsert } from '../db/multi-row-insert.ts';
import type { Database, Environment, EventRow } from '../db/schema.ts';
import type { EventType } from '../outbox/outbox.ts';

type OutboxRow = Selectable<Database['event_outbox']>;

/** At most this many accounts' ranges are read in one batch when one account's rows crowd the oldest. */
const ACCOUNTS_PER_BATCH = 100;

/**
 * The outbox rows committed so far, at most `perAccount` of each account, oldest first within
 * an account, `limit` in all: a background read of every account's. The oldest rows alone were
 * one account's whenever its bulk work had put thousands there, and another account's event
 * waited behind them all.
 * Usually the oldest `limit` rows hold no more than `perAccount` of any account, and they are
 * the answer. When one account crowds them, each account's rows are read as one range of the
 * index (account_id, id) (migration 0020): first the accounts among the oldest rows, then the
 * others, found by skipping through that index from one account to the next. Nothing reads or
 * sorts the whole outbox: ranking it all by account took 50-190 ms at 20,000 rows on SQLite,
 * inside the write transaction.
 */
export async function committedOutbox(db: Kysely<Database>, limit: number, perAccount: number): Promise<OutboxRow[]> {
  const columns = ['id', 'account_id', 'environment', 'type', 'occurred_at', 'data'] as const;
  const oldest = await db.selectFrom('event_outbox').select(columns).orderBy('id').limit(limit).execute();
  const counts = new Map<number, number>();
  for (const row of oldest) counts.set(Number(row.account_id), (counts.get(Number(row.account_id)) ?? 0) + 1);
  if ([...counts.values()].every((count) => count <= perAccount)) return oldest;

  const { rows: waiting } = await sql<{ account_id: number | string }>`with recursive waiting(account_id) as (
      select min(account_id) from event_outbox
      union all
      select (select min(account_id) from event_outbox where account_id > waiting.account_id) from waiting where waiting.account_id is not null
    ) select account_id from waiting where account_id is not null`.execute(db);
  const accounts = [...new Set([...counts.keys(), ...waiting.map((row) => Number(row.account_id))])].slice(0, ACCOUNTS_PER_BATCH);
  const ranges: OutboxRow[][] = [];
  for (const accountId of accounts) {
    const range = await db.selectFrom('event_outbox').select(columns).where('account_id', '=', accountId).orderBy('id').limit(perAccount).execute();
    if (range.length > 0) ranges.push(range);
  }
  // The account whose oldest row waited longest first; each account's rows stay in their order.
  ranges.sort((a, b) => Number(a[0]!.id) - Number(b[0]!.id));
  return ranges.flat().slice(0, limit);
}

export async function outboxIsEmpty(db: Kysely<Database>): Promise<boolean> {
  return (await db.selectFrom('event_outbox').select('id').limit(1).executeTakeFirst()) === undefined;
}

/** The last seq of each account, creating a head for an account that has none. */
export async function lastSeqs(trx: Kysely<Database>, accountIds: number[]): Promise<Map<number, number>> {
  await trx
    .insertInto('event_heads')
    .values(accountIds.map((account_id) => ({ account_id, last_seq: 0, pruned_through: 0 })))
    .onConflict((oc) => oc.column('account_id').doNothing())
    .execute();
  const rows = await trx.selectFrom('event_heads').select(['account_id', 'last_seq']).where('account_id', 'in', accountIds).execute();
  return new Map(rows.map((row) => [Number(row.account_id), Number(row.last_seq)]));
}

export async function setLastSeq(trx: Kysely<Database>, accountId: number, lastSeq: number): Promise<void> {
  await trx.updateTable('event_heads').set({ last_seq: lastSeq }).where('account_id', '=', accountId).execute();
}

/** Rows per insert statement (7 parameters each). */
const EVENTS_CHUNK = 200;

type NewEventRow = Omit<EventRow, 'id'>;

const insertEventRows = multiRowInsert<NewEventRow>(['account_id', 'seq', 'environment', 'type', 'occurred_at', 'data'], (db, rows) =>
  db.insertInto('events').values(rows as unknown as NewEventRow[]),
);

export async function insertEvents(trx: Kysely<Database>, rows: NewEventRow[]): Promise<void> {
  for (let start = 0; start < rows.length; start += EVENTS_CHUNK) await insertEventRows.run(trx, rows.slice(start, start + EVENTS_CHUNK));
}

export async function deleteOutboxRows(trx: Kysely<Database>, ids: number[]): Promise<void> {
  for (let start = 0; start < ids.length; start += 500)
    await trx
      .deleteFrom('event_outbox')
      .where('id', 'in', ids.slice(start, start + 500))
      .execute();
}

/** An account's head: the last seq handed out, and the last one retention removed (0, 0 before any event). */
export async function eventHead(db: Kysely<Database>, accountId: number): Promise<{ lastSeq: number; prunedThrough: number }> {
  const row = await db.selectFrom('event_heads').select(['last_seq', 'pruned_through']).where('account_id', '=', accountId).executeTakeFirst();
  return { lastSeq: Number(row?.last_seq ?? 0), prunedThrough: Number(row?.pruned_through ?? 0) };
}

export interface FeedQuery {
  accountId: number;
  /** The environment the reader's token is restricted to, or null for every event of the account. */
  environment: Environment | null;
  afterSeq: number;
  limit: number;
  types: readonly EventType[] | null;
}

/** An account's events after a seq, in order. */
export function eventsAfter(db: Kysely<Database>, query: FeedQuery): Promise<EventRow[]> {
  return db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', query.accountId)
    .where('seq', '>', query.afterSeq)
    .$if(query.environment !== null, (q) => q.where('environment', '=', query.environment!))
    .$if(query.types !== null, (q) => q.where('type', 'in', query.types!))
    .orderBy('seq')
    .limit(query.limit)
    .execute();
}

/** The highest event id: what another instance's sequencer has added shows here. */
export async function newestEventId(db: Kysely<Database>): Promise<number> {
  const row = await db.selectFrom('events').select(sql<number | null>`max(id)`.as('id')).executeTakeFirst();
  return Number(row?.id ?? 0);
}

/**
 * Removes up to `limit` of the oldest events that occurred before `cutoff`, and records per
 * account what went. Walks the key from the oldest and stops at the first younger event:
 * never a scan of the whole table for old rows that are not there.
 */
export async function pruneEvents(trx: Kysely<Database>, cutoff: string, limit: number): Promise<number> {
  const oldest = await trx.selectFrom('events').select(['id', 'account_id', 'seq', 'occurred_at']).orderBy('id').limit(limit).execute();
  const firstKept = oldest.findIndex((row) => row.occurred_at >= cutoff);
  const expired = firstKept === -1 ? oldest : oldest.slice(0, firstKept);
  if (expired.length === 0) return 0;
  await trx
    .deleteFrom('events')
    .where('id', '<=', expired[expired.length - 1].id)
    .execute();
  const through = new Map<number, number>();
  for (const row of expired) through.set(Number(row.account_id), Math.max(through.get(Number(row.account_id)) ?? 0, Number(row.seq)));
  for (const [accountId, seq] of through) {
    await trx
      .updateTable('event_heads')
      .set({ pruned_through: sql<number>`case when pruned_through > ${seq} then pruned_through else ${seq} end` })
      .where('account_id', '=', accountId)
      .execute();
  }
  return expired.length;
}
