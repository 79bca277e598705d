// Frozen in time (see 0001). An expand change (db/schema-changes.ts): the heavy operations
// each account runs at once (docs/api.md, "Heavy operations": bulk upserts, tag renames and
// deletes, exports), one row per slot of an account, up to the limit
// (UGS_HEAVY_OPERATIONS_PER_ACCOUNT). An operation takes a slot whose lease has lapsed (or
// that has no row yet) by compare-and-swap, renews the lease while it runs and deletes the
// row when it ends; the slot of an instance that died frees itself when its lease lapses. The
// count holds across every instance because the database holds it. The release 0.1.0 neither
// reads nor writes the table.
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

export function heavyOperations(dialect: Dialect): Migration {
  const idType = dialect === 'sqlite' ? 'integer' : 'bigint';
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('heavy_operations')
        .addColumn('account_id', idType, (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('slot', 'integer', (c) => c.notNull())
        .addColumn('holder', 'text', (c) => c.notNull())
        .addColumn('operation', 'text', (c) => c.notNull())
        .addColumn('started_at', 'text', (c) => c.notNull())
        .addColumn('lease_until', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('heavy_operations_slot', ['account_id', 'slot'])
        .execute();
    },
  };
}
