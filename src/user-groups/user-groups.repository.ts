// Queries on user groups. Every function takes the connection or a transaction as its first
// argument; the service decides where a transaction begins and ends.
import { sql } from '../db/kysely.ts';
import type { Kysely, RawBuilder, Updateable } from 'kysely';
import type { Database, Environment, UserGroupRow, UserGroupsTable } from '../db/schema.ts';
import { preparedRead, type BatchedRow, type PreparedRead } from '../db/prepared-read.ts';
import type { HotReads } from '../db/hot-reads.ts';
import { dialectOf, type Dialect } from '../db/database.ts';
import { ownedBy, sameTenant, scopeOf, type Tenant } from '../db/tenant.ts';
import { resolveAncestry, resolveChain, resolveEach, type Ancestry, type ChainRow, type ResolvedGroup } from './group-chain.ts';

/** A user group's identity: its tenant and the caller's user_group_id (the unique key). */
export interface GroupIdentity extends Tenant {
  providedId: string;
}

export type NewUserGroup = Omit<UserGroupRow, 'team_id' | 'token_generation'>;

/**
 * Every column, named: prepared statements must not depend on `select *` (see preparedRead).
 * A record rather than a list, so that a column added to the table type and not here fails
 * to compile.
 */
const EVERY_COLUMN: Record<keyof UserGroupRow, true> = {
  team_id: true,
  account_id: true,
  environment: true,
  provided_id: true,
  name: true,
  mapping: true,
  properties: true,
  is_demo_group: true,
  parent_team_id: true,
  hierarchy_level: true,
  group_tags: true,
  token_hash: true,
  token_ciphertext: true,
  token_generation: true,
  created_at: true,
  updated_at: true,
};
export const USER_GROUP_COLUMNS = Object.keys(EVERY_COLUMN) as (keyof UserGroupRow)[];

/** Deeper than any hierarchy may be (UGS_MAX_HIERARCHY_DEPTH is at most 10): a guard, never a rule. */
export const CHAIN_GUARD = sql.lit(16);

const qualified = (table: string, columns: readonly string[]) => sql.join(columns.map((column) => sql.ref(`${table}.${column}`)));

/** What the chain carries of each row: the columns asked for and the tenant, which ties each step to the last. */
const withTenant = (columns: readonly string[]) => [...new Set([...columns, 'account_id', 'environment'])];

/**
 * A group and its ancestors, nearest first: the rows `seed` selects from user_groups (its
 * condition names the tenant), then each one's parent by primary key within the same tenant,
 * up the chain, in one statement. For writes, pages and hierarchies deeper than the hot
 * reads' three levels (see withAncestry).
 */
export function chainStatement<R>(db: Kysely<Database>, columns: readonly string[], seed: RawBuilder<unknown>): RawBuilder<R> {
  const carried = withTenant(columns);
  return sql<R>`with recursive chain as (
      select 0 as chain_depth, ${qualified('user_groups', carried)} from user_groups where ${seed}
      union all
      ${parentStep(db, carried)}
    )
    select ${qualified('chain', columns)} from chain order by chain_depth`;
}

/**
 * The recursive step: each row's parent, by primary key. On PostgreSQL a lateral probe, as
 * for the batched lookups: a plain join there may become a hash join over a scan of the whole
 * table when the planner lacks statistics (seen on a 3,000-group table never analyzed).
 * SQLite has no LATERAL, and probes the primary key for a join like this one anyway.
 */
function parentStep(db: Kysely<Database>, columns: readonly string[]): RawBuilder<unknown> {
  const guard = sql`where chain.chain_depth < ${CHAIN_GUARD}`;
  if (dialectOf(db) === 'sqlite') {
    return sql`select chain.chain_depth + 1, ${qualified('user_groups', columns)} from chain
      join user_groups on user_groups.team_id = chain.parent_team_id and ${sameTenant('user_groups', 'chain')} ${guard}`;
  }
  return sql`select chain.chain_depth + 1, ${qualified('parent', columns)} from chain
    cross join lateral (select ${sql.join(columns.map((column) => sql.ref(column)))} from user_groups
      where user_groups.team_id = chain.parent_team_id and ${sameTenant('user_groups', 'chain')} limit 1) parent ${guard}`;
}

