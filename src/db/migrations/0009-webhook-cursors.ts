// Frozen in time (see 0001). Webhooks (docs/api.md, "Webhooks"):
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

export function webhookCursors(_dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await rewrite(db, 'events', 'data', sql`type like 'webhook_endpoint.%'`);
      await rewrite(db, 'event_outbox', 'data', sql`type like 'webhook_endpoint.%'`);
      await rewrite(db, 'audit_log', 'details', sql`subject_type = 'webhook_endpoint'`);
    },
  };
}
