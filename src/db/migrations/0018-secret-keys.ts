// Frozen in time (see 0001). The secret keys this database has been introduced to
// (docs/security.md, "Secret keys"), each by its key id: the fingerprint that also begins every
// value sealed under it. The one with the highest sealing_order is the database's sealing key,
// the only key a process may seal under (src/crypto/known-keys.ts), so that a process with other
// keys (a stray key file, a wrong UGS_SECRET_KEY) refuses to write instead of sealing what the
// other processes cannot open. The unique sealing_order decides between two introductions at once.
//
// Empty after this migration: the first process that opens the database with its keys records
// its key (the key its stored secrets are already sealed under). Expand only: the previous
// release neither reads nor writes the table.
import type { Kysely, Migration } from 'kysely';

export function secretKeys(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('secret_keys')
        .addColumn('key_id', 'text', (c) => c.primaryKey())
        .addColumn('sealing_order', 'integer', (c) => c.notNull().unique())
        .addColumn('introduced_at', 'text', (c) => c.notNull())
        .execute();
    },
  };
}