/**
 * A hot read's group with what its two nearest ancestors give it (three levels: the default
 * depth), joined to its row by primary key. One row of fixed shape, as cheap as the flat read
 * within a couple of microseconds, where a recursive query cost twice the flat read at three
 * levels (measured on SQLite: 8.4 against 20 µs). A deeper hierarchy (UGS_MAX_HIERARCHY_DEPTH
 * above 3) shows in `beyond_team_id`, and its chain is then read whole.
 */
export function withAncestry<R>(columns: readonly string[], where: RawBuilder<unknown>): RawBuilder<R & Ancestry> {
  return sql<R & Ancestry>`select ${qualified('user_groups', columns)},
      p1.provided_id as parent_provided_id, p1.mapping as parent_mapping, p1.properties as parent_properties,
      p2.mapping as grandparent_mapping, p2.properties as grandparent_properties, p2.parent_team_id as beyond_team_id
    from user_groups
    left join user_groups p1 on p1.team_id = user_groups.parent_team_id and ${sameTenant('p1', 'user_groups')}
    left join user_groups p2 on p2.team_id = p1.parent_team_id and ${sameTenant('p2', 'p1')}
    where ${where}`;
}

/**
 * The batched form (PostgreSQL): `unnest` gives each call's key as `k`, and `where` finds its
 * group from k; a lateral subquery per key, so each is one index probe whatever the planner
 * believes about the table's size (a join may become a hash join over a scan).
 */
export function batchedWithAncestry<R>(columns: readonly string[], unnest: RawBuilder<unknown>, where: RawBuilder<unknown>): RawBuilder<BatchedRow<R & Ancestry>> {
  return sql<BatchedRow<R & Ancestry>>`select k.batch_index, g.* from ${unnest}
    cross join lateral (${withAncestry(columns, where)} limit 1) g`;
}

const selectUserGroupByKey = preparedRead(
  (db, accountId: number, environment: Environment, providedId: string) => {
    const raw = withAncestry<UserGroupRow>(
      USER_GROUP_COLUMNS,
      sql`user_groups.account_id = ${accountId} and user_groups.environment = ${environment} and user_groups.provided_id = ${providedId}`,
    );
    return { compile: () => raw.compile(db) };
  },
  {
    batched: (accountIds, environments, providedIds) =>
      batchedWithAncestry<UserGroupRow>(
        USER_GROUP_COLUMNS,
        sql`unnest(${accountIds}::int8[], ${environments}::text[], ${providedIds}::text[])
          with ordinality as k(account_id, environment, provided_id, batch_index)`,
        sql`user_groups.account_id = k.account_id and user_groups.environment = k.environment and user_groups.provided_id = k.provided_id`,
      ),
  },
);

/** A group's chain by its team_id, within its tenant (the seed of a prepared chain read). */
export function teamIdInTenant(accountId: number, environment: Environment, teamId: number): RawBuilder<boolean> {
  return sql<boolean>`user_groups.team_id = ${teamId} and ${ownedBy('user_groups', { accountId, environment })}`;
}

const selectUserGroupChainByTeamId = preparedRead((db, accountId: number, environment: Environment, teamId: number) => {
  const raw = chainStatement<UserGroupRow>(db, USER_GROUP_COLUMNS, teamIdInTenant(accountId, environment, teamId));
  return { compile: () => raw.compile(db) };
});

/** What a hot read's row must carry to read its chain: its key and its tenant. */
type HotRow = ChainRow & Pick<UserGroupRow, 'account_id' | 'environment'>;

/**
 * A hot read's row, resolved from the ancestry joined to it, or, in a hierarchy deeper than
 * the ancestry reaches, from its whole chain (`chainByTeamId`, a prepared recursive read in
 * the row's own tenant).
 */
export async function resolveHotRow<R extends HotRow>(
  reads: HotReads,
  row: R & Ancestry,
  chainByTeamId: PreparedRead<[accountId: number, environment: Environment, teamId: number], R>,
): Promise<ResolvedGroup<R>> {
  return resolveAncestry(row) ?? resolveChain(await reads.all(chainByTeamId, Number(row.account_id), row.environment, Number(row.team_id)));
}

/** The hot path of get-or-create: the group by its identity (unique index) with its ancestors' values, committed rows. */
export async function findUserGroup(reads: HotReads, key: GroupIdentity): Promise<ResolvedGroup | undefined> {
  const row = await reads.first(selectUserGroupByKey, key.accountId, key.environment, key.providedId);
  return row && resolveHotRow(reads, row, selectUserGroupChainByTeamId);
}

