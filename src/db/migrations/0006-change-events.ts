// Frozen in time (see 0001). Change events (docs/api.md, "Change events"):
// - event_outbox: written in the same transaction as the change it describes, so a change
//   that rolls back leaves none. Rows wait there until the sequencer moves them to events.
// - events: the feed. `seq` numbers an account's events in the order the sequencer saw them
//   committed, one account at a time (the sequencer runs on one connection at a time), so a
//   reader that has read up to seq n never later finds a new event below n. An identity or
//   serial number in the writing transaction could not promise that: a transaction that took
//   number 10 may commit after the one that took 11 was read.
// - event_heads: per account, the last seq handed out and the last one retention removed
//   (a cursor below it has lost events: 410).
// - webhook_endpoints, webhook_deliveries (one per event and endpoint), webhook_attempts.
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

export function changeEvents(dialect: Dialect): Migration {
  const idType = dialect === 'sqlite' ? 'integer' : 'bigint';
  const serialId = (db: Kysely<unknown>, table: string) =>
    db.schema
      .createTable(table)
      .addColumn('id', idType, (c) => (dialect === 'sqlite' ? c.primaryKey().autoIncrement() : c.primaryKey().generatedAlwaysAsIdentity()));
  return {
    async up(db: Kysely<unknown>) {
      await serialId(db, 'event_outbox')
        .addColumn('account_id', idType, (c) => c.notNull())
        .addColumn('environment', 'text')
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('occurred_at', 'text', (c) => c.notNull())
        .addColumn('data', 'text', (c) => c.notNull())
        .execute();

      await serialId(db, 'events')
        .addColumn('account_id', idType, (c) => c.notNull())
        .addColumn('seq', idType, (c) => c.notNull())
        .addColumn('environment', 'text')
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('occurred_at', 'text', (c) => c.notNull())
        .addColumn('data', 'text', (c) => c.notNull())
        .execute();
      // The feed's one index: an account's events in order; the key (id) serves retention.
      await db.schema.createIndex('events_account_seq').on('events').columns(['account_id', 'seq']).unique().execute();

      await db.schema
        .createTable('event_heads')
        .addColumn('account_id', idType, (c) => c.primaryKey().references('accounts.id').onDelete('cascade'))
        .addColumn('last_seq', idType, (c) => c.notNull())
        .addColumn('pruned_through', idType, (c) => c.notNull())
        .execute();

      await serialId(db, 'webhook_endpoints')
        .addColumn('account_id', idType, (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('url', 'text', (c) => c.notNull())
        /** JSON array of event types; null: every type. */
        .addColumn('types', 'text')
        .addColumn('description', 'text')
        /** The only environment whose events it receives (set by an admin token restricted to it); null: every event. */
        .addColumn('environment', 'text')
        .addColumn('secret_sealed', 'text', (c) => c.notNull())
        /** The secret before the last rotation: it also signs until previous_secret_expires_at. */
        .addColumn('previous_secret_sealed', 'text')
        .addColumn('previous_secret_expires_at', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        /** When the oldest delivery still failing first failed; null while deliveries succeed. */
        .addColumn('failing_since', 'text')
        .addColumn('disabled_at', 'text')
        /** When the endpoint's oldest pending delivery is due; null: nothing pending. */
        .addColumn('next_attempt_at', 'text')
        /** The instance delivering to it now, until lease_until (a compare-and-swap claim). */
        .addColumn('lease_owner', 'text')
        .addColumn('lease_until', 'text')
        .execute();
      await db.schema.createIndex('webhook_endpoints_account').on('webhook_endpoints').columns(['account_id', 'id']).execute();
      await db.schema.createIndex('webhook_endpoints_due').on('webhook_endpoints').columns(['next_attempt_at']).execute();

      await serialId(db, 'webhook_deliveries')
        .addColumn('endpoint_id', idType, (c) => c.notNull().references('webhook_endpoints.id').onDelete('cascade'))
        .addColumn('account_id', idType, (c) => c.notNull())
        .addColumn('event_seq', idType, (c) => c.notNull())
        .addColumn('event_type', 'text', (c) => c.notNull())
        /** pending, delivered or failed (given up). */
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('next_attempt_at', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('finished_at', 'text')
        .execute();
      await db.schema.createIndex('webhook_deliveries_endpoint').on('webhook_deliveries').columns(['endpoint_id', 'status', 'event_seq']).execute();
      // The oldest pending delivery (a metric), and retention of finished ones.
      await db.schema.createIndex('webhook_deliveries_status').on('webhook_deliveries').columns(['status', 'created_at']).execute();

      await serialId(db, 'webhook_attempts')
        .addColumn('delivery_id', idType, (c) => c.notNull().references('webhook_deliveries.id').onDelete('cascade'))
        .addColumn('account_id', idType, (c) => c.notNull())
        .addColumn('attempted_at', 'text', (c) => c.notNull())
        .addColumn('status_code', 'integer')
        .addColumn('duration_ms', 'integer', (c) => c.notNull())
        .addColumn('error', 'text')
        .execute();
      await db.schema.createIndex('webhook_attempts_delivery').on('webhook_attempts').columns(['delivery_id', 'id']).execute();
    },
  };
}
