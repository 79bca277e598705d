// Whose rows a statement may touch (docs/security.md, "Tenant isolation"). Every statement on
// a tenant's rows names its account, and its environment, as explicit conditions, whatever
// index range it also uses: an index range is an optimisation, and an optimisation must
// never be what keeps one account from another's rows. test/tenant-isolation.test.ts
// captures every statement a workload of every operation sends and fails when one lacks
// them. Each condition is written by one of the helpers below, whose name says where it goes:
// ownedBy (a filter on the rows an index found), ownedByAccount (the same for an account's
// rows in every environment), sameTenant (a join by key), walkHeldToTenant (a page walked by
// an index range, held to the tenant where each backend plans it well; heldToTenant is its
// statement, walkLimit its limit, keyedWalk its range), groupWithId (a group by its
// user_group_id). A statement whose index leads with (account_id, environment) names them as
// plain columns: they are its range.
import { sql } from './kysely.ts';
import type { Compilable, Expression, Kysely, RawBuilder } from 'kysely';
import { dialectOf } from './database.ts';
import type { Database, Environment } from './schema.ts';

/** An account, and the one environment of it that a statement works in. */
export interface Tenant {
  accountId: number;
  environment: Environment;
}

/**
 * The tenant's rows of `table` (or of its alias), as filters on the rows an index found:
 * `account_id + 0` and `environment || ''` are values, not the columns, so that no planner
 * takes them for an index condition and walks an index that holds them (the identity key
 * (account_id, environment, …), or any index an operator adds) where another index must
 * drive, as it would without statistics (migration 0002). PostgreSQL also reads an index by a
 * column that is not its first, in a bitmap: `environment = 'Customer'` alone made it read a
 * whole index of (account_id, environment, …) beside a search's range (docs/operations.md,
 * "Indexes you may add"). For statements whose index leads with the account, write the plain
 * condition instead (it is that index's range).
 */
export function ownedBy(table: string, tenant: Tenant): RawBuilder<boolean> {
  return sql<boolean>`(${sql.ref(`${table}.account_id`)} + 0 = ${tenant.accountId} and ${sql.ref(`${table}.environment`)} || '' = ${tenant.environment})`;
}

/**
 * `alias` holds rows of the same tenant as `of`: for a join by primary key (a parent, a
 * recursive step). The key alone would find the row; the condition keeps a broken link from
 * crossing into another account. A filter, like ownedBy's: as an index condition it made
 * PostgreSQL walk the whole tenant for each parent.
 */
export function sameTenant(alias: string, of: string): RawBuilder<boolean> {
  return sql<boolean>`${sql.ref(`${alias}.account_id`)} + 0 = ${sql.ref(`${of}.account_id`)} and ${sql.ref(`${alias}.environment`)} || '' = ${sql.ref(`${of}.environment`)}`;
}

/**
 * An account's rows of `table`, in every environment, as a filter like ownedBy's: for what
 * belongs to the account rather than to one of its environments (its API tokens' history).
 */
export function ownedByAccount(table: string, accountId: number): RawBuilder<boolean> {
  return sql<boolean>`${sql.ref(`${table}.account_id`)} + 0 = ${accountId}`;
}

/** A statement that walks an index range: written with `sql`, or built with Kysely's query builder. */
export type RangeWalk<Row> = RawBuilder<Row> | (Expression<Row> & Compilable<Row>);

/** A walk as a subquery of another statement: Kysely puts a query it builds in parentheses there; SQL text needs its own. */
export function asSubquery<Row>(walk: RangeWalk<Row>): RawBuilder<Row> | (Expression<Row> & Compilable<Row>) {
  return 'isRawBuilder' in walk ? sql<Row>`(${walk})` : walk;
}