/** A group of the tenant and its ancestors by team_id, inside a transaction (what a write answers with). */
export async function findUserGroupChain(db: Kysely<Database>, tenant: Tenant, teamId: number): Promise<UserGroupRow[]> {
  const seed = teamIdInTenant(tenant.accountId, tenant.environment, teamId);
  const { rows } = await chainStatement<UserGroupRow>(db, USER_GROUP_COLUMNS, seed).execute(db);
  return rows;
}

/** What resolving a page needs of each ancestor (group-chain.ts). */
const CHAIN_COLUMNS = ['team_id', 'provided_id', 'parent_team_id', 'mapping', 'properties'] as const satisfies readonly (keyof ChainRow)[];

/**
 * The chain above a page's group (from its parent up), prepared once: a statement Kysely
 * prepared anew for each page cost more than the page's own query (docs/performance.md).
 */
const selectAncestors = preparedRead((db, accountId: number, environment: Environment, teamId: number) => {
  const raw = chainStatement<ChainRow>(db, CHAIN_COLUMNS, teamIdInTenant(accountId, environment, teamId));
  return { compile: () => raw.compile(db) };
});

/** The groups of a tenant's page, resolved: the chain above each distinct parent not on the page, read together (none when the page is flat). */
export async function resolvePage<R extends ChainRow>(reads: HotReads, tenant: Tenant, rows: R[]): Promise<ResolvedGroup<R>[]> {
  const ancestors = new Map<number, ChainRow>(rows.map((row) => [Number(row.team_id), row]));
  const missing = [...new Set(rows.map((row) => row.parent_team_id))].filter((id): id is number => id !== null && !ancestors.has(Number(id)));
  const chains = await Promise.all(missing.map((teamId) => reads.all(selectAncestors, tenant.accountId, tenant.environment, Number(teamId))));
  for (const row of chains.flat()) ancestors.set(Number(row.team_id), row);
  return resolveEach(rows, ancestors);
}

/**
 * The group, inside a write transaction, safe from concurrent writers until it ends: SQLite's
 * BEGIN IMMEDIATE already excludes them; PostgreSQL needs the row lock.
 */
export function findUserGroupForUpdate(trx: Kysely<Database>, dialect: Dialect, key: GroupIdentity): Promise<UserGroupRow | undefined> {
  return trx
    .selectFrom('user_groups')
    .select(USER_GROUP_COLUMNS)
    .where('account_id', '=', key.accountId)
    .where('environment', '=', key.environment)
    .where('provided_id', '=', key.providedId)
    .$if(dialect === 'postgres', (q) => q.forUpdate())
    .executeTakeFirst();
}

