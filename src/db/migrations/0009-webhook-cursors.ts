// Frozen in time (see 0001). Webhooks (docs/api.md, "Webhooks"):
// - Deliveries are made from the feed, per endpoint, as its dispatcher gets to them, instead of
//   one row per event and endpoint in the transaction that numbers every account's events:
//   webhook_endpoints.cursor_seq is the account's event seq up to which the endpoint's
//   deliveries are made (each event at or below it has its delivery row, or was not for it).
//   An endpoint of today has its rows up to its account's last seq: it starts there.
// - webhook_endpoints.skipped_seqs: JSON [[after, through], ...], the events made while the
//   endpoint was disabled (through null: it still is), which it never receives. An endpoint
//   disabled today skips from its account's last seq on.
// - History entries and events of webhook endpoints hold the URL's origin only (scheme, host
//   and port): a receiver's credentials may be in the path or the query string, and every
//   `read` token reads the feed. The entries and events written before keep the whole URL:
//   they are rewritten here, in batches of rows by key.
import { sql } from '../kysely.ts';
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

const BATCH = 500;

/** The URL's origin; what is not a URL stays as it is. */
function originOf(url: unknown): unknown {
  if (typeof url !== 'string') return url;
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}

type Change = { old: unknown; new: unknown };

/** An event's data (`url`, `changes.url`), or a history entry's details (`url`), with every URL cut to its origin. */
function withOrigins(json: string, column: 'data' | 'details'): string {
  const value = JSON.parse(json) as { url?: unknown; changes?: { url?: Change } };
  const changes = (column === 'data' ? value.changes : value) as { url?: Change } | undefined;
  if (column === 'data' && 'url' in value) value.url = originOf(value.url);
  if (changes?.url) changes.url = { old: originOf(changes.url.old), new: originOf(changes.url.new) };
  return JSON.stringify(value);
}

async function rewrite(db: Kysely<unknown>, table: 'events' | 'event_outbox' | 'audit_log', column: 'data' | 'details', filter: ReturnType<typeof sql>) {
  for (let after = 0; ; ) {
    const { rows } = await sql<{ id: number | string; value: string | null }>`select id, ${sql.ref(column)} as value from ${sql.table(table)}
      where ${filter} and id > ${after} order by id limit ${BATCH}`.execute(db);
    if (rows.length === 0) return;
    for (const row of rows) {
      if (row.value === null) continue;
      const rewritten = withOrigins(row.value, column);
      if (rewritten !== row.value) await sql`update ${sql.table(table)} set ${sql.ref(column)} = ${rewritten} where id = ${row.id}`.execute(db);
    }
    after = Number(rows[rows.length - 1].id);
  }
}

export function webhookCursors(dialect: Dialect): Migration {
  const idType = dialect === 'sqlite' ? 'integer' : 'bigint';
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .alterTable('webhook_endpoints')
        .addColumn('cursor_seq', idType, (c) => c.notNull().defaultTo(0))
        .execute();
      await db.schema.alterTable('webhook_endpoints').addColumn('skipped_seqs', 'text').execute();
      await sql`update webhook_endpoints set cursor_seq = (
          select event_heads.last_seq from event_heads where event_heads.account_id = webhook_endpoints.account_id
        ) where exists (select 1 from event_heads where event_heads.account_id = webhook_endpoints.account_id)`.execute(db);
      const { rows: disabled } = await sql<{ id: number | string; cursor_seq: number | string }>`select id, cursor_seq from webhook_endpoints
        where disabled_at is not null`.execute(db);
      for (const row of disabled)
        await sql`update webhook_endpoints set skipped_seqs = ${JSON.stringify([[Number(row.cursor_seq), null]])} where id = ${row.id}`.execute(db);

      await rewrite(db, 'events', 'data', sql`type like 'webhook_endpoint.%'`);
      await rewrite(db, 'event_outbox', 'data', sql`type like 'webhook_endpoint.%'`);
      await rewrite(db, 'audit_log', 'details', sql`subject_type = 'webhook_endpoint'`);
    },
  };
}