/**
 * Runs a walk of an index range (a page of a listing or of an export, in the order of its
 * index) held to the tenant, with the tenant's condition (ownedBy) where each backend plans
 * the walk well:
 *
 * - SQLite: beside the range, in the statement that walks it. SQLite plans the walk the same
 *   either way, and a subquery would cost it a copy of every row.
 * - PostgreSQL: after the walk. The walk is a subquery, `page`, and the statement around it
 *   keeps the tenant's rows, in the walk's order. Without statistics PostgreSQL guesses that
 *   each `=` condition keeps 1 row in 200: with the tenant's two beside the range it expected a
 *   single row, sorted the tenant's whole range instead of walking the index in order, and a
 *   first page of a large tenant took far longer (docs/performance.md, "Why the code is the way
 *   it is").
 *
 * Either way the condition is in the statement that walks, so a range that found another
 * tenant's row would shorten a page, never show it. `walk` writes that statement with
 * `tenantBesideRange` among its conditions (the tenant's condition on `table` on SQLite,
 * nothing on PostgreSQL), ordered by `orderBy`; it selects that column and `table`'s
 * account_id and environment, which the statement around it reads.
 */
export function walkHeldToTenant<Row>(
  db: Kysely<Database>,
  tenant: Tenant,
  walked: { table: string; orderBy: string },
  walk: (tenantBesideRange: RawBuilder<boolean>) => RangeWalk<Row>,
): Promise<Row[]> {
  return rowsOf(db, heldToTenant(db, tenant, walked, walk));
}

/**
 * The statement walkHeldToTenant runs, for a caller that prepares it once (a prepared read,
 * db/prepared-read.ts). `orderBy`: the walk's order, by the columns it selects (a keyedWalk
 * selects its key as `walk_key`, and is ordered by it, then team_id).
 */
export function heldToTenant<Row>(
  db: Kysely<Database>,
  tenant: Tenant,
  { table, orderBy }: { table: string; orderBy: string | readonly string[] },
  walk: (tenantBesideRange: RawBuilder<boolean>) => RangeWalk<Row>,
): RangeWalk<Row> {
  if (dialectOf(db) === 'sqlite') return walk(ownedBy(table, tenant));
  const order = sql.join((typeof orderBy === 'string' ? [orderBy] : orderBy).map((column) => sql.ref(`page.${column}`)));
  return sql<Row>`select page.* from ${asSubquery(walk(sql<boolean>`true`))} page where ${ownedBy('page', tenant)} order by ${order}`;
}

/** An index of user_groups on (key, team_id) that a page walks (migrations 0002, 0003): its name, and its key as it writes it. */
export interface KeyedIndex {
  name: string;
  key: RawBuilder<unknown>;
}

/** The parts of a walk of a KeyedIndex: the table to read it from, the range, the order, and (PostgreSQL) the key as a column `walk_key`. */
export interface KeyedWalk {
  from: RawBuilder<unknown>;
  range: RawBuilder<boolean>;
  orderBy: RawBuilder<unknown>;
  /** `, <key> as walk_key` on PostgreSQL, for heldToTenant's order by walk_key, team_id; nothing on SQLite. */
  walkKey: RawBuilder<unknown>;
  /** The columns heldToTenant orders the walk's rows by. */
  heldOrder: readonly string[];
}

/**
 * The rows of `index` whose key is `value`, after `afterTeamId`, in team_id order, written so
 * that only `index` can serve them, whatever other indexes exist and whatever the statistics
 * say (docs/operations.md, "Indexes you may add"). Written as `key = value and team_id > after
 * order by team_id`, the walk is open to the primary key too: the key is then one value to the
 * planner, the order is team_id's, and the primary key has it, with the key as a filter. With
 * statistics that say the key matches most rows (taken when the table was small, or with one
 * large tenant), both backends walked the primary key, which crosses every other tenant's rows
 * after the cursor (docs/performance.md, "Why the code is the way it is"). So:
 *
 * - PostgreSQL: a row comparison from (value, afterTeamId) on the index's two columns, up to
 *   the key's end, ordered by both: no other index has that order.
 * - SQLite: `indexed by` the index (a row comparison on an expression is no index range there).
 *
 * `valueAgain` is `value` once more (a prepared read takes each value once): the range's end.
 */
