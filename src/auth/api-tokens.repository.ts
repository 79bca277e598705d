// Queries on API tokens. Only a SHA-256 of each token is stored (token-format.ts).
import type { Insertable, Kysely } from 'kysely';
import type { ApiTokenRow, ApiTokensTable, Database } from '../db/schema.ts';
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

export type ApiTokenStatus = 'active' | 'expired' | 'revoked';

/** Whether a token works at `now` (docs/api.md, "Tokens": expiry is checked on every request). */
export function apiTokenStatus(token: Pick<ApiTokenRow, 'revoked_at' | 'expires_at'>, now: Date): ApiTokenStatus {
  if (token.revoked_at !== null) return 'revoked';
  return token.expires_at !== null && Date.parse(token.expires_at) <= now.getTime() ? 'expired' : 'active';
}

export function listApiTokenRows(db: Kysely<Database>, accountId: number): Promise<ApiTokenListing[]> {
  return db
    .selectFrom('api_tokens')
    .select(API_TOKEN_COLUMNS.filter((column) => column !== 'token_hash'))
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute();
}

/** Marks a token revoked unless it already is; returns it, or undefined. */
export function markApiTokenRevoked(db: Kysely<Database>, id: number, at: string): Promise<{ id: number; account_id: number } | undefined> {
  return db
    .updateTable('api_tokens')
    .set({ revoked_at: at })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .returning(['id', 'account_id'])
    .executeTakeFirst();
}

/** One token of an account, or undefined (another account's token is not found either). */
export function findAccountApiToken(db: Kysely<Database>, accountId: number, id: number): Promise<ApiTokenListing | undefined> {
  return db
    .selectFrom('api_tokens')
    .select(API_TOKEN_COLUMNS.filter((column) => column !== 'token_hash'))
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** The account's tokens that are not revoked (expired ones included: the caller knows the time). */
export function unrevokedApiTokens(db: Kysely<Database>, accountId: number): Promise<Pick<ApiTokenRow, 'id' | 'scopes' | 'expires_at' | 'revoked_at'>[]> {
  return db.selectFrom('api_tokens').select(['id', 'scopes', 'expires_at', 'revoked_at']).where('account_id', '=', accountId).where('revoked_at', 'is', null).execute();
}
