// The SQL of making webhook deliveries from the feed (webhook-fan-out.ts). Background
// statements of the sequencer and the dispatcher: each goes by an endpoint's key, or by the
// account whose events it reads.
import type { Kysely } from 'kysely';
import { sql } from '../db/kysely.ts';
import { dialectOf } from '../db/database.ts';
import type { Database, EventRow, WebhookDeliveryRow, WebhookEndpointRow } from '../db/schema.ts';

/** The enabled endpoints of these accounts, with what they take. */
export function enabledEndpointsOf(trx: Kysely<Database>, accountIds: number[]) {
  return trx
    .selectFrom('webhook_endpoints')
    .select(['id', 'account_id', 'types', 'environment'])
    .where('account_id', 'in', accountIds)
    .where('disabled_at', 'is', null)
    .execute();
}

/**
 * Holds these endpoints' rows until the transaction ends (PostgreSQL, in key order; SQLite's
 * write lock already holds everything): an endpoint going idle at the same time either runs
 * before (and this transaction finds it idle) or after (and finds this transaction's events).
 */
export async function holdEndpoints(trx: Kysely<Database>, ids: readonly number[]): Promise<void> {
  if (ids.length === 0 || dialectOf(trx) !== 'postgres') return;
  await trx
    .selectFrom('webhook_endpoints')
    .select('id')
    .where(
      'id',
      'in',
      [...ids].sort((a, b) => a - b),
    )
    .orderBy('id')
    .forShare()
    .execute();
}

/**
 * Idle endpoints among these become due now. Their cursor moves up to `through`: an idle
 * endpoint had its deliveries made for every event it takes up to then (a filtered endpoint
 * need not walk the events it does not take).
 */
export async function wakeIdleEndpoints(trx: Kysely<Database>, ids: readonly number[], now: string, through: number): Promise<void> {
  await trx
    .updateTable('webhook_endpoints')
    .set({ next_attempt_at: now, cursor_seq: sql<number>`case when cursor_seq < ${through} then ${through} else cursor_seq end` })
    .where('id', 'in', ids)
    .where('next_attempt_at', 'is', null)
    .execute();
}

/** The endpoint, its row locked until the transaction ends (PostgreSQL; SQLite's write lock already is). */
export function lockedEndpoint(trx: Kysely<Database>, id: number): Promise<WebhookEndpointRow | undefined> {
  return trx
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('id', '=', id)
    .$if(dialectOf(trx) === 'postgres', (q) => q.forUpdate())
    .executeTakeFirst();
}

export async function hasPendingDeliveries(trx: Kysely<Database>, endpointId: number): Promise<boolean> {
  const row = await trx
    .selectFrom('webhook_deliveries')
    .select('id')
    .where('endpoint_id', '=', endpointId)
    .where('status', '=', 'pending')
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Up to `limit` of an account's events after `afterSeq` and up to `throughSeq`, in order: what a filter needs of them. */
export function eventWindow(
  trx: Kysely<Database>,
  accountId: number,
  afterSeq: number,
  throughSeq: number,
  limit: number,
): Promise<Pick<EventRow, 'seq' | 'type' | 'environment'>[]> {
  return trx
    .selectFrom('events')
    .select(['seq', 'type', 'environment'])
    .where('account_id', '=', accountId)
    .where('seq', '>', afterSeq)
    .where('seq', '<=', throughSeq)
    .orderBy('seq')
    .limit(limit)
    .execute();
}

/** Rows per insert statement (7 parameters each). */
const DELIVERIES_CHUNK = 100;

export async function insertDeliveries(trx: Kysely<Database>, rows: Omit<WebhookDeliveryRow, 'id' | 'attempts' | 'finished_at'>[]): Promise<void> {
  for (let start = 0; start < rows.length; start += DELIVERIES_CHUNK)
    await trx
      .insertInto('webhook_deliveries')
      .values(rows.slice(start, start + DELIVERIES_CHUNK))
      .execute();
}

/** Where the endpoint's deliveries are made up to; `idle`: nothing more to deliver until an event wakes it. */
export async function moveCursor(trx: Kysely<Database>, id: number, cursorSeq: number, skippedSeqs: string | null, idle: boolean): Promise<void> {
  await trx
    .updateTable('webhook_endpoints')
    .set({ cursor_seq: cursorSeq, skipped_seqs: skippedSeqs, ...(idle ? { next_attempt_at: null } : {}) })
    .where('id', '=', id)
    .execute();
}

/**
 * When the oldest event still waiting for an enabled endpoint occurred: that of a pending
 * delivery, or the first event after the cursor of an endpoint with work to do; null if none.
 */
export async function oldestWaitingEvent(db: Kysely<Database>): Promise<string | null> {
  const made = await sql<{ oldest: string | null }>`select min(coalesce(events.occurred_at, webhook_deliveries.created_at)) as oldest
    from webhook_deliveries
    join webhook_endpoints on webhook_endpoints.id = webhook_deliveries.endpoint_id
    left join events on events.account_id = webhook_deliveries.account_id and events.seq = webhook_deliveries.event_seq
    where webhook_deliveries.status = 'pending' and webhook_endpoints.disabled_at is null`.execute(db);
  const notYetMade = await sql<{ oldest: string | null }>`select min(events.occurred_at) as oldest
    from webhook_endpoints
    join events on events.account_id = webhook_endpoints.account_id and events.seq = (
      select min(later.seq) from events later where later.account_id = webhook_endpoints.account_id and later.seq > webhook_endpoints.cursor_seq
    )
    where webhook_endpoints.disabled_at is null and webhook_endpoints.next_attempt_at is not null`.execute(db);
  const times = [made.rows[0]?.oldest, notYetMade.rows[0]?.oldest].filter((time): time is string => typeof time === 'string');
  return times.length === 0 ? null : times.sort()[0];
}
