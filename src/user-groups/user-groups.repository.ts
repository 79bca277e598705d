// Queries on user groups. Every function takes the connection or a transaction as its first
// argument; the service decides where a transaction begins and ends.
import { sql } from '../db/kysely.ts';
import type { Insertable, Kysely, Updateable } from 'kysely';
import type { Database, Environment, UserGroupRow, UserGroupsTable } from '../db/schema.ts';
import { preparedRead } from '../db/prepared-read.ts';
import { multiRowInsert } from '../db/multi-row-insert.ts';
import { multiRowUpdate } from '../db/multi-row-update.ts';
import type { HotReads } from '../db/hot-reads.ts';
import type { Dialect } from '../db/database.ts';
import { groupWithId, ownedBy, sameTenant, scopedId, scopedIdOf, type Tenant } from '../db/tenant.ts';
import { sealingKeyId } from '../crypto/stored-keys.ts';
import type { ResolvedGroup } from './group-chain.ts';
import { batchedWithAncestry, chainStatement, resolveHotRow, scopedIdProbe, teamIdInTenant, USER_GROUP_COLUMNS, withAncestryByScopedId } from './group-sql.ts';

/** A user group's identity: its tenant and the caller's user_group_id (the unique key). */
export interface GroupIdentity extends Tenant {
  providedId: string;
}

/** A group to insert: columns that may be null (and those with defaults) may be left out. */
export type NewUserGroup = Insertable<UserGroupsTable>;

/**
 * A group by its identity, with its ancestors: its scoped id (migration 0019; group-sql.ts,
 * withAncestryByScopedId), held to the tenant. The batched form takes the calls' tenants and scoped ids
 * as `k`.
 */
const selectUserGroupByKey = preparedRead(
  (db, scopedIdValue: string, accountId: number, environment: Environment) =>
    withAncestryByScopedId<UserGroupRow>(db, USER_GROUP_COLUMNS, scopedIdValue, ownedBy('user_groups', { accountId, environment })),
  {
    batched: (scopedIds, accountIds, environments) =>
      batchedWithAncestry<UserGroupRow>(
        USER_GROUP_COLUMNS,
        sql`unnest(${scopedIds}::text[], ${accountIds}::int8[], ${environments}::text[])
          with ordinality as k(scoped_id, account_id, environment, batch_index)`,
        sameTenant('user_groups', 'k'),
        scopedIdProbe(USER_GROUP_COLUMNS, sql`k.scoped_id`),
      ),
  },
);

const selectUserGroupChainByTeamId = preparedRead((db, accountId: number, environment: Environment, teamId: number) =>
  chainStatement<UserGroupRow>(db, USER_GROUP_COLUMNS, teamIdInTenant(accountId, environment, teamId)),
);

/** The hot path of get-or-create: the group by its identity (its scoped id) with its ancestors' values, committed rows. */
export async function findUserGroup(reads: HotReads, key: GroupIdentity): Promise<ResolvedGroup | undefined> {
  const row = await reads.first(selectUserGroupByKey, scopedId(key, key.providedId), key.accountId, key.environment);
  return row && resolveHotRow(reads, row, selectUserGroupChainByTeamId);
}

/** A group and its ancestors by the group's identity, inside a transaction (a parent a write names); empty when there is none. */
export async function findUserGroupChainByIdentity(db: Kysely<Database>, key: GroupIdentity): Promise<UserGroupRow[]> {
  const { rows } = await chainStatement<UserGroupRow>(db, USER_GROUP_COLUMNS, groupWithId('user_groups', key, key.providedId)).execute(db);
  return rows;
}

