// Queries on user groups. Every function takes the connection or a transaction as its first
// argument; the service decides where a transaction begins and ends.
import { sql } from '../db/kysely.ts';
import type { AliasedSelectQueryBuilder, Insertable, Kysely, RawBuilder, Updateable } from 'kysely';
import type { Database, Environment, UserGroupRow, UserGroupsTable } from '../db/schema.ts';
import { preparedRead } from '../db/prepared-read.ts';
import { multiRowInsert } from '../db/multi-row-insert.ts';
import type { HotReads } from '../db/hot-reads.ts';
import { dialectOf, type Dialect } from '../db/database.ts';
import { ownedBy, scopeOf, type Tenant } from '../db/tenant.ts';
import { sealingKeyId } from '../crypto/stored-keys.ts';
import { resolveEach, type ChainRow, type ResolvedGroup } from './group-chain.ts';
import { batchedWithAncestry, chainStatement, resolveHotRow, teamIdInTenant, USER_GROUP_COLUMNS, withAncestry } from './group-sql.ts';

/** A user group's identity: its tenant and the caller's user_group_id (the unique key). */
export interface GroupIdentity extends Tenant {
  providedId: string;
}

/** A group to insert: columns that may be null (and those with defaults) may be left out. */
export type NewUserGroup = Insertable<UserGroupsTable>;

