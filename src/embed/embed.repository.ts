// The embed side's reads. Each resolves a token with one indexed lookup, reads the group's
// ancestors in the same statement (its variables are its computed properties), and selects
// only what a dashboard may see (never the token ciphertext).
import { sql } from 'kysely';
import { preparedRead } from '../db/prepared-read.ts';
import type { HotReads } from '../db/hot-reads.ts';
import type { UserGroupRow } from '../db/schema.ts';
import { batchedChainStatement, chainStatement } from '../user-groups/user-groups.repository.ts';
import { resolveChain, type ResolvedGroup } from '../user-groups/group-chain.ts';

/** What the embed side reads of a group: never its token hash or ciphertext. */
const EMBED_FIELDS = [
  'team_id',
  'provided_id',
  'name',
  'environment',
  'is_demo_group',
  'parent_team_id',
  'hierarchy_level',
  'mapping',
  'properties',
  'token_generation',
] as const satisfies readonly (keyof UserGroupRow)[];

export type EmbedGroupRow = Pick<UserGroupRow, (typeof EMBED_FIELDS)[number]>;
export type EmbedGroup = ResolvedGroup<EmbedGroupRow>;

const columnList = sql.join(EMBED_FIELDS.map((field) => sql.ref(field)));

/** The group whose current token hashes to `tokenHash` (unique index on user_groups.token_hash). */
const selectByCurrentTokenHash = preparedRead(
  (db, tokenHash: string) => {
    const raw = chainStatement<EmbedGroupRow>(db, EMBED_FIELDS, sql`user_groups.token_hash = ${tokenHash}`);
    return { compile: () => raw.compile(db) };
  },
  {
    // PostgreSQL: a batch of lookups in one statement, each one probe of the token hash's
    // unique index (a lateral subquery, never a join the planner could make a hash join).
    batched: (db, tokenHashes) =>
      batchedChainStatement<EmbedGroupRow>(
        db,
        EMBED_FIELDS,
        sql`select k.batch_index, g.*
          from unnest(${tokenHashes}::text[]) with ordinality as k(token_hash, batch_index)
          cross join lateral (select ${columnList} from user_groups where user_groups.token_hash = k.token_hash limit 1) g`,
      ),
  },
);

async function first(chain: Promise<EmbedGroupRow[]>): Promise<EmbedGroup | undefined> {
  const rows = await chain;
  return rows.length === 0 ? undefined : resolveChain(rows);
}

export function findGroupByCurrentTokenHash(reads: HotReads, tokenHash: string): Promise<EmbedGroup | undefined> {
  return first(reads.all(selectByCurrentTokenHash, tokenHash));
}

const selectByRetiredTokenHash = preparedRead((db, tokenHash: string, now: string) => {
  const raw = chainStatement<EmbedGroupRow>(
    db,
    EMBED_FIELDS,
    // ISO-8601 UTC strings of one fixed width compare as the instants they name.
    sql`user_groups.team_id = (select retired_tokens.team_id from retired_tokens
      where retired_tokens.token_hash = ${tokenHash} and retired_tokens.expires_at > ${now})`,
  );
  return { compile: () => raw.compile(db) };
});

/** The group of a token retired by a rotation whose grace period has not ended (primary key of retired_tokens). */
export function findGroupByRetiredTokenHash(reads: HotReads, tokenHash: string, now: string): Promise<EmbedGroup | undefined> {
  return first(reads.all(selectByRetiredTokenHash, tokenHash, now));
}

const selectByTeamId = preparedRead((db, teamId: number) => {
  const raw = chainStatement<EmbedGroupRow>(db, EMBED_FIELDS, sql`user_groups.team_id = ${teamId}`);
  return { compile: () => raw.compile(db) };
});

/** The group an embed token names (primary key). */
export function findGroupByTeamId(reads: HotReads, teamId: number): Promise<EmbedGroup | undefined> {
  return first(reads.all(selectByTeamId, teamId));
}