/** Inserts unless the identity exists (then returns undefined): the database decides who wins a race. */
export function insertUserGroupIfAbsent(db: Kysely<Database>, values: NewUserGroup): Promise<UserGroupRow | undefined> {
  return db
    .insertInto('user_groups')
    .values(values)
    .onConflict((oc) => oc.columns(['account_id', 'environment', 'provided_id']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

/**
 * Compare-and-swap: replaces the token only if `oldHash` is still the current one of a group of
 * the account, in `environment` when the caller may use only that one.
 */
export function swapUserGroupToken(
  db: Kysely<Database>,
  swap: { accountId: number; environment: Environment | null; oldHash: string; newHash: string; newCiphertext: string; at: string },
): Promise<UserGroupRow | undefined> {
  return db
    .updateTable('user_groups')
    .set((eb) => ({
      token_hash: swap.newHash,
      token_ciphertext: swap.newCiphertext,
      token_generation: eb('token_generation', '+', 1),
      updated_at: swap.at,
    }))
    .where('account_id', '=', swap.accountId)
    .where('token_hash', '=', swap.oldHash)
    .$if(swap.environment !== null, (q) => q.where('environment', '=', swap.environment!))
    .returningAll()
    .executeTakeFirst();
}

/** Whether `tokenHash` is the current token of a group of the account in any environment (what a refused rotation reports). */
export async function accountHasCurrentToken(db: Kysely<Database>, accountId: number, tokenHash: string): Promise<boolean> {
  const row = await db.selectFrom('user_groups').select('team_id').where('account_id', '=', accountId).where('token_hash', '=', tokenHash).executeTakeFirst();
  return row !== undefined;
}

export function updateUserGroupFields(
  db: Kysely<Database>,
  tenant: Tenant,
  teamId: number,
  fields: Updateable<UserGroupsTable>,
): Promise<UserGroupRow | undefined> {
  return db.updateTable('user_groups').set(fields).where('team_id', '=', teamId).where(ownedBy('user_groups', tenant)).returningAll().executeTakeFirst();
}

/** Drops a group's retired tokens whose grace period is over, so the table holds only live ones. */
export async function purgeExpiredRetiredTokens(db: Kysely<Database>, tenant: Tenant, teamId: number, now: string): Promise<void> {
  await db.deleteFrom('retired_tokens').where('team_id', '=', teamId).where(ownedBy('retired_tokens', tenant)).where('expires_at', '<=', now).execute();
}

/** Drops every retired token of a group, in its grace period or not. */
export async function dropRetiredTokens(db: Kysely<Database>, tenant: Tenant, teamId: number): Promise<void> {
  await db.deleteFrom('retired_tokens').where('team_id', '=', teamId).where(ownedBy('retired_tokens', tenant)).execute();
}

export async function retireToken(db: Kysely<Database>, tenant: Tenant, retired: { tokenHash: string; teamId: number; expiresAt: string }): Promise<void> {
  await db
    .insertInto('retired_tokens')
    .values({ token_hash: retired.tokenHash, team_id: retired.teamId, account_id: tenant.accountId, environment: tenant.environment, expires_at: retired.expiresAt })
    .execute();
}

/**
 * The scope of a group, account and environment as one text: the listing and the name
 * search index it (migration 0002), so that no other query can pick their indexes. They are
 * index ranges only: every statement also names the tenant (ownedBy).
 */
const scope = sql<string>`(cast(account_id as text) || '/' || environment)`;
const scopedName = sql<string>`(cast(account_id as text) || '/' || environment || '/' || name)`;
/** The level index's expression (migration 0003). */
const scopedLevel = sql<string>`(cast(account_id as text) || '/' || environment || '#' || hierarchy_level)`;

/**
 * Above every scoped text of the tenant (`<scope>/…`): '0' is the code point after '/'. The
 * upper end of a name range whose prefix has none (a prefix of U+10FFFF only), so that the
 * range never runs on into the scopes that sort after this one.
 */
const scopeEnd = (tenant: Tenant) => `${scopeOf(tenant)}0`;

export interface ListFilter extends Tenant {
  afterTeamId: number;
  limit: number;
  /** user_group_id or name starts with this. */
  prefix?: string;
  /** Children of this group (its team_id). */
  parentTeamId?: number;
  tag?: string;
  level?: string;
}

/**
 * A page of groups in team_id order after `afterTeamId`: keyset pagination, the same cost at
 * any depth. One filter drives the page, on its own index (migrations 0002 and 0003), in this
 * order: `prefix` (two index ranges), `tag` (the tag table's key), `parentTeamId` (the
 * children index), `level` (the level index), else the listing index. The others, and the
 * tenant, are conditions on the rows it walks, written so that no planner takes them for an
 * index condition (an index chosen without statistics could be the wrong one).
 */
export function listUserGroups(db: Kysely<Database>, filter: ListFilter): Promise<UserGroupRow[]> {
  if (filter.prefix !== undefined) return listByPrefix(db, filter, filter.prefix);
  if (filter.tag !== undefined) return listByTag(db, filter, filter.tag);
  let page = db.selectFrom('user_groups').select(USER_GROUP_COLUMNS).where(ownedBy('user_groups', filter));
  if (filter.parentTeamId !== undefined) {
    page = page.where('parent_team_id', '=', filter.parentTeamId).where(otherFilters(filter, 'parent'));
  } else if (filter.level !== undefined) {
    page = page.where(scopedLevel, '=', `${scopeOf(filter)}#${filter.level}`);
  } else {
    page = page.where(scope, '=', scopeOf(filter));
  }
  return page.where('team_id', '>', filter.afterTeamId).orderBy('team_id').limit(filter.limit).execute();
}

type Driver = 'prefix' | 'tag' | 'parent';

/** The filters a page does not walk by, as plain conditions on user_groups' rows. */
function otherFilters(filter: ListFilter, driver: Driver): RawBuilder<boolean> {
  const conditions: RawBuilder<boolean>[] = [sql<boolean>`true`];
  if (driver !== 'tag' && filter.tag !== undefined) {
    // One probe of the tag table's key per row walked. "offset 0" keeps PostgreSQL from turning
    // the EXISTS into a join that the tag table would drive.
    conditions.push(sql<boolean>`exists (select 1 from user_group_tags
      where user_group_tags.scope = ${scopeOf(filter)} and user_group_tags.tag = ${filter.tag} and user_group_tags.team_id = user_groups.team_id
      limit 1 offset 0)`);
  }
  // "+ 0": a value, not the column, so the children index is never picked for it.
  if (driver !== 'parent' && filter.parentTeamId !== undefined) conditions.push(sql<boolean>`user_groups.parent_team_id + 0 = ${filter.parentTeamId}`);
  if (filter.level !== undefined) conditions.push(sql<boolean>`user_groups.hierarchy_level = ${filter.level}`);
  return sql<boolean>`(${sql.join(conditions, sql` and `)})`;
}

/**
 * Two index ranges (the identity index, the name search index), in code-point order on both
 * backends, so a search costs what the groups it matches cost.
 */
function listByPrefix(db: Kysely<Database>, filter: ListFilter, prefix: string): Promise<UserGroupRow[]> {
  const end = prefixEnd(prefix);
  // The cursor is a filter here, never an index condition: the prefix's range is the
  // selective one, and a planner without statistics would otherwise intersect it with a scan
  // of every team_id above the cursor (measured: 4 ms instead of 0.05 at 100,000 groups).
  const afterCursor = sql<boolean>`team_id + 0 > ${filter.afterTeamId}`;
  const others = otherFilters(filter, 'prefix');
  const byId = db
    .selectFrom('user_groups')
    .select(USER_GROUP_COLUMNS)
    .where('account_id', '=', filter.accountId)
    .where('environment', '=', filter.environment)
    .where('provided_id', '>=', prefix)
    .$if(end !== undefined, (q) => q.where('provided_id', '<', end!))
    .where(afterCursor)
    .where(others);
  const scopedPrefix = `${scopeOf(filter)}/${prefix}`;
  const byName = db
    .selectFrom('user_groups')
    .select(USER_GROUP_COLUMNS)
    .where(scopedName, '>=', scopedPrefix)
    .where(scopedName, '<', end === undefined ? scopeEnd(filter) : `${scopeOf(filter)}/${end}`)
    .where(ownedBy('user_groups', filter))
    .where(afterCursor)
    .where(others)
    // Those the first range found already: the two halves never share a row.
    .where((eb) => eb.or([eb('provided_id', '<', prefix), ...(end === undefined ? [] : [eb('provided_id', '>=', end)])]));
  return byId.unionAll(byName).orderBy('team_id').limit(filter.limit).execute();
}

/** The groups with a tag: the tag table's key (scope, tag, team_id) walked in order, each group by primary key. */
function listByTag(db: Kysely<Database>, filter: ListFilter, tag: string): Promise<UserGroupRow[]> {
  return db
    .selectFrom('user_group_tags')
    .innerJoin('user_groups', 'user_groups.team_id', 'user_group_tags.team_id')
    .select(USER_GROUP_COLUMNS.map((column) => `user_groups.${column}` as const))
    .where('user_group_tags.scope', '=', scopeOf(filter))
    .where('user_group_tags.tag', '=', tag)
    .where('user_group_tags.team_id', '>', filter.afterTeamId)
    .where(ownedBy('user_groups', filter))
    .where(otherFilters(filter, 'tag'))
    .orderBy('user_group_tags.team_id')
    .limit(filter.limit)
    .execute();
}

/**
 * The least string above every string that starts with `prefix`, in code-point order (the
 * order of both backends' comparisons), or undefined when there is none (all U+10FFFF).
 */
export function prefixEnd(prefix: string): string | undefined {
  const points = [...prefix];
  while (points.length > 0) {
    const last = points.pop()!.codePointAt(0)!;
    if (last === 0x10ffff) continue;
    // The next code point; surrogates are not characters (ids hold none), so skip them.
    return points.join('') + String.fromCodePoint(last === 0xd7ff ? 0xe000 : last + 1);
  }
  return undefined;
}