const selectUserGroupByKey = preparedRead(
  (_db, accountId: number, environment: Environment, providedId: string) =>
    withAncestry<UserGroupRow>(
      USER_GROUP_COLUMNS,
      sql`user_groups.account_id = ${accountId} and user_groups.environment = ${environment} and user_groups.provided_id = ${providedId}`,
    ),
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

const selectUserGroupChainByTeamId = preparedRead((db, accountId: number, environment: Environment, teamId: number) =>
  chainStatement<UserGroupRow>(db, USER_GROUP_COLUMNS, teamIdInTenant(accountId, environment, teamId)),
);

/** The hot path of get-or-create: the group by its identity (unique index) with its ancestors' values, committed rows. */
export async function findUserGroup(reads: HotReads, key: GroupIdentity): Promise<ResolvedGroup | undefined> {
  const row = await reads.first(selectUserGroupByKey, key.accountId, key.environment, key.providedId);
  return row && resolveHotRow(reads, row, selectUserGroupChainByTeamId);
}

/** A group and its ancestors by the group's identity, inside a transaction (a parent a write names); empty when there is none. */
export async function findUserGroupChainByIdentity(db: Kysely<Database>, key: GroupIdentity): Promise<UserGroupRow[]> {
  const seed = sql`user_groups.account_id = ${key.accountId} and user_groups.environment = ${key.environment} and user_groups.provided_id = ${key.providedId}`;
  const { rows } = await chainStatement<UserGroupRow>(db, USER_GROUP_COLUMNS, seed).execute(db);
  return rows;
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
const selectAncestors = preparedRead((db, accountId: number, environment: Environment, teamId: number) =>
  chainStatement<ChainRow>(db, CHAIN_COLUMNS, teamIdInTenant(accountId, environment, teamId)),
);

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
 * BEGIN IMMEDIATE already excludes them; PostgreSQL needs the row lock. `keyChange`: the write
 * deletes the group or changes its user_group_id (FOR UPDATE). Otherwise FOR NO KEY UPDATE,
 * which lets other writes link a child to the group meanwhile (their foreign key check takes
 * FOR KEY SHARE on it): a write that holds a group and links a child to another cannot then
 * wait in a cycle with one that does the same the other way round.
 */
export function findUserGroupForUpdate(
  trx: Kysely<Database>,
  dialect: Dialect,
  key: GroupIdentity,
  { keyChange = false }: { keyChange?: boolean } = {},
): Promise<UserGroupRow | undefined> {
  return trx
    .selectFrom('user_groups')
    .select(USER_GROUP_COLUMNS)
    .where('account_id', '=', key.accountId)
    .where('environment', '=', key.environment)
    .where('provided_id', '=', key.providedId)
    .$if(dialect === 'postgres', (q) => (keyChange ? q.forUpdate() : q.forNoKeyUpdate()))
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

/** Rows per multi-row insert of groups (about 15 parameters each). */
const INSERT_CHUNK = 500;

/** Every column a new group's row sets: all of them but team_id and token_generation, which the database gives. */
const NEW_GROUP_COLUMNS = USER_GROUP_COLUMNS.filter(
  (column): column is keyof NewUserGroup & keyof UserGroupRow => column !== 'team_id' && column !== 'token_generation',
);

const insertGroups = multiRowInsert<NewUserGroup, UserGroupRow>(
  NEW_GROUP_COLUMNS,
  (db, rows) =>
    db
      .insertInto('user_groups')
      .values(rows as unknown as NewUserGroup[])
      .onConflict((oc) => oc.columns(['account_id', 'environment', 'provided_id']).doNothing())
      .returningAll(),
  // The columns' defaults (migrations): what a row that leaves them out gets.
  { is_demo_group: 0, group_tags: '[]' },
);

/** New groups in as few statements as the parameter limits allow; the rows inserted (an identity that exists is skipped). */
export async function insertUserGroupsIfAbsent(db: Kysely<Database>, values: readonly NewUserGroup[]): Promise<UserGroupRow[]> {
  const rows: UserGroupRow[] = [];
  for (let start = 0; start < values.length; start += INSERT_CHUNK) {
    rows.push(...(await insertGroups.run(db, values.slice(start, start + INSERT_CHUNK))));
  }
  return rows;
}

/** Which of these user_group_ids name a group of the tenant. */
export async function existingProvidedIds(db: Kysely<Database>, tenant: Tenant, providedIds: readonly string[]): Promise<Set<string>> {
  const found = new Set<string>();
  for (let start = 0; start < providedIds.length; start += INSERT_CHUNK) {
    const rows = await db
      .selectFrom('user_groups')
      .select('provided_id')
      .where('account_id', '=', tenant.accountId)
      .where('environment', '=', tenant.environment)
      .where('provided_id', 'in', providedIds.slice(start, start + INSERT_CHUNK))
      .execute();
    for (const row of rows) found.add(row.provided_id);
  }
  return found;
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

/**
 * The groups of every account whose token a secret key sealed, a batch at a time: for the
 * operator's `ugs keys reissue`, which acts on every account (docs/security.md, "Tenant isolation").
 */
export function groupsSealedBy(db: Kysely<Database>, keyId: string, limit: number): Promise<Pick<UserGroupRow, 'team_id' | 'token_ciphertext'>[]> {
  return db.selectFrom('user_groups').select(['team_id', 'token_ciphertext']).where(sealingKeyId, '=', keyId).orderBy('team_id').limit(limit).execute();
}

/** A new token for a group, as a rotation without grace gives it, only if its ciphertext is still the one read. */
export function replaceSealedToken(
  db: Kysely<Database>,
  read: Pick<UserGroupRow, 'team_id' | 'token_ciphertext'>,
  token: { hash: string; ciphertext: string; at: string },
): Promise<Pick<UserGroupRow, 'team_id' | 'account_id' | 'environment' | 'provided_id' | 'token_generation'> | undefined> {
  return db
    .updateTable('user_groups')
    .set((eb) => ({ token_hash: token.hash, token_ciphertext: token.ciphertext, token_generation: eb('token_generation', '+', 1), updated_at: token.at }))
    .where('team_id', '=', read.team_id)
    .where('token_ciphertext', '=', read.token_ciphertext)
    .returning(['team_id', 'account_id', 'environment', 'provided_id', 'token_generation'])
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
    .values({
      token_hash: retired.tokenHash,
      team_id: retired.teamId,
      account_id: tenant.accountId,
      environment: tenant.environment,
      expires_at: retired.expiresAt,
    })
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

interface ListFilter extends Tenant {
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
 * children index), `level` (the level index), else the listing index. The others are
 * conditions on the rows it walks, written so that no planner takes them for an index
 * condition (an index chosen without statistics could be the wrong one).
 */
export function listUserGroups(db: Kysely<Database>, filter: ListFilter): Promise<UserGroupRow[]> {
  if (filter.prefix !== undefined) return listByPrefix(db, filter, filter.prefix);
  // The tenant's conditions: beside the index range on SQLite, after the walk on PostgreSQL (heldAfterWalk).
  const postgres = dialectOf(db) === 'postgres';
  const tenant = postgres ? sql<boolean>`true` : ownedBy('user_groups', filter);
  if (filter.tag !== undefined) {
    const walk = pageByTag(db, filter, filter.tag, tenant);
    return postgres ? heldAfterWalk(db, filter, walk) : walk.execute();
  }
  let page = db.selectFrom('user_groups').select(USER_GROUP_COLUMNS).where(tenant);
  if (filter.parentTeamId !== undefined) {
    page = page.where('parent_team_id', '=', filter.parentTeamId).where(otherFilters(filter, 'parent'));
  } else if (filter.level !== undefined) {
    page = page.where(scopedLevel, '=', `${scopeOf(filter)}#${filter.level}`);
  } else {
    page = page.where(scope, '=', scopeOf(filter));
  }
  const walk = page.where('team_id', '>', filter.afterTeamId).orderBy('team_id').limit(filter.limit);
  return postgres ? heldAfterWalk(db, filter, walk) : walk.execute();
}

/**
 * PostgreSQL: a page walked by its index, then held to the tenant by the explicit conditions
 * (ownedBy), in the statement that walks it. After the walk, not beside the index range:
 * without statistics PostgreSQL guesses that each `=` condition keeps 1 row in 200; with the
 * tenant's two beside the range it expected a single row, sorted the tenant's whole range
 * instead of walking the index in order, and a first page of a large tenant took far longer
 * (docs/performance.md, "Why the code is the way it is"). A range that found another
 * tenant's row would shorten a page, never show it. SQLite plans the walk the same either
 * way, and a subquery would cost it a copy of every row: there the conditions sit beside
 * the range.
 */
function heldAfterWalk(
  db: Kysely<Database>,
  tenant: Tenant,
  walk: { as(alias: 'page'): AliasedSelectQueryBuilder<UserGroupRow, 'page'> },
): Promise<UserGroupRow[]> {
  return db.selectFrom(walk.as('page')).select(USER_GROUP_COLUMNS).where(ownedBy('page', tenant)).orderBy('team_id').execute();
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
  // of every team_id above the cursor: a search's cost would grow with the table.
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
function pageByTag(db: Kysely<Database>, filter: ListFilter, tag: string, tenant: RawBuilder<boolean>) {
  return db
    .selectFrom('user_group_tags')
    .innerJoin('user_groups', 'user_groups.team_id', 'user_group_tags.team_id')
    .select(USER_GROUP_COLUMNS.map((column) => `user_groups.${column}` as const))
    .where('user_group_tags.scope', '=', scopeOf(filter))
    .where('user_group_tags.tag', '=', tag)
    .where('user_group_tags.team_id', '>', filter.afterTeamId)
    .where(tenant)
    .where(otherFilters(filter, 'tag'))
    .orderBy('user_group_tags.team_id')
    .limit(filter.limit);
}

/**
 * The least string above every string that starts with `prefix`, in code-point order (the
 * order of both backends' comparisons), or undefined when there is none (all U+10FFFF).
 */
function prefixEnd(prefix: string): string | undefined {
  const points = [...prefix];
  while (points.length > 0) {
    const last = points.pop()!.codePointAt(0)!;
    if (last === 0x10ffff) continue;
    // The next code point; surrogates are not characters (ids hold none), so skip them.
    return points.join('') + String.fromCodePoint(last === 0xd7ff ? 0xe000 : last + 1);
  }
  return undefined;
}
