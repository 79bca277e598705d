// The embed side's reads. Each resolves a token with one indexed lookup and selects only
// what a dashboard may see (never the token ciphertext).
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { preparedQuery, type BatchedRow } from '../db/prepared-query.ts';

const EMBED_COLUMNS = [
  'user_groups.team_id',
  'user_groups.provided_id',
  'user_groups.name',
  'user_groups.environment',
  'user_groups.is_demo_group',
  'user_groups.mapping',
  'user_groups.properties',
  'user_groups.token_generation',
] as const;

export interface EmbedGroupRow {
  team_id: number;
  provided_id: string;
  name: string;
  environment: 'Customer' | 'Testing';
  is_demo_group: number;
  mapping: string | null;
  properties: string | null;
  token_generation: number;
}

/** The group whose current token hashes to `tokenHash` (unique index on user_groups.token_hash). */
const selectByCurrentTokenHash = preparedQuery(
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

export function findGroupByCurrentTokenHash(db: Kysely<Database>, tokenHash: string): Promise<EmbedGroupRow | undefined> {
  return selectByCurrentTokenHash(db, tokenHash);
}

const selectByRetiredTokenHash = preparedQuery((db, tokenHash: string, now: string) =>
  db
    .selectFrom('retired_tokens')
    .innerJoin('user_groups', 'user_groups.team_id', 'retired_tokens.team_id')
    .select(EMBED_COLUMNS)
    .where('retired_tokens.token_hash', '=', tokenHash)
    // ISO-8601 UTC strings of one fixed width compare as the instants they name.
    .where('retired_tokens.expires_at', '>', now),
);

/** The group of a token retired by a rotation whose grace period has not ended (primary key of retired_tokens). */
export function findGroupByRetiredTokenHash(db: Kysely<Database>, tokenHash: string, now: string): Promise<EmbedGroupRow | undefined> {
  return selectByRetiredTokenHash(db, tokenHash, now);
}

const selectByTeamId = preparedQuery((db, teamId: number) => db.selectFrom('user_groups').select(EMBED_COLUMNS).where('user_groups.team_id', '=', teamId));

/** The group an embed token names (primary key). */
export function findGroupByTeamId(db: Kysely<Database>, teamId: number): Promise<EmbedGroupRow | undefined> {
  return selectByTeamId(db, teamId);
}
