// The listing's reads (docs/api.md, "GET /api/users"): a page of a tenant's groups in team_id
// order after a cursor (keyset pagination, the same cost at any depth), walked by the index of
// the one filter that drives it, and the ancestors that resolve its computed fields. The two
// pages a backend asks for most, the plain listing and a search by prefix alone, are prepared
// reads (db/prepared-read.ts): built and compiled once, they run on the hot reads' connection
// and skip Kysely's per-query work, which cost more than the page's own statement.
import { sql } from '../../db/kysely.ts';
import type { Kysely, RawBuilder } from 'kysely';
import type { Database, Environment } from '../../db/schema.ts';
import { preparedRead, type BatchedRow } from '../../db/prepared-read.ts';
import type { HotReads } from '../../db/hot-reads.ts';
import { dialectOf } from '../../db/database.ts';
import {
  asSubquery,
  heldToTenant,
  keyedWalk,
  ownedBy,
  sameTenant,
  scopedIdOf,
  scopeOf,
  walkLimit,
  type KeyedIndex,
  type RangeWalk,
  type Tenant,
} from '../../db/tenant.ts';
import { prefixEnd } from '../../db/code-point-order.ts';
import { resolveEach, type ChainRow, type ResolvedGroup } from '../group-chain.ts';
import { batchedChainStatement, chainStatement, LISTED_COLUMNS, teamIdInTenant, type ListedRow } from '../group-sql.ts';
import { finishWrittenPage, lastShownTeamId, writtenRows, type ResolveChains, type WrittenPage, type WrittenPart, type WrittenRows } from './written-page.ts';

/**
 * The scope of a group, account and environment as one text: the listing and the name
 * search index it (migration 0002), so that no other query can pick their indexes. They are
 * index ranges only: every statement also names the tenant (ownedBy).
 */
const scope = sql<string>`(cast(account_id as text) || '/' || environment)`;
const scopedName = sql<string>`(cast(account_id as text) || '/' || environment || '/' || name)`;
/** provided_id as a value that no index holds (its collation stays the column's). */
const unindexedId = sql<string>`(provided_id || '')`;
/** The level index's expression (migration 0003). */
const scopedLevel = sql<string>`(cast(account_id as text) || '/' || environment || '#' || hierarchy_level)`;

/** The indexes a page walks in team_id order after its cursor (keyedWalk): the listing, a level, a parent's children. */
const LISTING: KeyedIndex = { name: 'user_groups_listing', key: scope };
const LEVEL: KeyedIndex = { name: 'user_groups_level', key: scopedLevel };
const CHILDREN: KeyedIndex = { name: 'user_groups_children', key: sql`user_groups.parent_team_id` };

/**
 * Above every scoped text of the tenant (`<scope>/…`): '0' is the code point after '/'. The
 * upper end of a name range whose prefix has none (a prefix of U+10FFFF only), so that the
 * range never runs on into the scopes that sort after this one.
 */
const scopeEnd = (tenant: Tenant) => `${scopeOf(tenant)}0`;

export interface ListFilter extends Tenant {
  afterTeamId: number;
  /** Groups shown on the page; the walk reads one more, to know whether a next page exists. */
  limit: number;
  /** user_group_id or name starts with this. */
  prefix?: string;
  /** Children of this group (its team_id). */
  parentTeamId?: number;
  tag?: string;
  level?: string;
}

const onlyPrefix = (filter: ListFilter) => filter.parentTeamId === undefined && filter.tag === undefined && filter.level === undefined;

/**
 * A page of groups in team_id order after `afterTeamId`, written by the database
 * (written-page.ts). One filter drives the page, on its own index (migrations 0002 and 0003),
 * in this order: `prefix` (two index ranges), `tag` (the tag table's key), `parentTeamId` (the
 * children index), `level` (the level index), else the listing index. The others are
 * conditions on the rows it walks, written so that no planner takes them for an index
 * condition (an index chosen without statistics could be the wrong one). Committed rows, as
 * every read outside a transaction.
 */
