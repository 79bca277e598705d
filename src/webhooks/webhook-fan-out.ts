// Which events go to which webhook endpoint, and when their deliveries are made (docs/api.md,
// "Webhooks"). Not in the transaction that numbers every account's events: there, one
// account's endpoints times its events would be rows that every other account waits behind.
// Each endpoint keeps a cursor in the feed instead:
//
// - The sequencer's hook (wakeEndpoints) only marks the endpoints that take one of the new
//   events as due: one statement per account, whatever the number of events.
// - The dispatcher, holding the endpoint's lease, makes its next deliveries from the feed
//   (makeNextDeliveries): at most BATCH rows, from at most SCAN events read, in one short
//   transaction that moves the cursor. A delivery is a row from then on: retried with the
//   same webhook-id, listed, kept across restarts and kill -9, as before.
// - An endpoint with nothing more to make goes idle (next_attempt_at null) under its row lock,
//   which the hook also takes (holdEndpoints): an event is either seen by the one going idle,
//   or wakes it afterwards. Never both missed.
// - The events made while an endpoint was disabled are skipped spans of its feed (SkippedSpan).
//
// The path from a change to this fan-out: docs/architecture.md, "The path of a change".
import type { Kysely } from 'kysely';
import type { DatabaseHandle } from '../db/database.ts';
import type { Database, EventRow, WebhookEndpointRow } from '../db/schema.ts';
import { inTransaction } from '../db/transaction.ts';
import { eventHead } from '../events/events.repository.ts';
import {
  enabledEndpointsOf,
  eventWindow,
  hasPendingDeliveries,
  holdEndpoints,
  insertDeliveries,
  lockedEndpoint,
  moveCursor,
  wakeIdleEndpoints,
} from './webhook-fan-out.repository.ts';

/** Deliveries made at once for one endpoint: a batch the dispatcher sends before making more. */
export const BATCH = 100;
/** Events read at once to find them: an endpoint that takes few types walks past the others this many at a time. */
const SCAN = 1000;

/** What an endpoint takes: its types (null: every type) and its environment (null: both). */
type Filter = Pick<WebhookEndpointRow, 'types' | 'environment'>;

function takes(endpoint: Filter): (event: Pick<EventRow, 'type' | 'environment'>) => boolean {
  const types: string[] | null = endpoint.types === null ? null : JSON.parse(endpoint.types);
  return (event) => (types === null || types.includes(event.type)) && (endpoint.environment === null || event.environment === endpoint.environment);
}

/**
 * The sequencer hook, in the transaction that numbered `events`: the enabled endpoints that
 * take one of them are due now (those already due or working stay as they are).
 */
export async function wakeEndpoints(trx: Kysely<Database>, events: EventRow[], now: Date): Promise<void> {
  const byAccount = new Map<number, EventRow[]>();
  for (const event of events) {
    const accountId = Number(event.account_id);
    const ofAccount = byAccount.get(accountId);
    if (ofAccount) ofAccount.push(event);
    else byAccount.set(accountId, [event]);
  }
  if (byAccount.size === 0) return;
  const woken = new Map<number, number[]>();
  for (const endpoint of await enabledEndpointsOf(trx, [...byAccount.keys()])) {
    const accountId = Number(endpoint.account_id);
    if (!byAccount.get(accountId)!.some(takes(endpoint))) continue;
    woken.set(accountId, [...(woken.get(accountId) ?? []), Number(endpoint.id)]);
  }
  await holdEndpoints(trx, [...woken.values()].flat());
  const at = now.toISOString();
  for (const [accountId, ids] of woken) {
    const firstSeq = Math.min(...byAccount.get(accountId)!.map((event) => Number(event.seq)));
    await wakeIdleEndpoints(trx, ids, at, firstSeq - 1);
  }
}

/** [after, through]: the events after seq `after`, up to `through`, were made while the endpoint was disabled; through null: it still is. */
type SkippedSpan = [after: number, through: number | null];

function skippedSpans(json: string | null): SkippedSpan[] {
  return json === null ? [] : (JSON.parse(json) as SkippedSpan[]);
}

