// Frozen in time (see 0001). An expand change (db/schema-changes.ts): the index a lookup of a
// group by its user_group_id finds whatever other indexes the table has (docs/operations.md,
// "Indexes you may add"). The release 0.1.0 neither reads it nor needs it; its writes keep it.
//
// The identity key (account_id, environment, provided_id) is made of plain columns, so any
// index that leads with account_id serves the same conditions: an operator's (account_id,
// environment, team_id) or (account_id, environment, name), or a reporting tool's
// (account_id). On a table without statistics the planner expects one row from the tenant's
// two conditions alone, and such an index, smaller than the key, then looks cheaper: every
// get-or-create and every search by id walked the tenant's whole environment. So, as the
// listing and the name search already do (0002), a lookup and a search by id name their rows
// by an expression that no plain index holds: the "scoped id", `<account_id>/<environment>/
// <provided_id>`, unambiguous since neither an account id nor an environment holds a '/'.
// Its collation is provided_id's ("C" on PostgreSQL, 0002), so its ranges are in code-point
// order on both backends.
//
// Not unique: the identity key stays the one unique constraint. A second unique index would
// not be an arbiter of the inserts' `on conflict (account_id, environment, provided_id) do
// nothing`, so two instances inserting the same group at once (this release's or the one
// before) could get a unique violation from it where they get "already there" today.
import { sql } from '../kysely.ts';
import type { Kysely, Migration } from 'kysely';

export function scopedIds(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql`create index user_groups_scoped_id on user_groups ((cast(account_id as text) || '/' || environment || '/' || provided_id))`.execute(db);
    },
  };
}
