// Frozen in time (see 0001). An expand change (db/schema-changes.ts): the instances serving
// this database, each with the release it runs and the last migration its code knows, kept
// alive by a heartbeat (docs/operations.md, "Upgrades, migrations and rollback"). The contract
// step reads it to know that no older instance is alive; a start reads it to warn about
// settings that instances must share. The release 0.1.0 neither knows nor writes it.
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

export function instanceRegistry(_dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('instances')
        /** Random, made by the process at start. */
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('host', 'text', (c) => c.notNull())
        .addColumn('pid', 'integer', (c) => c.notNull())
        /** package.json's version of the code it runs. */
        .addColumn('version', 'text', (c) => c.notNull())
        /** The name of the last migration its code knows (a contract change after it is unknown to it). */
        .addColumn('schema', 'text', (c) => c.notNull())
        /** Settings every instance of one database must share, as JSON ({"UGS_WEBHOOK_ALLOW_PRIVATE": false, …}). */
        .addColumn('settings', 'text', (c) => c.notNull())
        .addColumn('started_at', 'text', (c) => c.notNull())
        /** Its last heartbeat: an instance not seen for a minute is gone. */
        .addColumn('seen_at', 'text', (c) => c.notNull())
        .execute();
    },
  };
}
