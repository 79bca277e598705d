// Queries on API tokens. Only a SHA-256 of each token is stored (token-format.ts).
import type { Insertable, Kysely } from 'kysely';
import type { ApiTokenRow, ApiTokensTable, Database, Environment } from '../db/schema.ts';
import { preparedRead } from '../db/prepared-read.ts';
import type { HotReads } from '../db/hot-reads.ts';

/** Every column, named (see preparedRead). */
const API_TOKEN_COLUMNS = [
  'id',
  'account_id',
  'name',
  'token_hash',
  'token_start',
  'scopes',
  'allowed_environment',
  'default_environment',
  'expires_at',
  'revoked_at',
  'created_at',
] as const satisfies readonly (keyof ApiTokenRow)[];

const selectApiTokenByHash = preparedRead((db, hash: string) => db.selectFrom('api_tokens').select(API_TOKEN_COLUMNS).where('token_hash', '=', hash));

/** The hot path of every management request whose token is not cached: one unique-index lookup. */
export function findApiTokenByHash(reads: HotReads, hash: string): Promise<ApiTokenRow | undefined> {
  return reads.first(selectApiTokenByHash, hash);
}

export function insertApiTokenRow(db: Kysely<Database>, values: Insertable<ApiTokensTable>): Promise<{ id: number }> {
  return db.insertInto('api_tokens').values(values).returning(['id']).executeTakeFirstOrThrow();
}

export type ApiTokenListing = Omit<ApiTokenRow, 'token_hash'>;

/**
 * The tokens a caller may see and manage: its account's, and when the caller is restricted
 * to an environment, only those restricted to the same one (docs/api.md, "API tokens over HTTP").
 */
export interface VisibleTokens {
  accountId: number;
  environment: Environment | null;
}

const LISTED_COLUMNS = API_TOKEN_COLUMNS.filter((column) => column !== 'token_hash');

export function listApiTokenRows(db: Kysely<Database>, visible: VisibleTokens): Promise<ApiTokenListing[]> {
  return db
    .selectFrom('api_tokens')
    .select(LISTED_COLUMNS)
    .where('account_id', '=', visible.accountId)
    .$if(visible.environment !== null, (q) => q.where('allowed_environment', '=', visible.environment!))
    .orderBy('id')
    .execute();
}

/** One token the caller may see, or undefined (another account's, or another environment's, is not found either). */
export function findVisibleApiToken(db: Kysely<Database>, visible: VisibleTokens, id: number): Promise<ApiTokenListing | undefined> {
  return db
    .selectFrom('api_tokens')
    .select(LISTED_COLUMNS)
    .where('account_id', '=', visible.accountId)
    .$if(visible.environment !== null, (q) => q.where('allowed_environment', '=', visible.environment!))
    .where('id', '=', id)
    .executeTakeFirst();
}

/** A token of any account by its id, for the command-line tool, which acts for every account. */
export function findApiTokenById(db: Kysely<Database>, id: number): Promise<ApiTokenListing | undefined> {
  return db.selectFrom('api_tokens').select(LISTED_COLUMNS).where('id', '=', id).executeTakeFirst();
}

/** Marks a token the caller may see revoked unless it already is; returns it, or undefined. */
export function markApiTokenRevoked(db: Kysely<Database>, visible: VisibleTokens, id: number, at: string): Promise<ApiTokenListing | undefined> {
  return db
    .updateTable('api_tokens')
    .set({ revoked_at: at })
    .where('id', '=', id)
    .where('account_id', '=', visible.accountId)
    .$if(visible.environment !== null, (q) => q.where('allowed_environment', '=', visible.environment!))
    .where('revoked_at', 'is', null)

    .returning(LISTED_COLUMNS)
    .executeTakeFirst();
}

/** The account's tokens that are not revoked (expired ones included: the caller knows the time). */
export function unrevokedApiTokens(db: Kysely<Database>, accountId: number): Promise<ApiTokenListing[]> {
  return db.selectFrom('api_tokens').select(LISTED_COLUMNS).where('account_id', '=', accountId).where('revoked_at', 'is', null).execute();
}
