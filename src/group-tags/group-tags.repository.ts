// The SQL of the tag set (docs/api.md, "Tags"): the tenant's tags in group_tag_set (migration
// 0014), the groups that carry each in user_group_tags (0003), and the batch writes of a
// rename or a delete. Every statement names the tenant: the set by its account and
// environment, the tag rows by their scope text, the groups by ownedBy.
import type { Kysely, RawBuilder } from 'kysely';
import { sql } from '../db/kysely.ts';
import type { Dialect } from '../db/database.ts';
import type { Database, UserGroupRow } from '../db/schema.ts';
import { ownedBy, scopeOf, type Tenant } from '../db/tenant.ts';
import { prefixEnd } from '../db/code-point-order.ts';
import { USER_GROUP_COLUMNS } from '../user-groups/group-sql.ts';

export interface GroupTagCount {
  name: string;
  user_group_count: number;
}

/** How many groups of the tenant carry `name`: an index range of the tag rows' key (scope, tag, team_id). */
const carriersOf = (tenant: Tenant, name: RawBuilder<string> | string) =>
  sql<number | string>`(select count(*) from user_group_tags where user_group_tags.scope = ${scopeOf(tenant)} and user_group_tags.tag = ${name})`;

/**
 * The set's name as the tag rows compare it. On PostgreSQL the set's names are in the "C"
 * collation (its key is the listing's code-point order: migration 0014) and the tag rows' in
 * the database's default one (0003); compared as they are, "C" wins, which the tag rows' key
 * cannot answer, so each count would read every tag row of the tenant (a page of 100 tags
 * took seconds at 100,000 tags). In the tag rows' collation the count is one range of their
 * key. The result is the same: equality in a deterministic collation is equality of the bytes.
 * (Rather than a migration of the tag rows to "C": it would rebuild their key under an
 * exclusive lock, and past a few million rows take longer than the statement timeout every
 * migration runs under. SQLite compares both the same way already.)
 */
const nameAsTagRowsCompare = (dialect: Dialect) =>
  dialect === 'postgres' ? sql<string>`(group_tag_set.name collate "default")` : sql<string>`group_tag_set.name`;

/**
 * A page of the tenant's tags in code-point order, after `after` (a cursor) and starting with
 * `prefix`, each with how many groups carry it: one range of the set's key, and for each tag
 * a count of its rows in the tag table's key.
 */
export async function listGroupTags(
  db: Kysely<Database>,
  dialect: Dialect,
  tenant: Tenant,
  page: { after?: string; prefix?: string; limit: number },
): Promise<GroupTagCount[]> {
  const end = page.prefix === undefined ? undefined : prefixEnd(page.prefix);
  const rows = await db
    .selectFrom('group_tag_set')
    .select(['name', carriersOf(tenant, nameAsTagRowsCompare(dialect)).as('user_group_count')])
    .where('account_id', '=', tenant.accountId)
    .where('environment', '=', tenant.environment)
    .$if(page.after !== undefined, (q) => q.where('name', '>', page.after!))
    .$if(page.prefix !== undefined, (q) => q.where('name', '>=', page.prefix!))
    .$if(end !== undefined, (q) => q.where('name', '<', end!))
    .orderBy('name')
    .limit(page.limit)
    .execute();
  return rows.map((row) => ({ name: row.name, user_group_count: Number(row.user_group_count) }));
}

/** Puts a tag in the set; false when it is there already. */
export async function insertGroupTag(db: Kysely<Database>, tenant: Tenant, name: string): Promise<boolean> {
  const inserted = await db
    .insertInto('group_tag_set')
    .values({ account_id: tenant.accountId, environment: tenant.environment, name })
    .onConflict((conflict) => conflict.doNothing())
    .returning('name')
    .executeTakeFirst();
  return inserted !== undefined;
}

export async function deleteGroupTag(db: Kysely<Database>, tenant: Tenant, name: string): Promise<void> {
  await db
    .deleteFrom('group_tag_set')
    .where('account_id', '=', tenant.accountId)
    .where('environment', '=', tenant.environment)
    .where('name', '=', name)
    .execute();
}

export async function countCarriers(db: Kysely<Database>, tenant: Tenant, name: string): Promise<number> {
  const { rows } = await sql<{ count: number | string }>`select ${carriersOf(tenant, name)} as count`.execute(db);
  return Number(rows[0].count);
}

/** The next groups that carry `name`, in team_id order after `afterTeamId`: the tag rows' key walked in order, each group by primary key. */
export function groupsCarrying(trx: Kysely<Database>, tenant: Tenant, name: string, afterTeamId: number, limit: number): Promise<UserGroupRow[]> {
  return trx
    .selectFrom('user_group_tags')
    .innerJoin('user_groups', 'user_groups.team_id', 'user_group_tags.team_id')
    .select(USER_GROUP_COLUMNS.map((column) => `user_groups.${column}` as const))
    .where('user_group_tags.scope', '=', scopeOf(tenant))
    .where('user_group_tags.tag', '=', name)
    .where('user_group_tags.team_id', '>', afterTeamId)
    .where(ownedBy('user_groups', tenant))
    .orderBy('user_group_tags.team_id')
    .limit(limit)
    .execute();
}

/** Gives each group its new tags (JSON text) in one statement; answers the rows as updated (a group deleted meanwhile is not among them). */
export async function setGroupTags(
  trx: Kysely<Database>,
  tenant: Tenant,
  tagsByTeamId: ReadonlyMap<number, string>,
  updatedAt: string,
): Promise<UserGroupRow[]> {
  const cases = [...tagsByTeamId].map(([teamId, tags]) => sql`when ${teamId} then ${tags}`);
  return trx
    .updateTable('user_groups')
    .set({ group_tags: sql<string>`case team_id ${sql.join(cases, sql` `)} end`, updated_at: updatedAt })
    .where('team_id', 'in', [...tagsByTeamId.keys()])
    .where(ownedBy('user_groups', tenant))
    .returning(USER_GROUP_COLUMNS)
    .execute();
}

/** Takes `name` off the groups' rows in the tag table. */
export async function deleteTagRows(trx: Kysely<Database>, tenant: Tenant, name: string, teamIds: readonly number[]): Promise<void> {
  if (teamIds.length === 0) return;
  await trx.deleteFrom('user_group_tags').where('scope', '=', scopeOf(tenant)).where('tag', '=', name).where('team_id', 'in', teamIds).execute();
}

/** Puts `name` on the groups' rows in the tag table (groups that do not carry it yet). */
export async function insertTagRows(trx: Kysely<Database>, tenant: Tenant, name: string, teamIds: readonly number[]): Promise<void> {
  if (teamIds.length === 0) return;
  await trx
    .insertInto('user_group_tags')
    .values(teamIds.map((teamId) => ({ team_id: teamId, scope: scopeOf(tenant), tag: name })))
    .execute();
}
