// Frozen in time (see 0001). Indexes that every query finds whatever the planner's statistics.
//
// A PostgreSQL table nobody has analyzed yet (autovacuum off, or lagging behind a busy
// table) gives the planner no statistics: it estimates one row for any two equality
// conditions, and then cannot tell two indexes that both match them apart. The listing
// index (account_id, environment, team_id) matched the first two conditions of the hot
// lookup as well as the identity index did, and won the tie: every get-or-create scanned
// the account's whole environment (docs/performance.md, "Why the code is the way it is"). So
// no two indexes of user_groups lead with the same columns: the identity key (account_id,
// environment, provided_id) leads with plain columns, and the listing and the name search
// lead with an expression that only their own queries write (the "scope", account and
// environment as one text). The SQL of those expressions is repeated in
// user-groups.repository.ts, by design: a migration never imports application code.
//
// Prefix search (`q`) is a range on an index; the range must be in code-point order on both
// backends. SQLite compares text as UTF-8 bytes (code-point order) already; PostgreSQL
// compares in the database's collation, so the searched columns get the "C" collation.
// Equality, and so the identity's uniqueness, is the same under any deterministic collation.
//
// The key ids that sealed the stored user group tokens are read at every start (the
// server refuses to start without the keys to open them): an index on that prefix of the
// ciphertext makes it a handful of index probes instead of a scan of every group.
import { sql } from '../kysely.ts';
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

export function plansWithoutStatistics(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>) {
      if (dialect === 'postgres') {
        await sql`alter table user_groups
          alter column provided_id type text collate "C",
          alter column name type text collate "C"`.execute(db);
      }
      await db.schema.dropIndex('user_groups_listing').execute();
      await sql`create index user_groups_listing on user_groups ((cast(account_id as text) || '/' || environment), team_id)`.execute(db);
      await sql`create index user_groups_name_search on user_groups ((cast(account_id as text) || '/' || environment || '/' || name))`.execute(db);
      await sql`create index user_groups_sealing_key on user_groups ((substr(token_ciphertext, 1, 8)))`.execute(db);
    },
  };
}