const spansJson = (spans: SkippedSpan[]) => (spans.length === 0 ? null : JSON.stringify(spans));

/** An endpoint disabled when the account's last event was `lastSeq`: what follows is skipped, until it is enabled. */
export function skippedFromDisabling(json: string | null, lastSeq: number): string | null {
  return spansJson([...skippedSpans(json).filter(([, through]) => through !== null), [lastSeq, null]]);
}

/** An endpoint enabled when the account's last event was `lastSeq`: the skipped span ends there. */
export function skippedAfterEnabling(json: string | null, lastSeq: number): string | null {
  return spansJson(
    skippedSpans(json)
      .map(([after, through]): SkippedSpan => [after, through ?? lastSeq])
      .filter(([after, through]) => through! > after),
  );
}

/** Moves a cursor over the skipped spans it has reached; what remains ahead of it. */
function jumpSkipped(cursor: number, spans: SkippedSpan[]): { cursor: number; ahead: SkippedSpan[] } {
  const ahead = [...spans];
  while (ahead.length > 0 && ahead[0][1] !== null && cursor >= ahead[0][0]) cursor = Math.max(cursor, ahead.shift()![1]!);
  return { cursor, ahead: ahead.filter(([, through]) => through === null || through > cursor) };
}

export type MadeDeliveries = 'made' | 'walked' | 'idle' | 'gone';

/**
 * Makes the endpoint's next deliveries from the feed, in one transaction under its row lock:
 * 'made' (pending deliveries are there to send), 'walked' (the cursor moved past events it does
 * not take: call again), 'idle' (nothing more: it sleeps until an event wakes it), 'gone'
 * (deleted or disabled).
 */
export function makeNextDeliveries(handle: DatabaseHandle, endpointId: number, now: Date): Promise<MadeDeliveries> {
  return inTransaction(handle, async (trx) => {
    const endpoint = await lockedEndpoint(trx, endpointId);
    if (!endpoint || endpoint.disabled_at !== null) return 'gone';
    if (await hasPendingDeliveries(trx, endpointId)) return 'made';
    const accountId = Number(endpoint.account_id);
    // Every event up to the head is visible from here on: the sequencer writes both in one transaction.
    const head = (await eventHead(trx, accountId)).lastSeq;
    const start = jumpSkipped(Number(endpoint.cursor_seq), skippedSpans(endpoint.skipped_seqs));
    const until = Math.min(head, start.ahead[0]?.[0] ?? Number.POSITIVE_INFINITY);
    const window = start.cursor < until ? await eventWindow(trx, accountId, start.cursor, until, SCAN) : [];
    const picked = window.filter(takes(endpoint)).slice(0, BATCH);
    const reached =
      picked.length === BATCH ? Number(picked[BATCH - 1].seq) : window.length === SCAN ? Number(window[SCAN - 1].seq) : Math.max(start.cursor, until);
    const end = jumpSkipped(reached, start.ahead);
    const at = now.toISOString();
    await insertDeliveries(
      trx,
      picked.map((event) => ({
        endpoint_id: endpointId,
        account_id: accountId,
        event_seq: Number(event.seq),
        event_type: event.type,
        status: 'pending' as const,
        next_attempt_at: at,
        created_at: at,
      })),
    );
    // A span still open (disabled, and enabled meanwhile by no one) is as far as it may go.
    const blocked = end.ahead[0]?.[1] === null && end.cursor >= end.ahead[0][0];
    const idle = picked.length === 0 && (end.cursor >= head || blocked);
    await moveCursor(trx, endpointId, end.cursor, spansJson(end.ahead), idle);
    return picked.length > 0 ? 'made' : idle ? 'idle' : 'walked';
  });
}

/**
 * The account's last event seq: where a new endpoint's feed starts (the event of its creation
 * comes next), and where a disabled span starts or ends.
 */
export async function lastEventSeq(trx: Kysely<Database>, accountId: number): Promise<number> {
  return (await eventHead(trx, accountId)).lastSeq;
}