/** A group of the tenant and its ancestors by team_id, inside a transaction (what a write answers with). */
export async function findUserGroupChain(db: Kysely<Database>, tenant: Tenant, teamId: number): Promise<UserGroupRow[]> {
  const seed = teamIdInTenant(tenant.accountId, tenant.environment, teamId);
  const { rows } = await chainStatement<UserGroupRow>(db, USER_GROUP_COLUMNS, seed).execute(db);
  return rows;
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
    .where(groupWithId('user_groups', key, key.providedId))
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

/**
 * The groups of the tenant these user_group_ids name, by user_group_id, safe from concurrent
 * writers until the transaction ends, as findUserGroupForUpdate's (FOR NO KEY UPDATE on
 * PostgreSQL, taken in the scoped ids' order).
 *
 * On PostgreSQL each id is its own probe of the scoped id index (a lateral subquery of one row,
 * as the batched lookups': group-sql.ts): a list of ids in one condition was read as a scan of
 * the whole table whenever it had no statistics (PostgreSQL expects a few rows in 200 for each
 * value, so half the table for a hundred), about 0.2 ms a thousand groups, every part of every
 * bulk upsert (docs/performance.md, "Why the code is the way it is"). SQLite, which holds a
 * transaction's rows by its one write lock, reads them by the same index.
 */
export async function findUserGroupsForUpdate(
  trx: Kysely<Database>,
  dialect: Dialect,
  tenant: Tenant,
  providedIds: readonly string[],
): Promise<Map<string, UserGroupRow>> {
  const found = new Map<string, UserGroupRow>();
  if (dialect === 'postgres') {
    if (providedIds.length === 0) return found;
    const { rows } = await probeScopedIds<UserGroupRow>(trx, tenant, providedIds, USER_GROUP_COLUMNS, { lock: true });
    for (const row of rows) found.set(row.provided_id, row);
    return found;
  }
  // SQLite: `indexed by` the scoped id index, which a table analyzed when it was small made it scan instead.
  for (let start = 0; start < providedIds.length; start += INSERT_CHUNK) {
    const scopedIds = providedIds.slice(start, start + INSERT_CHUNK).map((providedId) => scopedId(tenant, providedId));
    const { rows } = await sql<UserGroupRow>`select ${sql.join(USER_GROUP_COLUMNS.map((column) => sql.ref(`user_groups.${column}`)))}
      from user_groups indexed by user_groups_scoped_id
      where ${scopedIdOf()} in (${sql.join(scopedIds)}) and ${ownedBy('user_groups', tenant)}`.execute(trx);
    for (const row of rows) found.set(row.provided_id, row);
  }
  return found;
}

/**
 * PostgreSQL: which of these user_group_ids of the tenant name a group now, read without
 * locks (what a bulk upsert sizes its parts by; each part reads its groups again under its
 * locks). One probe of the scoped id index per id, as findUserGroupsForUpdate's.
 */
export async function existingProvidedIds(db: Kysely<Database>, tenant: Tenant, providedIds: readonly string[]): Promise<Set<string>> {
  if (providedIds.length === 0) return new Set();
  const { rows } = await probeScopedIds<{ provided_id: string }>(db, tenant, providedIds, ['provided_id', 'account_id', 'environment'], { lock: false });
  return new Set(rows.map((row) => row.provided_id));
}

/**
 * PostgreSQL: the tenant's groups these user_group_ids name, each id its own probe of the
 * scoped id index (a lateral subquery of one row), in the scoped ids' order; the tenant's
 * condition is named on every row found. `lock`: FOR NO KEY UPDATE on each.
 */
function probeScopedIds<Row>(db: Kysely<Database>, tenant: Tenant, providedIds: readonly string[], columns: readonly string[], options: { lock: boolean }) {
  const scopedIds = [...new Set(providedIds)].map((providedId) => scopedId(tenant, providedId)).sort();
  return sql<Row>`select g.* from unnest(${scopedIds}::text[]) as k(scoped_id)
    cross join lateral (select ${sql.join(columns.map((column) => sql.ref(`user_groups.${column}`)))} from user_groups
      where ${scopedIdOf()} = k.scoped_id limit 1${options.lock ? sql` for no key update` : sql``}) g
    where ${ownedBy('g', tenant)}`.execute(db);
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

/** Groups per multi-row update (a parameter per group and per column set). */
const UPDATE_CHUNK = 500;

const updateGroups = multiRowUpdate<UserGroupRow>('user_groups', 'team_id', 3, ({ values, set, joined, shared: [updatedAt, accountId, environment] }) => {
  // The shared values' placeholders stand in for the tenant: ownedBy writes its condition (its
  // environment a value, not an index condition: without statistics PostgreSQL walked the
  // identity index through the tenant's every row on it, instead of finding each key by the
  // primary key's).
  const tenant = { accountId: accountId as number, environment: environment as Environment };
  return sql<UserGroupRow>`${values} update user_groups set ${set}, updated_at = ${updatedAt} from v
    where ${joined} and ${ownedBy('user_groups', tenant)}
    returning ${sql.join(USER_GROUP_COLUMNS.map((column) => sql.ref(column)))}`;
});

/**
 * Gives each group of the tenant its own new values and `updatedAt`, in one statement per
 * set of columns (and per UPDATE_CHUNK groups); answers the rows as updated, by team_id.
 */
export async function updateUserGroupsFields(
  db: Kysely<Database>,
  tenant: Tenant,
  updates: readonly { teamId: number; fields: Updateable<UserGroupsTable> }[],
  updatedAt: string,
): Promise<Map<number, UserGroupRow>> {
  const byColumns = new Map<string, { columns: string[]; rows: { key: number; values: Record<string, unknown> }[] }>();
  for (const { teamId, fields } of updates) {
    const columns = Object.keys(fields).filter((column) => (fields as Record<string, unknown>)[column] !== undefined);
    const shape = columns.join(',');
    let group = byColumns.get(shape);
    if (!group) byColumns.set(shape, (group = { columns, rows: [] }));
    group.rows.push({ key: teamId, values: fields as Record<string, unknown> });
  }
  const updated = new Map<number, UserGroupRow>();
  for (const { columns, rows } of byColumns.values()) {
    for (let start = 0; start < rows.length; start += UPDATE_CHUNK) {
      const chunk = rows.slice(start, start + UPDATE_CHUNK);
      for (const row of await updateGroups.run(db, columns, chunk, [updatedAt, tenant.accountId, tenant.environment])) updated.set(Number(row.team_id), row);
    }
  }
  return updated;
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
