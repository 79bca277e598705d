// The SQL of reading a group with what its ancestors give it, shared by the user groups'
// repository and the embed side's (embed/embed.repository.ts): the columns, the chain of
// ancestors by primary key within the group's tenant, and the hot reads' fixed-shape
// ancestry. Each statement names its tenant (db/tenant.ts).
import { sql } from '../db/kysely.ts';
import type { Kysely, RawBuilder } from 'kysely';
import { USER_GROUP_COLUMN_TYPES, type Database, type Environment, type UserGroupRow } from '../db/schema.ts';
import type { BatchedRow, PreparedRead } from '../db/prepared-read.ts';
import type { HotReads } from '../db/hot-reads.ts';
import { dialectOf } from '../db/database.ts';
import { ownedBy, sameTenant, scopedIdOf } from '../db/tenant.ts';
import { resolveAncestry, resolveChain, type Ancestry, type ChainRow, type ResolvedGroup } from './group-chain.ts';

/** Every column, named: prepared statements must not depend on `select *` (see preparedRead). */
export const USER_GROUP_COLUMNS = Object.keys(USER_GROUP_COLUMN_TYPES) as (keyof UserGroupRow)[];

/** What a page of the listing reads of each group: every column but the token's, which a listing never shows. */
export type ListedRow = Omit<UserGroupRow, 'token_hash' | 'token_ciphertext' | 'token_generation'>;
export const LISTED_COLUMNS = USER_GROUP_COLUMNS.filter((column) => !column.startsWith('token_')) as (keyof ListedRow)[];

/** Deeper than any hierarchy may be (UGS_MAX_HIERARCHY_DEPTH is at most 10): a guard, never a rule. */
export const MAX_CHAIN_DEPTH = 16;
export const CHAIN_GUARD = sql.lit(MAX_CHAIN_DEPTH);

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
 * The batched form of chainStatement (PostgreSQL, prepared-read.ts): `unnest` gives each
 * call's values as `k` (with `batch_index`), and `seed` finds the call's group from k, by a
 * lateral probe; every chain comes back in its call's order, nearest first.
 */
export function batchedChainStatement<R>(
  db: Kysely<Database>,
  columns: readonly string[],
  unnest: RawBuilder<unknown>,
  seed: RawBuilder<unknown>,
): RawBuilder<BatchedRow<R>> {
  const carried = withTenant(columns);
  return sql<BatchedRow<R>>`with recursive chain as (
      select k.batch_index, 0 as chain_depth, ${qualified('g', carried)} from ${unnest}
        cross join lateral (select ${qualified('user_groups', carried)} from user_groups where ${seed} limit 1) g
      union all
      ${parentStep(db, carried, sql`chain.batch_index, `)}
    )
    select chain.batch_index, ${qualified('chain', columns)} from chain order by chain.batch_index, chain.chain_depth`;
}

/** The recursive step: each row's parent (parentJoin). */
function parentStep(db: Kysely<Database>, columns: readonly string[], carriedFirst = sql``): RawBuilder<unknown> {
  return sql`select ${carriedFirst}chain.chain_depth + 1, ${qualified('parent', columns)} from chain
    ${parentJoin(db, { alias: 'parent', child: 'chain', columns })} where chain.chain_depth < ${CHAIN_GUARD}`;
}

/**
 * One step up a chain: `alias` is the parent of the row `child`, found by primary key within
 * the same tenant, with `columns` (and, `optional`, null for a root). On PostgreSQL a lateral
 * probe, as for the batched lookups: a plain join there may become a hash join over a scan
 * of the whole table when the planner lacks statistics (seen on a 3,000-group table never
 * analyzed). SQLite has no LATERAL, and probes the primary key for a join like this one anyway.
 */
export function parentJoin(
  db: Kysely<Database>,
  { alias, child, columns, optional = false }: { alias: string; child: string; columns: readonly string[]; optional?: boolean },
): RawBuilder<unknown> {
  const link = sql`${sql.ref(`${alias}.team_id`)} = ${sql.ref(`${child}.parent_team_id`)} and ${sameTenant(alias, child)}`;
  if (dialectOf(db) === 'sqlite') return sql`${optional ? sql`left join` : sql`join`} user_groups ${sql.id(alias)} on ${link}`;
  const probe = sql`(select ${qualified(alias, columns)} from user_groups ${sql.id(alias)} where ${link} limit 1) ${sql.id(alias)}`;
  return optional ? sql`left join lateral ${probe} on true` : sql`cross join lateral ${probe}`;
}

