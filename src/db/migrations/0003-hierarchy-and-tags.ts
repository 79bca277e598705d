// Frozen in time (see 0001). A user group may have a parent, a level name and tags; an
// account may declare its level names; history entries may carry old and new values.
//
// parent_team_id references the parent's team_id, which never changes (a rename changes only
// provided_id), with no cascade: deleting a parent that has children is refused, unless the
// caller deletes the whole subtree in one statement. The indexes follow 0002's rule that no
// two indexes of user_groups lead with the same columns:
// - the children of a group: (parent_team_id, team_id), walked in team_id order;
// - the groups of one level: the scope and the level as one text, then team_id;
// - tags live in their own table, keyed for the filter (scope, tag, team_id). Their scope is
//   the same text as the listing's, written by the service.
// The history of one group is read by its team_id, which survives a rename.
import { sql } from '../kysely.ts';
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

export function hierarchyAndTags(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>) {
      const idType = dialect === 'sqlite' ? 'integer' : 'bigint';
      await db.schema
        .alterTable('user_groups')
        .addColumn('parent_team_id', idType, (c) => c.references('user_groups.team_id'))
        .execute();
      await db.schema.alterTable('user_groups').addColumn('hierarchy_level', 'text').execute();
      await db.schema
        .alterTable('user_groups')
        .addColumn('group_tags', 'text', (c) => c.notNull().defaultTo('[]'))
        .execute();
      await db.schema.createIndex('user_groups_children').on('user_groups').columns(['parent_team_id', 'team_id']).execute();
      await sql`create index user_groups_level on user_groups ((cast(account_id as text) || '/' || environment || '#' || hierarchy_level), team_id)`.execute(
        db,
      );

      await db.schema
        .createTable('user_group_tags')
        .addColumn('team_id', idType, (c) => c.notNull().references('user_groups.team_id').onDelete('cascade'))
        .addColumn('scope', 'text', (c) => c.notNull())
        .addColumn('tag', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('user_group_tags_filter', ['scope', 'tag', 'team_id'])
        .execute();
      // Replacing a group's tags, and the cascade when it is deleted, find its rows by team_id.
      await db.schema.createIndex('user_group_tags_team').on('user_group_tags').column('team_id').execute();

      /** JSON array of level names, shallowest first; null when the account declared none. */
      await db.schema.alterTable('accounts').addColumn('hierarchy_levels', 'text').execute();

      /** JSON object: field -> { old, new } for the ids a change moved (parent, rename, tags). */
      await db.schema.alterTable('audit_log').addColumn('details', 'text').execute();
      await db.schema.createIndex('audit_log_team').on('audit_log').columns(['subject_type', 'subject_id', 'id']).execute();
    },
  };
}