export function keyedWalk(
  db: Kysely<Database>,
  index: KeyedIndex,
  { value, valueAgain, afterTeamId }: { value: unknown; valueAgain: unknown; afterTeamId: unknown },
): KeyedWalk {
  const end = sql<boolean>`${index.key} <= ${valueAgain}`;
  if (dialectOf(db) === 'sqlite') {
    return {
      from: sql`user_groups indexed by ${sql.id(index.name)}`,
      range: sql<boolean>`${index.key} = ${value} and user_groups.team_id > ${afterTeamId} and ${end}`,
      orderBy: sql`user_groups.team_id`,
      walkKey: sql``,
      heldOrder: ['team_id'],
    };
  }
  return {
    from: sql`user_groups`,
    range: sql<boolean>`(${index.key}, user_groups.team_id) > (${value}, ${afterTeamId}) and ${end}`,
    orderBy: sql`${index.key}, user_groups.team_id`,
    walkKey: sql`, ${index.key} as walk_key`,
    heldOrder: ['walk_key', 'team_id'],
  };
}

/**
 * The `limit` of a walk of an index range, written so that no plan depends on its value.
 * PostgreSQL without statistics guesses that a tenant's range holds a few rows; with a
 * limit above that guess it expected to read the whole range anyway, and read and sorted
 * the whole tenant rather than walk its index in order (docs/performance.md, "Why the code
 * is the way it is"). As a subquery the value is unknown to the planner, which then plans
 * for a part of the range, in order, whatever the limit. SQLite plans a walk the same
 * whatever its limit.
 */
export function walkLimit(db: Kysely<Database>, limit: number | string): RawBuilder<number> {
  return dialectOf(db) === 'sqlite' ? sql<number>`${limit}` : sql<number>`(select cast(${limit} as bigint))`;
}

async function rowsOf<Row>(db: Kysely<Database>, statement: RangeWalk<Row>): Promise<Row[]> {
  const { rows } = 'isRawBuilder' in statement ? await statement.execute(db) : await db.executeQuery(statement);
  return rows;
}

/** The tenant as one text, `<account_id>/<environment>`: how the listing indexes and the tag table spell it (migrations 0002, 0003). */
export function scopeOf(tenant: Tenant): string {
  return `${tenant.accountId}/${tenant.environment}`;
}

/**
 * A group's scoped id, `<account_id>/<environment>/<user_group_id>`, of `table`'s row (user_groups
 * or an alias of it): the expression migration 0019 indexes, written as there. A lookup or a
 * search by user_group_id reads that index, which no plain index an operator adds can serve,
 * where (account_id, environment, provided_id) can be served by any index that leads with
 * account_id (docs/operations.md, "Indexes you may add").
 */
export function scopedIdOf(table = 'user_groups'): RawBuilder<string> {
  const column = (name: string) => sql.ref(`${table}.${name}`);
  return sql<string>`(cast(${column('account_id')} as text) || '/' || ${column('environment')} || '/' || ${column('provided_id')})`;
}

/** The scoped id of a user_group_id in a tenant (scopedIdOf): the value a lookup looks for. */
export function scopedId(tenant: Tenant, providedId: string): string {
  return `${scopeOf(tenant)}/${providedId}`;
}

/**
 * The group of the tenant whose user_group_id is `providedId` (one at most): its scoped id, one
 * probe of its index, held to the tenant by ownedBy.
 */
export function groupWithId(table: string, tenant: Tenant, providedId: string): RawBuilder<boolean> {
  return sql<boolean>`${scopedIdOf(table)} = ${scopedId(tenant, providedId)} and ${ownedBy(table, tenant)}`;
}
