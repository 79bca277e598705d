// Frozen in time (see 0001). Idempotency-Keys belong to the API token that sent them, as
// Stripe's belong to the API key (docs/api.md, "Idempotent retries"): a stored answer is
// replayed only to the token that was allowed to make it, and another token of the account
// sending the same key makes another operation. 0007 kept one key per account, so a read
// token could be handed an admin token's answer (a new API token's plaintext).
//
// The table is recreated rather than altered: its rows are a day's retries, and a row of 0007
// names no token, so it could be given to no one safely (the unique key and the not-null
// api_token_id would also need SQLite to rebuild the table). Keys sent before this migration
// are forgotten: a retry of such a request runs as a new request (CHANGELOG.md).
// Otherwise as 0007: a running row with an owner and a lock, swapped to done with the sealed
// answer; rows expire 24 h after they were created.
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

export function idempotencyKeysPerToken(dialect: Dialect): Migration {
  const idType = dialect === 'sqlite' ? 'integer' : 'bigint';
  return {
    async up(db: Kysely<unknown>) {
      await db.schema.dropTable('idempotency_keys').execute();
      await db.schema
        .createTable('idempotency_keys')
        .addColumn('id', idType, (c) => (dialect === 'sqlite' ? c.primaryKey().autoIncrement() : c.primaryKey().generatedAlwaysAsIdentity()))
        .addColumn('account_id', idType, (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        /** The API token that sent the key (API tokens are revoked, never deleted). */
        .addColumn('api_token_id', idType, (c) => c.notNull().references('api_tokens.id').onDelete('cascade'))
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
      await db.schema
        .createIndex('idempotency_keys_token_key')
        .on('idempotency_keys')
        .columns(['account_id', 'api_token_id', 'idempotency_key'])
        .unique()
        .execute();
      // The sweeper's range.
      await db.schema.createIndex('idempotency_keys_expires').on('idempotency_keys').columns(['expires_at']).execute();
    },
  };
}
