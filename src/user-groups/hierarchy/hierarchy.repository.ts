// Queries on the hierarchy of user groups and on their tags (docs/api.md, "Hierarchy",
// "Tags"). The rules they serve hold across processes because every write that could break
// them runs under one lock per account and environment: SQLite's BEGIN IMMEDIATE already
// serializes all writes; PostgreSQL takes a transaction advisory lock, before any row lock,
// so two such writes run one after the other and the second sees the first. The hierarchy's
// writes take it (a parent or a level set, a delete): two moves that would together form a
// cycle or exceed the depth. So does every write that sets a group's tags, and each batch of
// a tag's rename or delete (group-tags/): a rename reads a group's tags and writes them back,
// and must not overwrite a PUT that replaced them in between; a tag leaves the tenant's tag
// set only in a transaction that saw no group carry it, and no write adds a carrier meanwhile;
// and a write that adds to the set counts it against its bound (tag-set.ts) with no other
// write adding to it meanwhile.
import { sql } from '../../db/kysely.ts';
import type { Kysely } from 'kysely';
import type { Database, UserGroupRow } from '../../db/schema.ts';
import type { Dialect } from '../../db/database.ts';
import { ownedBy, scopeOf, type Tenant } from '../../db/tenant.ts';
import { CHAIN_GUARD } from '../group-sql.ts';
import { addToTagSets, type TagBound } from '../tag-set.ts';

const HIERARCHY_LOCK_CLASS = 726_415_002; // arbitrary, fixed: "ugs hierarchy" (726_415_001 is the migrations')

export async function lockHierarchy(trx: Kysely<Database>, dialect: Dialect, tenant: Tenant): Promise<void> {
  if (dialect === 'postgres') await sql`select pg_advisory_xact_lock(${sql.lit(HIERARCHY_LOCK_CLASS)}, hashtext(${scopeOf(tenant)}))`.execute(trx);
}

/** The team_ids of a group of the tenant and all its descendants (children index, level by level). */
function subtree(tenant: Tenant, teamId: number) {
  return sql`with recursive subtree(team_id, depth) as (
      select team_id, 1 from user_groups where team_id = ${teamId} and ${ownedBy('user_groups', tenant)}
      union all
      select user_groups.team_id, subtree.depth + 1 from subtree
      join user_groups on user_groups.parent_team_id = subtree.team_id and ${ownedBy('user_groups', tenant)}
      where subtree.depth < ${CHAIN_GUARD}
    )`;
}

/** How many levels a group and its descendants span: 1 for a group without children. */
export async function subtreeHeight(trx: Kysely<Database>, tenant: Tenant, teamId: number): Promise<number> {
  const { rows } = await sql<{ height: number | string }>`${subtree(tenant, teamId)} select max(depth) as height from subtree`.execute(trx);
  return Number(rows[0]?.height ?? 1);
}

/** Rows a statement deletes at most: its team_ids are parameters, and an IN list is one index probe each. */
const DELETE_CHUNK = 500;

/**
 * Deletes a group and all its descendants; returns the deleted rows. The deepest go first, so
 * no statement leaves a child whose parent is gone (the foreign key checks each statement).
 * Two steps rather than one DELETE over the recursive query: a planner without statistics
 * joins that query to a scan of the whole table.
 */
export async function deleteSubtree(trx: Kysely<Database>, tenant: Tenant, teamId: number): Promise<UserGroupRow[]> {
  const { rows } = await sql<{ team_id: number }>`${subtree(tenant, teamId)} select team_id from subtree order by depth desc`.execute(trx);
  const deleted: UserGroupRow[] = [];
  for (let start = 0; start < rows.length; start += DELETE_CHUNK) {
    const ids = rows.slice(start, start + DELETE_CHUNK).map((row) => Number(row.team_id));
    deleted.push(...(await trx.deleteFrom('user_groups').where('team_id', 'in', ids).where(ownedBy('user_groups', tenant)).returningAll().execute()));
  }
  return deleted;
}