/**
 * A hot read's group with what its two nearest ancestors give it (three levels: the default
 * depth), joined to its row by primary key. One row of fixed shape, nearly as cheap as the flat
 * read, where a recursive query cost far more at three levels (docs/performance.md,
 * "Why the code is the way it is"). A deeper hierarchy (UGS_MAX_HIERARCHY_DEPTH
 * above 3) shows in `beyond_team_id`, and its chain is then read whole.
 */
export function withAncestry<R>(
  columns: readonly string[],
  where: RawBuilder<unknown>,
  from: RawBuilder<unknown> = sql`user_groups`,
): RawBuilder<R & Ancestry> {
  return sql<R & Ancestry>`select ${qualified('user_groups', columns)},
      p1.provided_id as parent_provided_id, p1.mapping as parent_mapping, p1.properties as parent_properties,
      p2.mapping as grandparent_mapping, p2.properties as grandparent_properties, p2.parent_team_id as beyond_team_id
    from ${from}
    left join user_groups p1 on p1.team_id = user_groups.parent_team_id and ${sameTenant('p1', 'user_groups')}
    left join user_groups p2 on p2.team_id = p1.parent_team_id and ${sameTenant('p2', 'p1')}
    where ${where}`;
}

/**
 * The batched form (PostgreSQL): `unnest` gives each call's key as `k`, and `where` finds its
 * group from k; a lateral subquery per key, so each is one index probe whatever the planner
 * believes about the table's size (a join may become a hash join over a scan).
 */
export function batchedWithAncestry<R>(
  columns: readonly string[],
  unnest: RawBuilder<unknown>,
  where: RawBuilder<unknown>,
  from?: RawBuilder<unknown>,
): RawBuilder<BatchedRow<R & Ancestry>> {
  return sql<BatchedRow<R & Ancestry>>`select k.batch_index, g.* from ${unnest}
    cross join lateral (${withAncestry(columns, where, from)} limit 1) g`;
}

/**
 * A group with its ancestry (withAncestry) by its scoped id (tenant.ts, scopedIdOf), held to its
 * tenant by `held` (ownedBy, sameTenant): one probe of the scoped id index (migration 0019).
 * On PostgreSQL the probe is a subquery of one row (scopedIdProbe), and `held` filters what it
 * found; on SQLite, which plans the probe the same either way, `held` sits beside it.
 */
export function withAncestryByScopedId<R>(
  db: Kysely<Database>,
  columns: readonly string[],
  scopedId: unknown,
  held: RawBuilder<boolean>,
): RawBuilder<R & Ancestry> {
  if (dialectOf(db) === 'sqlite') return withAncestry<R>(columns, sql`${scopedIdOf()} = ${scopedId} and ${held}`);
  return withAncestry<R>(columns, held, scopedIdProbe(columns, scopedId));
}

/**
 * PostgreSQL: the group whose scoped id is `scopedId`, as a table `user_groups` of one row at
 * most, with `columns` and what withAncestry joins by, for withAncestry's `from`. A scoped id
 * names one group, so `limit 1` loses nothing; it is there for the planner, and so is the
 * tenant's condition outside it: a table without statistics makes PostgreSQL expect a few rows
 * in 200 for the index's value, and fewer again for each condition beside it, one row in all,
 * and it then read the index into a bitmap before fetching that row; told that the first row
 * is enough, it walks the index to it (docs/performance.md, "Why the code is the way it is").
 */
export function scopedIdProbe(columns: readonly string[], scopedId: unknown): RawBuilder<unknown> {
  const carried = [...new Set([...withTenant(columns), 'parent_team_id'])];
  return sql`(select ${qualified('user_groups', carried)} from user_groups where ${scopedIdOf()} = ${scopedId} limit 1) user_groups`;
}

/** A group's chain by its team_id, within its tenant (the seed of a prepared chain read). */
export function teamIdInTenant(accountId: number, environment: Environment, teamId: number): RawBuilder<boolean> {
  return sql<boolean>`user_groups.team_id = ${teamId} and ${ownedBy('user_groups', { accountId, environment })}`;
}

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
