// The embed side's reads. Each resolves a token with one indexed lookup, with what the
// group's ancestors give it in the same statement (its variables are its computed
// properties), and selects only what a dashboard may see (never the token ciphertext).
import { sql } from '../db/kysely.ts';
import { preparedRead, type PreparedRead } from '../db/prepared-read.ts';
import type { HotReads } from '../db/hot-reads.ts';
import type { Environment, UserGroupRow } from '../db/schema.ts';
import { sameTenant, type Tenant } from '../db/tenant.ts';
import { batchedWithAncestry, chainStatement, resolveHotRow, teamIdInTenant, USER_GROUP_COLUMNS, withAncestry } from '../user-groups/group-sql.ts';
import { EmbedUserGroup } from './embed.schemas.ts';
import type { Ancestry, ResolvedGroup } from '../user-groups/group-chain.ts';

/**
 * What the embed side reads of a group: what it needs to find and check it and its ancestors,
 * and every field of EmbedUserGroup that is a column (a field added there is read here too);
 * never its token hash or ciphertext.
 */
const EMBED_FIELDS = [
  ...new Set([
    'team_id',
    'account_id',
    'environment',
    'parent_team_id',
    'token_generation',
    'provided_id',
    'name',
    'mapping',
    'properties',
    ...USER_GROUP_COLUMNS.filter((column) => column in EmbedUserGroup.properties),
  ] satisfies (keyof UserGroupRow)[]),
];

export type EmbedGroupRow = Pick<
  UserGroupRow,
  'team_id' | 'account_id' | 'environment' | 'parent_team_id' | 'token_generation' | 'provided_id' | 'name' | 'mapping' | 'properties'
> &
  Partial<Omit<UserGroupRow, 'token_hash' | 'token_ciphertext'>>;

/** The group whose current token hashes to `tokenHash` (unique index on user_groups.token_hash). */
const selectByCurrentTokenHash = preparedRead(
  (_db, tokenHash: string) => withAncestry<EmbedGroupRow>(EMBED_FIELDS, sql`user_groups.token_hash = ${tokenHash}`),
  {
    batched: (tokenHashes) =>
      batchedWithAncestry<EmbedGroupRow>(
        EMBED_FIELDS,
        sql`unnest(${tokenHashes}::text[]) with ordinality as k(token_hash, batch_index)`,
        sql`user_groups.token_hash = k.token_hash`,
      ),
  },
);

const selectByRetiredTokenHash = preparedRead((_db, tokenHash: string, now: string) =>
  withAncestry<EmbedGroupRow>(
    EMBED_FIELDS,
    // ISO-8601 UTC strings of one fixed width compare as the instants they name.
    sql`user_groups.team_id = (select retired_tokens.team_id from retired_tokens
      where retired_tokens.token_hash = ${tokenHash} and retired_tokens.expires_at > ${now})`,
  ),
);

/** The group an embed token names, in the tenant it names. Batched like the token lookups: every page view asks it. */
const selectByTeamId = preparedRead(
  (_db, accountId: number, environment: Environment, teamId: number) =>
    withAncestry<EmbedGroupRow>(EMBED_FIELDS, teamIdInTenant(accountId, environment, teamId)),
  {
    batched: (accountIds, environments, teamIds) =>
      batchedWithAncestry<EmbedGroupRow>(
        EMBED_FIELDS,
        sql`unnest(${accountIds}::int8[], ${environments}::text[], ${teamIds}::int8[]) with ordinality as k(account_id, environment, team_id, batch_index)`,
        sql`user_groups.team_id = k.team_id and ${sameTenant('user_groups', 'k')}`,
      ),
  },
);

/**
 * The group of an HS256 embed token, which names no account: only versions before embed
 * tokens had signing keys of their own issued them, each for 30 days at most. Its team_id,
 * signed with the service's own secret, is the credential, as a token's hash is.
 */

const selectByLegacyTeamId = preparedRead((_db, teamId: number) => withAncestry<EmbedGroupRow>(EMBED_FIELDS, sql`user_groups.team_id = ${teamId}`));

/** A hierarchy deeper than the ancestry reaches: the whole chain (UGS_MAX_HIERARCHY_DEPTH above 3). */
const selectChainByTeamId = preparedRead((db, accountId: number, environment: Environment, teamId: number) =>
  chainStatement<EmbedGroupRow>(db, EMBED_FIELDS, teamIdInTenant(accountId, environment, teamId)),
);

async function resolved<A extends unknown[]>(
  reads: HotReads,
  read: PreparedRead<A, EmbedGroupRow & Ancestry>,
  ...args: A
): Promise<ResolvedGroup<EmbedGroupRow> | undefined> {
  const row = await reads.first(read, ...args);
  return row && resolveHotRow(reads, row, selectChainByTeamId);
}

export function findGroupByCurrentTokenHash(reads: HotReads, tokenHash: string): Promise<ResolvedGroup<EmbedGroupRow> | undefined> {
  return resolved(reads, selectByCurrentTokenHash, tokenHash);
}

/** The group of a token retired by a rotation whose grace period has not ended (primary key of retired_tokens). */
export function findGroupByRetiredTokenHash(reads: HotReads, tokenHash: string, now: string): Promise<ResolvedGroup<EmbedGroupRow> | undefined> {
  return resolved(reads, selectByRetiredTokenHash, tokenHash, now);
}

/** The group an embed token names, if it is in `tenant` (primary key; batched on PostgreSQL). */
export function findGroupByTeamId(reads: HotReads, tenant: Tenant, teamId: number): Promise<ResolvedGroup<EmbedGroupRow> | undefined> {
  return resolved(reads, selectByTeamId, tenant.accountId, tenant.environment, teamId);
}

/** The group of an HS256 embed token (see selectByLegacyTeamId). */
export function findGroupByLegacyTeamId(reads: HotReads, teamId: number): Promise<ResolvedGroup<EmbedGroupRow> | undefined> {
  return resolved(reads, selectByLegacyTeamId, teamId);
}