export async function listUserGroups(db: Kysely<Database>, reads: HotReads, filter: ListFilter): Promise<WrittenPage> {
  const resolve = (rows: ChainRow[]) => resolvePage(reads, filter, rows);
  if (filter.prefix !== undefined) {
    const end = prefixEnd(filter.prefix);
    const rows =
      end !== undefined && onlyPrefix(filter)
        ? (await reads.first(selectSearchPage, ...searchArgs(filter, filter.prefix, end)))!
        : await firstRow(db, writtenRows(dialectOf(db), listByPrefix(db, filter, filter.prefix, end)));
    return finishWrittenPage([{ rows, shown: filter.limit }], resolve);
  }
  if (filter.parentTeamId === undefined && filter.level === undefined && filter.tag === undefined) return listingInParts(reads, filter, resolve);
  const limit = walkLimit(db, filter.limit + 1);
  const walk =
    filter.tag !== undefined
      ? heldToTenant<ListedRow>(db, filter, { table: 'user_groups', orderBy: 'team_id' }, (tenant) => pageByTag(db, filter, filter.tag!, tenant))
      : filter.parentTeamId !== undefined
        ? keyedPage(
            db,
            filter,
            CHILDREN,
            { value: filter.parentTeamId, valueAgain: filter.parentTeamId, afterTeamId: filter.afterTeamId },
            limit,
            otherFilters(filter, 'parent'),
          )
        : keyedPage(
            db,
            filter,
            LEVEL,
            { value: `${scopeOf(filter)}#${filter.level}`, valueAgain: `${scopeOf(filter)}#${filter.level}`, afterTeamId: filter.afterTeamId },
            limit,
          );
  return finishWrittenPage([{ rows: await firstRow(db, writtenRows(dialectOf(db), walk)), shown: filter.limit }], resolve);
}

async function firstRow(db: Kysely<Database>, statement: RawBuilder<WrittenRows>): Promise<WrittenRows> {
  const { rows } = await statement.execute(db);
  return rows[0];
}

/**
 * Rows of the plain listing read per statement. A larger page is read in parts, each a turn
 * of the event loop after the last, so that the requests that arrive meanwhile are served
 * between them instead of after the whole page: a client that pages through every group
 * (a nightly sync, `ugs export`) slows the page views less (the hit-paging scenario,
 * docs/performance.md). Each part walks on from the last one's end, as the next page would.
 */
const LISTING_PART = 128;

async function listingInParts(reads: HotReads, filter: ListFilter, resolve: ResolveChains): Promise<WrittenPage> {
  const parts: WrittenPart[] = [];
  let afterTeamId = filter.afterTeamId;
  for (let left = filter.limit; ; ) {
    const shown = Math.min(LISTING_PART, left);
    const rows = (await reads.first(selectListingPage, filter.accountId, filter.environment, scopeOf(filter), afterTeamId, scopeOf(filter), shown + 1))!;
    parts.push({ rows, shown });
    left -= shown;
    if (Number(rows.walked) <= shown || left === 0) return finishWrittenPage(parts, resolve);
    afterTeamId = lastShownTeamId({ rows, shown })!;
  }
}

/**
 * The plain listing: the listing index's range of the tenant after the cursor, walked in order
 * and written (written-page.ts). On PostgreSQL the pages asked for during one turn go as one
 * statement (prepared-read.ts, `batched`): each call's walk is a lateral subquery, its limit a
 * column the planner cannot read, held to its tenant (sameTenant against the call's own values).
 */
export const selectListingPage = preparedRead(
  (db, accountId: number, environment: Environment, scopeText: string, afterTeamId: number, scopeTextAgain: string, limit: number) =>
    writtenRows(
      dialectOf(db),
      keyedPage(db, { accountId, environment }, LISTING, { value: scopeText, afterTeamId, valueAgain: scopeTextAgain }, walkLimit(db, limit)),
    ),
  {
    batched: (accountIds, environments, scopeTexts, afterTeamIds, scopeTextsAgain, limits, db) => {
      const walk = keyedWalk(db, LISTING, { value: sql`k.scope`, afterTeamId: sql`k.after_team_id`, valueAgain: sql`k.scope_again` });
      return batchedPages(
        sql`unnest(${accountIds}::int8[], ${environments}::text[], ${scopeTexts}::text[], ${afterTeamIds}::int8[], ${scopeTextsAgain}::text[], ${limits}::int8[])
          with ordinality as k(account_id, environment, scope, after_team_id, scope_again, page_limit, batch_index)`,
        sql`select ${columnsOf('user_groups')} from ${walk.from} where ${walk.range} order by ${walk.orderBy} limit k.page_limit`,
      );
    },
  },
);

/**
 * A page walked by `index` (keyedWalk) after the cursor, up to `limit` (walkLimit), with the
 * filters it does not walk by (`others`), held to the tenant.
 */
function keyedPage(
  db: Kysely<Database>,
  tenant: Tenant,
  index: KeyedIndex,
  bounds: Parameters<typeof keyedWalk>[2],
  limit: RawBuilder<number>,
  others: RawBuilder<boolean> = sql<boolean>`true`,
): RangeWalk<ListedRow> {
  const walk = keyedWalk(db, index, bounds);
  return heldToTenant<ListedRow>(
    db,
    tenant,
    { table: 'user_groups', orderBy: walk.heldOrder },
    (tenantBesideRange) =>
      sql<ListedRow>`select ${columnsOf('user_groups')}${walk.walkKey} from ${walk.from}
      where ${walk.range} and ${tenantBesideRange} and ${others}
      order by ${walk.orderBy} limit ${limit}`,
  );
}

