// Frozen in time (see 0001). Idempotent retries (docs/api.md, "Idempotent retries"): one row
// per Idempotency-Key an account sent in the last 24 h.
// - The first request inserts its row as `running` under the unique (account_id,
//   idempotency_key), with an owner (a random id of that attempt) and a lock (locked_until)
//   that the owner extends while it works. A retry finds the row taken: it waits for the
//   answer (409) or, once the lock has lapsed (the owner's process died), takes the row over.
// - When the answer is ready, the owner swaps the row to `done` (only while it still owns it)
//   with the answer's status and its body sealed under the secret key, like tokens.
// - Rows expire 24 h after they were created; a sweeper deletes them (expires_at).
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

export function idempotencyKeys(dialect: Dialect): Migration {
  const idType = dialect === 'sqlite' ? 'integer' : 'bigint';
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('idempotency_keys')
        .addColumn('id', idType, (c) => (dialect === 'sqlite' ? c.primaryKey().autoIncrement() : c.primaryKey().generatedAlwaysAsIdentity()))
        .addColumn('account_id', idType, (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('idempotency_key', 'text', (c) => c.notNull())
        /** SHA-256 (hex) of the request's method, path and canonical JSON body. */
        .addColumn('request_hash', 'text', (c) => c.notNull())
        /** running or done. */
        .addColumn('state', 'text', (c) => c.notNull())
        /** The attempt that runs the request (random); null once done. */
        .addColumn('owner', 'text')
        .addColumn('locked_until', 'text')
        .addColumn('response_status', 'integer')
        /** The answer (content type and body), AES-256-GCM under the secret key; its first 8 characters name that key. */
        .addColumn('response_sealed', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('idempotency_keys_account_key').on('idempotency_keys').columns(['account_id', 'idempotency_key']).unique().execute();
      // The sweeper's range.
      await db.schema.createIndex('idempotency_keys_expires').on('idempotency_keys').columns(['expires_at']).execute();
    },
  };
}
