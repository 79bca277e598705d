// The embed side's reads. Each resolves a token with one indexed lookup and selects only
// what a dashboard may see (never the token ciphertext).
import { sql } from 'kysely';
import { preparedRead, type BatchedRow } from '../db/prepared-read.ts';
import type { HotReads } from '../db/hot-reads.ts';
import type { UserGroupRow } from '../db/schema.ts';

/** What the embed side reads of a group: never its token hash or ciphertext. */
const EMBED_FIELDS = ['team_id', 'provided_id', 'name', 'environment', 'is_demo_group', 'mapping', 'properties', 'token_generation'] as const satisfies readonly (keyof UserGroupRow)[];
const EMBED_COLUMNS = EMBED_FIELDS.map((field) => `user_groups.${field}` as const);

export type EmbedGroupRow = Pick<UserGroupRow, (typeof EMBED_FIELDS)[number]>;

/** The group whose current token hashes to `tokenHash` (unique index on user_groups.token_hash). */
const selectByCurrentTokenHash = preparedRead(
  (db, tokenHash: string) => db.selectFrom('user_groups').select(EMBED_COLUMNS).where('user_groups.token_hash', '=', tokenHash),
  {
    // PostgreSQL: a batch of lookups in one statement, each one probe of the token hash's
    // unique index (a lateral subquery, never a join the planner could make a hash join).
    batched: (tokenHashes) => sql<BatchedRow<EmbedGroupRow>>`
      select k.batch_index, g.*
      from unnest(${tokenHashes}::text[]) with ordinality as k(token_hash, batch_index)
      cross join lateral (
        select ${sql.join(EMBED_COLUMNS.map((column) => sql.ref(column)))} from user_groups
        where user_groups.token_hash = k.token_hash
        limit 1
      ) g`,
  },
);

export function findGroupByCurrentTokenHash(reads: HotReads, tokenHash: string): Promise<EmbedGroupRow | undefined> {
  return reads.first(selectByCurrentTokenHash, tokenHash);
}

const selectByRetiredTokenHash = preparedRead((db, tokenHash: string, now: string) =>
  db
    .selectFrom('retired_tokens')
    .innerJoin('user_groups', 'user_groups.team_id', 'retired_tokens.team_id')
    .select(EMBED_COLUMNS)
    .where('retired_tokens.token_hash', '=', tokenHash)
    // ISO-8601 UTC strings of one fixed width compare as the instants they name.
    .where('retired_tokens.expires_at', '>', now),
);

/** The group of a token retired by a rotation whose grace period has not ended (primary key of retired_tokens). */
export function findGroupByRetiredTokenHash(reads: HotReads, tokenHash: string, now: string): Promise<EmbedGroupRow | undefined> {
  return reads.first(selectByRetiredTokenHash, tokenHash, now);
}

const selectByTeamId = preparedRead((db, teamId: number) => db.selectFrom('user_groups').select(EMBED_COLUMNS).where('user_groups.team_id', '=', teamId));

/** The group an embed token names (primary key). */
export function findGroupByTeamId(reads: HotReads, teamId: number): Promise<EmbedGroupRow | undefined> {
  return reads.first(selectByTeamId, teamId);
}