export async function hasChildren(trx: Kysely<Database>, tenant: Tenant, teamId: number): Promise<boolean> {
  const row = await trx
    .selectFrom('user_groups')
    .select('team_id')
    .where('parent_team_id', '=', teamId)
    .where(ownedBy('user_groups', tenant))
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** The distinct levels of a group's children (null levels left out). */
export async function childLevels(trx: Kysely<Database>, tenant: Tenant, teamId: number): Promise<string[]> {
  const rows = await trx
    .selectFrom('user_groups')
    .select('hierarchy_level')
    .distinct()
    .where('parent_team_id', '=', teamId)
    .where(ownedBy('user_groups', tenant))
    .where('hierarchy_level', 'is not', null)
    .execute();
  return rows.map((row) => row.hierarchy_level!);
}

/**
 * The tag rows of new groups (which have none yet), in as few statements as the parameter
 * limits allow; their tags join their tenants' tag sets, within the bound (tag-set.ts). The
 * caller holds the lock above.
 */
export async function insertTagRowsOfNewGroups(
  trx: Kysely<Database>,
  groups: readonly { tenant: Tenant; teamId: number; tags: readonly string[] }[],
  bound: TagBound,
): Promise<void> {
  const rows = groups.flatMap(({ tenant, teamId, tags }) => tags.map((tag) => ({ team_id: teamId, scope: scopeOf(tenant), tag })));
  for (let start = 0; start < rows.length; start += 1000)
    await trx
      .insertInto('user_group_tags')
      .values(rows.slice(start, start + 1000))
      .execute();
  await addToTagSets(trx, groups, bound);
}

/** Replaces a group's rows in the tag table (the filter's index) with `tags`, which join the tenant's tag set within the bound (tag-set.ts); the table's scope column names the tenant. */
export async function replaceTagRows(trx: Kysely<Database>, tenant: Tenant, teamId: number, tags: readonly string[], bound: TagBound): Promise<void> {
  const scope = scopeOf(tenant);
  // "|| ''": the scope as a value, a filter on the group's rows: as an index condition it would
  // walk the key (scope, tag, team_id) through every tag of the tenant.
  await trx.deleteFrom('user_group_tags').where('team_id', '=', teamId).where(sql`scope || ''`, '=', scope).execute();

  if (tags.length > 0)
    await trx
      .insertInto('user_group_tags')
      .values(tags.map((tag) => ({ team_id: teamId, scope, tag })))
      .execute();
  await addToTagSets(trx, [{ tenant, tags }], bound);
}

/** The account's level names, shallowest first, or null when it declared none. */
export async function accountLevels(db: Kysely<Database>, accountId: number): Promise<string[] | null> {
  const row = await db.selectFrom('accounts').select('hierarchy_levels').where('id', '=', accountId).executeTakeFirst();
  return row?.hierarchy_levels ? (JSON.parse(row.hierarchy_levels) as string[]) : null;
}

/** The levels the account's groups use that are not in `levels`. */
export async function levelsInUseOutside(db: Kysely<Database>, accountId: number, levels: readonly string[]): Promise<string[]> {
  const rows = await db
    .selectFrom('user_groups')
    .select('hierarchy_level')
    .distinct()
    .where('account_id', '=', accountId)
    .where('hierarchy_level', 'is not', null)
    .$if(levels.length > 0, (q) => q.where('hierarchy_level', 'not in', levels))
    .execute();
  return rows.map((row) => row.hierarchy_level!);
}

export async function setAccountLevels(db: Kysely<Database>, accountId: number, levels: readonly string[] | null): Promise<void> {
  await db
    .updateTable('accounts')
    .set({ hierarchy_levels: levels === null ? null : JSON.stringify(levels) })
    .where('id', '=', accountId)
    .execute();
}
