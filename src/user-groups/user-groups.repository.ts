// Queries on user groups. Every function takes the connection or a transaction as its first
// argument; the service decides where a transaction begins and ends.
import { sql, type Kysely, type Updateable } from 'kysely';
import type { Database, Environment, UserGroupRow, UserGroupsTable } from '../db/schema.ts';
import { preparedQuery, type BatchedRow } from '../db/prepared-query.ts';

export interface UserGroupKey {
  accountId: number;
  environment: Environment;
  providedId: string;
}

export type NewUserGroup = Omit<UserGroupRow, 'team_id' | 'token_generation'>;

/** Every column, named: prepared statements must not depend on `select *` (see preparedQuery). */
export const USER_GROUP_COLUMNS = [
  'team_id',
  'account_id',
  'environment',
  'provided_id',
  'name',
  'mapping',
  'properties',
  'is_demo_group',
  'token_hash',
  'token_ciphertext',
  'token_generation',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof UserGroupRow)[];

const selectUserGroupByKey = preparedQuery(
  (db, accountId: number, environment: Environment, providedId: string) =>
    db
      .selectFrom('user_groups')
      .select(USER_GROUP_COLUMNS)
      .where('account_id', '=', accountId)
      .where('environment', '=', environment)
      .where('provided_id', '=', providedId),
  {
    // PostgreSQL: a batch of lookups in one statement, each an index lookup on the identity.
    batched: (accountIds, environments, providedIds) => sql<BatchedRow<UserGroupRow>>`
      select k.batch_index, ${sql.join(USER_GROUP_COLUMNS.map((column) => sql.ref(`g.${column}`)))}
      from unnest(${accountIds}::int8[], ${environments}::text[], ${providedIds}::text[])
        with ordinality as k(account_id, environment, provided_id, batch_index)
      join user_groups g on g.account_id = k.account_id and g.environment = k.environment and g.provided_id = k.provided_id`,
  },
);

/** The hot path of get-or-create: one lookup on the identity's unique index. */
export function findUserGroup(db: Kysely<Database>, key: UserGroupKey): Promise<UserGroupRow | undefined> {
  return selectUserGroupByKey(db, key.accountId, key.environment, key.providedId);
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

/** Compare-and-swap: replaces the token only if `oldHash` is still the current one. */
export function swapUserGroupToken(
  db: Kysely<Database>,
  swap: { accountId: number; oldHash: string; newHash: string; newCiphertext: string; at: string },
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
    .returningAll()
    .executeTakeFirst();
}

export function updateUserGroupFields(
  db: Kysely<Database>,
  teamId: number,
  fields: Updateable<UserGroupsTable>,
): Promise<UserGroupRow | undefined> {
  return db.updateTable('user_groups').set(fields).where('team_id', '=', teamId).returningAll().executeTakeFirst();
}

export function deleteUserGroup(db: Kysely<Database>, key: UserGroupKey): Promise<UserGroupRow | undefined> {
  return db
    .deleteFrom('user_groups')
    .where('account_id', '=', key.accountId)
    .where('environment', '=', key.environment)
    .where('provided_id', '=', key.providedId)
    .returningAll()
    .executeTakeFirst();
}

/** Drops a group's retired tokens whose grace period is over, so the table holds only live ones. */
export async function purgeExpiredRetiredTokens(db: Kysely<Database>, teamId: number, now: string): Promise<void> {
  await db.deleteFrom('retired_tokens').where('team_id', '=', teamId).where('expires_at', '<=', now).execute();
}

export async function retireToken(db: Kysely<Database>, tokenHash: string, teamId: number, expiresAt: string): Promise<void> {
  await db.insertInto('retired_tokens').values({ token_hash: tokenHash, team_id: teamId, expires_at: expiresAt }).execute();
}

/** A page of groups in team_id order after `afterTeamId`: keyset pagination, cost independent of depth. */
export function listUserGroups(
  db: Kysely<Database>,
  filter: { accountId: number; environment: Environment; afterTeamId: number; limit: number; prefix?: string },
): Promise<UserGroupRow[]> {
  let query = db
    .selectFrom('user_groups')
    .selectAll()
    .where('account_id', '=', filter.accountId)
    .where('environment', '=', filter.environment)
    .where('team_id', '>', filter.afterTeamId);
  if (filter.prefix !== undefined) {
    // substr() compares code points exactly on both dialects (LIKE would be case-insensitive
    // on SQLite and treat % and _ as wildcards).
    const prefix = filter.prefix;
    const length = [...prefix].length;
    query = query.where((eb) =>
      eb.or([
        eb(eb.fn('substr', ['provided_id', eb.val(1), eb.val(length)]), '=', prefix),
        eb(eb.fn('substr', ['name', eb.val(1), eb.val(length)]), '=', prefix),
      ]),
    );
  }
  return query.orderBy('team_id').limit(filter.limit).execute();
}