const columnsOf = (table: string) => sql.join(LISTED_COLUMNS.map((column) => sql.ref(`${table}.${column}`)));

/** Pages of several calls in one statement: each call's walk (`page`, from `k`), held to the call's tenant and written, one row a call. */
function batchedPages(unnest: RawBuilder<unknown>, page: RangeWalk<unknown>): RawBuilder<BatchedRow<WrittenRows>> {
  const held = sql`(select ${columnsOf('page')} from ${asSubquery(page)} page where ${sameTenant('page', 'k')})`;
  return sql<BatchedRow<WrittenRows>>`select k.batch_index, written.* from ${unnest}
    cross join lateral (${writtenRows('postgres', held)}) written
    order by k.batch_index`;
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

/** The values of a search page's statement, one per use (searchPage): a prepared read takes each once. */
interface SearchValues {
  accountId: number;
  environment: Environment;
  /** The id range: the scoped ids (migration 0019) from the prefix's to its end's. */
  idFrom: string;
  idTo: string;
  afterTeamId: number;
  /** The name range, the same texts over the scoped names. */
  nameFrom: string;
  nameTo: string;
  accountId2: number;
  environment2: Environment;
  afterTeamId2: number;
  /** The prefix, and its end (prefixEnd; undefined when there is none): the rows the first range found. */
  prefix: string;
  end: string | undefined;
  /** The walk's limit: one more than the page shows. */
  limit: number;
}

function searchValues(filter: ListFilter, prefix: string, end: string | undefined): SearchValues {
  const from = `${scopeOf(filter)}/${prefix}`;
  const to = end === undefined ? scopeEnd(filter) : `${scopeOf(filter)}/${end}`;
  return {
    accountId: filter.accountId,
    environment: filter.environment,
    idFrom: from,
    idTo: to,
    afterTeamId: filter.afterTeamId,
    nameFrom: from,
    nameTo: to,
    accountId2: filter.accountId,
    environment2: filter.environment,
    afterTeamId2: filter.afterTeamId,
    prefix,
    end,
    limit: filter.limit + 1,
  };
}

const SEARCH_ARGS = Object.keys(searchValues({ accountId: 0, environment: 'Customer', afterTeamId: 0, limit: 0 }, '', '')) as (keyof SearchValues)[];
type SearchArgs = [number, Environment, string, string, number, string, string, number, Environment, number, string, string, number];
export const searchArgs = (filter: ListFilter, prefix: string, end: string): SearchArgs => {
  const values = searchValues(filter, prefix, end);
  return SEARCH_ARGS.map((key) => values[key]) as SearchArgs;
};

/** A search by prefix alone, prepared and written: searchPage with one placeholder per value; on PostgreSQL, batched as the listing is. */
export const selectSearchPage = preparedRead(
  (db, ...args: SearchArgs) => {
    const values = Object.fromEntries(SEARCH_ARGS.map((key, i) => [key, args[i]])) as unknown as SearchValues;
    return writtenRows(dialectOf(db), searchPage(db, values, sql<boolean>`true`));
  },
  {
    batched: (...columnsAndDb) => {
      const columns = columnsAndDb.slice(0, SEARCH_ARGS.length);
      const db = columnsAndDb[SEARCH_ARGS.length] as Kysely<Database>;
      const types: Record<keyof SearchValues, string> = {
        accountId: 'int8',
        environment: 'text',
        idFrom: 'text',
        idTo: 'text',
        afterTeamId: 'int8',
        nameFrom: 'text',
        nameTo: 'text',
        accountId2: 'int8',
        environment2: 'text',
        afterTeamId2: 'int8',
        prefix: 'text',
        end: 'text',
        limit: 'int8',
      };
      const arrays = SEARCH_ARGS.map((key, i) => sql`${columns[i]}::${sql.raw(types[key])}[]`);
      // The call's values as columns of k; its tenant as k.account_id and k.environment, for sameTenant.
      const columnOf = (key: keyof SearchValues) => (key === 'accountId' ? 'account_id' : key === 'environment' ? 'environment' : `v_${key}`);
      const names = SEARCH_ARGS.map((key) => sql.id(columnOf(key)));
      const refs = Object.fromEntries(SEARCH_ARGS.map((key) => [key, sql.ref(`k.${columnOf(key)}`)])) as unknown as SearchValues;
      return batchedPages(sql`unnest(${sql.join(arrays)}) with ordinality as k(${sql.join(names)}, batch_index)`, searchPage(db, refs, sql<boolean>`true`));
    },
  },
);

function listByPrefix(db: Kysely<Database>, filter: ListFilter, prefix: string, end: string | undefined) {
  return searchPage(db, searchValues(filter, prefix, end), otherFilters(filter, 'prefix'));
}

/**
 * Two index ranges (the scoped id index, the name search index), in code-point order on both
 * backends, so a search costs what the groups it matches cost.
 */
function searchPage(db: Kysely<Database>, v: SearchValues, others: RawBuilder<boolean>) {
  // The cursor is a filter here, never an index condition: the prefix's range is the
  // selective one, and a planner without statistics would otherwise intersect it with a scan
  // of every team_id above the cursor: a search's cost would grow with the table.
  const byId = db
    .selectFrom('user_groups')
    .select(LISTED_COLUMNS)
    .where(scopedIdOf(), '>=', v.idFrom)
    .where(scopedIdOf(), '<', v.idTo)
    .where(ownedBy('user_groups', { accountId: v.accountId, environment: v.environment }))
    .where(sql<boolean>`team_id + 0 > ${v.afterTeamId}`)
    .where(others);
  const byName = db
    .selectFrom('user_groups')
    .select(LISTED_COLUMNS)
    .where(scopedName, '>=', v.nameFrom)
    .where(scopedName, '<', v.nameTo)
    .where(ownedBy('user_groups', { accountId: v.accountId2, environment: v.environment2 }))
    .where(sql<boolean>`team_id + 0 > ${v.afterTeamId2}`)
    .where(others)
    // Those the first range found already: the two halves never share a row. A value, not the
    // column: as a condition on the column, an index on provided_id was read beside the range.
    .where((eb) => eb.or([eb(unindexedId, '<', v.prefix), ...(v.end === undefined ? [] : [eb(unindexedId, '>=', v.end)])]));
  return byId.unionAll(byName).orderBy('team_id').limit(v.limit);
}

/** The groups with a tag: the tag table's key (scope, tag, team_id) walked in order, each group by primary key. */
function pageByTag(db: Kysely<Database>, filter: ListFilter, tag: string, tenant: RawBuilder<boolean>) {
  return db
    .selectFrom('user_group_tags')
    .innerJoin('user_groups', 'user_groups.team_id', 'user_group_tags.team_id')
    .select(LISTED_COLUMNS.map((column) => `user_groups.${column}` as const))
    .where('user_group_tags.scope', '=', scopeOf(filter))
    .where('user_group_tags.tag', '=', tag)
    .where('user_group_tags.team_id', '>', filter.afterTeamId)
    .where(tenant)
    .where(otherFilters(filter, 'tag'))
    .orderBy('user_group_tags.team_id')
    .limit(walkLimit(db, filter.limit + 1));
}

/** What resolving a page needs of each ancestor (group-chain.ts). */
const CHAIN_COLUMNS = ['team_id', 'provided_id', 'parent_team_id', 'mapping', 'properties'] as const satisfies readonly (keyof ChainRow)[];

/**
 * The chain above a page's group (from its parent up), prepared once: a statement Kysely
 * prepared anew for each page cost more than the page's own query (docs/performance.md).
 */
export const selectAncestors = preparedRead(
  (db, accountId: number, environment: Environment, teamId: number) =>
    chainStatement<ChainRow>(db, CHAIN_COLUMNS, teamIdInTenant(accountId, environment, teamId)),
  {
    // The chains a turn's pages ask for, as one statement on PostgreSQL.
    batched: (accountIds, environments, teamIds, db) =>
      batchedChainStatement<ChainRow>(
        db,
        CHAIN_COLUMNS,
        sql`unnest(${accountIds}::int8[], ${environments}::text[], ${teamIds}::int8[]) with ordinality as k(account_id, environment, team_id, batch_index)`,
        sql`user_groups.team_id = k.team_id and ${sameTenant('user_groups', 'k')}`,
      ),
  },
);

/** The groups of a tenant's page, resolved: the chain above each distinct parent not on the page, read together (none when the page is flat). */
export async function resolvePage<R extends ChainRow>(reads: HotReads, tenant: Tenant, rows: R[]): Promise<ResolvedGroup<R>[]> {
  const ancestors = new Map<number, ChainRow>(rows.map((row) => [Number(row.team_id), row]));
  const missing = [...new Set(rows.map((row) => row.parent_team_id))].filter((id): id is number => id !== null && !ancestors.has(Number(id)));
  const chains = await Promise.all(missing.map((teamId) => reads.all(selectAncestors, tenant.accountId, tenant.environment, Number(teamId))));
  for (const row of chains.flat()) ancestors.set(Number(row.team_id), row);
  return resolveEach(rows, ancestors);
}
