// Frozen in time (see 0001). Open event streams (docs/api.md, "The stream"): one row per
// stream open on any instance, so that the limits per API token and per account hold across
// instances. The instance serving a stream renews its lease_until while it lasts and deletes
// the row when it ends; the row of an instance that died counts until its lease lapses, and
// the next stream opened in its account deletes it.
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

export function eventStreams(dialect: Dialect): Migration {
  const idType = dialect === 'sqlite' ? 'integer' : 'bigint';
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('event_streams')
        .addColumn('id', idType, (c) => (dialect === 'sqlite' ? c.primaryKey().autoIncrement() : c.primaryKey().generatedAlwaysAsIdentity()))
        .addColumn('account_id', idType, (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('api_token_id', idType, (c) => c.notNull())
        .addColumn('opened_at', 'text', (c) => c.notNull())
        .addColumn('lease_until', 'text', (c) => c.notNull())
        .execute();
      // An account's open streams (counted when one more opens), and its lapsed ones (deleted then).
      await db.schema.createIndex('event_streams_account').on('event_streams').columns(['account_id', 'lease_until']).execute();
    },
  };
}
