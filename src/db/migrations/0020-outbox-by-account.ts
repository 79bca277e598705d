// Frozen in time (see 0001). An expand change (db/schema-changes.ts): the outbox's rows of one
// account in order, so the sequencer takes each account's oldest rows by an index range
// (events/events.repository.ts, committedOutbox) instead of ranking the whole outbox at every
// batch. With 20,000 rows waiting (one tenant's bulk upserts) that ranking took 50-190 ms on
// SQLite, inside the write transaction and without a turn of the event loop. The release 0.2.0
// neither reads it nor needs it; its writes keep it.
import type { Kysely, Migration } from 'kysely';
import { sql } from '../kysely.ts';

export function outboxByAccount(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql`create index event_outbox_account on event_outbox (account_id, id)`.execute(db);
    },
  };
}
