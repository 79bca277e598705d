// The transactional outbox of change events (docs/api.md, "Change events"). Every history
// entry writes its event here in the same transaction (appendAudits, audit/audit.repository.ts),
// so a committed change always has one and a change that rolls back has none; the sequencer
// (events/sequencer.ts) moves them into the feed. An event never holds a token or a key. The whole
// path, from the change to the webhook attempt: docs/architecture.md, "The path of a change".
import type { Insertable, Kysely } from 'kysely';
import { sql } from '../db/kysely.ts';
import { multiRowInsert } from '../db/multi-row-insert.ts';
import type { Database, Environment } from '../db/schema.ts';
import type { EventType } from './event-types.ts';

export { EVENT_TYPES, type EventType } from './event-types.ts';

export interface ChangeEvent {
  accountId: number;
  /** A group's environment; the environment an API token is restricted to; null otherwise. */
  environment: Environment | null;
  type: EventType;
  occurredAt: Date;
  data: Record<string, unknown>;
}

/** Rows per insert statement (6 parameters each). */
const OUTBOX_CHUNK = 300;

type OutboxRow = Omit<Insertable<Database['event_outbox']>, 'id'>;

const insertOutboxRows = multiRowInsert<OutboxRow>(['account_id', 'environment', 'type', 'occurred_at', 'data'], (db, rows) =>
  db.insertInto('event_outbox').values(rows as unknown as OutboxRow[]),
);

export async function appendEvents(db: Kysely<Database>, events: readonly ChangeEvent[]): Promise<void> {
  for (let start = 0; start < events.length; start += OUTBOX_CHUNK) {
    await insertOutboxRows.run(
      db,
      events.slice(start, start + OUTBOX_CHUNK).map((event) => ({
        account_id: event.accountId,
        environment: event.environment,
        type: event.type,
        occurred_at: event.occurredAt.toISOString(),
        data: JSON.stringify(event.data),
      })),
    );
  }
}

/**
 * An event of the whole service (an embed signing key added or retired: what verifies every
 * account's embed tokens) goes into every account's feed, with no environment.
 */
export async function appendEventForEveryAccount(db: Kysely<Database>, type: EventType, occurredAt: Date, data: Record<string, unknown>): Promise<void> {
  await db
    .insertInto('event_outbox')
    .columns(['account_id', 'environment', 'type', 'occurred_at', 'data'])
    .expression(
      db
        .selectFrom('accounts')
        .select((eb) => [
          'id',
          sql<null>`null`.as('environment'),
          eb.val(type).as('type'),
          eb.val(occurredAt.toISOString()).as('occurred_at'),
          eb.val(JSON.stringify(data)).as('data'),
        ])
        .orderBy('id'),
    )
    .execute();
}
