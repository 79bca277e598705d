// Frozen in time (see 0001). The tag set of each tenant (docs/api.md, "Tags"): every tag a
// group of the tenant carries, and the tags created ahead of any group (POST /api/group_tags).
// A tag stays in the set when its last group drops it, until it is deleted. The rows of
// user_group_tags (0003) say which groups carry a tag, and so its count; this table says
// which tags exist, so that a tag with no group is listed and the list is one index range.
//
// The key (account_id, environment, name) is the listing's order: name in code-point order,
// which SQLite's text comparison is already and PostgreSQL's is under the "C" collation
// (0002). The tags the groups carry today are copied in.
import { sql } from '../kysely.ts';
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

export function groupTagSet(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>) {
      const idType = dialect === 'sqlite' ? 'integer' : 'bigint';
      await db.schema
        .createTable('group_tag_set')
        .addColumn('account_id', idType, (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('environment', 'text', (c) => c.notNull().check(sql`environment in ('Customer', 'Testing')`))
        .addColumn('name', dialect === 'postgres' ? sql`text collate "C"` : 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('group_tag_set_key', ['account_id', 'environment', 'name'])
        .execute();
      await sql`insert into group_tag_set (account_id, environment, name)
        select distinct user_groups.account_id, user_groups.environment, user_group_tags.tag
        from user_group_tags join user_groups on user_groups.team_id = user_group_tags.team_id`.execute(db);
    },
  };
}
