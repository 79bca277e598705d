// API tokens: issued and revoked by the command-line tool, verified on every management
// request. Only a SHA-256 of each token is stored. Verified tokens are remembered for a
// fraction of a second (apiTokenCacheMs < 1 s), which keeps the database off the hot path
// while a revocation still takes effect on every instance within a second.
import type { Kysely } from 'kysely';
import { AppError } from '../errors.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { AccountRow, ApiTokenRow, Database, Environment } from '../db/schema.ts';
import { inTransaction } from '../db/transaction.ts';
import { ensureAccount, findAccountBySlug } from '../accounts/accounts.repository.ts';
import { appendAudit, type Actor } from '../audit/audit.repository.ts';
import { credentialFromAuthorization, generateToken, hashToken, looksLikeJws, tokenKind, tokenStart } from './token-format.ts';
import { preparedQuery } from '../db/prepared-query.ts';
import type { Principal, Scope } from './principal.ts';

export interface IssueApiTokenInput {
  accountSlug: string;
  scopes: Scope[];
  allowedEnvironment: Environment | null;
  defaultEnvironment?: Environment;
  expiresAt: Date | null;
  name: string | null;
}

export interface IssuedApiToken {
  id: number;
  token: string;
  account: string;
  accountCreated: boolean;
  scopes: Scope[];
  allowed_environment: Environment | null;
  default_environment: Environment;
  expires_at: string | null;
  name: string | null;
}

export async function issueApiToken(handle: DatabaseHandle, input: IssueApiTokenInput, actor: Actor, now: Date): Promise<IssuedApiToken> {
  return inTransaction(handle, async (trx) => {
    const { account, created } = await ensureAccount(trx, input.accountSlug, now);
    return { ...(await insertApiToken(trx, account, input, actor, now)), accountCreated: created };
  });
}

/** Inserts a new API token for an account, inside the caller's transaction. */
export async function insertApiToken(
  trx: Kysely<Database>,
  account: AccountRow,
  input: Omit<IssueApiTokenInput, 'accountSlug'>,
  actor: Actor,
  now: Date,
): Promise<IssuedApiToken> {
  const defaultEnvironment = input.defaultEnvironment ?? input.allowedEnvironment ?? 'Customer';
  if (input.allowedEnvironment && defaultEnvironment !== input.allowedEnvironment) {
    throw new Error(`the default environment ${defaultEnvironment} is not the one the token is restricted to (${input.allowedEnvironment})`);
  }
  const token = generateToken('api');
  const row = await trx
    .insertInto('api_tokens')
    .values({
      account_id: account.id,
      name: input.name,
      token_hash: hashToken(token),
      token_start: tokenStart(token),
      scopes: [...input.scopes].sort().join(','),
      allowed_environment: input.allowedEnvironment,
      default_environment: defaultEnvironment,
      expires_at: input.expiresAt?.toISOString() ?? null,
      revoked_at: null,
      created_at: now.toISOString(),
    })
    .returning(['id'])
    .executeTakeFirstOrThrow();
  await appendAudit(trx, {
    accountId: account.id,
    subjectType: 'api_token',
    subjectId: row.id,
    action: 'api_token.issue',
    actorTokenId: actor.tokenId,
    requestId: actor.requestId,
    at: now,
  });
  return {
    id: row.id,
    token,
    account: account.slug,
    accountCreated: false,
    scopes: input.scopes,
    allowed_environment: input.allowedEnvironment,
    default_environment: defaultEnvironment,
    expires_at: input.expiresAt?.toISOString() ?? null,
    name: input.name,
  };
}

export type ApiTokenListing = Omit<ApiTokenRow, 'token_hash'>;

export async function listApiTokens(db: Kysely<Database>, accountSlug: string): Promise<ApiTokenListing[] | undefined> {
  const account = await findAccountBySlug(db, accountSlug);
  if (!account) return undefined;
  return db
    .selectFrom('api_tokens')
    .select(['id', 'account_id', 'name', 'token_start', 'scopes', 'allowed_environment', 'default_environment', 'expires_at', 'revoked_at', 'created_at'])
    .where('account_id', '=', account.id)
    .orderBy('id')
    .execute();
}

/** Revokes a token; returns false if there is no such token or it was already revoked. */
export async function revokeApiToken(handle: DatabaseHandle, id: number, actor: Actor, now: Date): Promise<boolean> {
  return inTransaction(handle, async (trx) => {
    const row = await trx
      .updateTable('api_tokens')
      .set({ revoked_at: now.toISOString() })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .returning(['id', 'account_id'])
      .executeTakeFirst();
    if (!row) return false;
    await appendAudit(trx, {
      accountId: row.account_id,
      subjectType: 'api_token',
      subjectId: row.id,
      action: 'api_token.revoke',
      actorTokenId: actor.tokenId,
      requestId: actor.requestId,
      at: now,
    });
    return true;
  });
}

/** The API token in an `Authorization: Token <token>` header (Bearer is accepted too). */
function apiTokenFromAuthorization(header: string | undefined): string {
  const token = credentialFromAuthorization(header);
  if (token === undefined) {
    throw new AppError('missing_api_token', 'send the API token as Authorization: Token <API token>', {
      headers: { 'www-authenticate': 'Token' },
    });
  }
  if (token === null) throw invalidApiToken();
  return token;
}

function invalidApiToken(): AppError {
  return new AppError('invalid_api_token', 'the API token is not valid', { headers: { 'www-authenticate': 'Token' } });
}

/** A verified token and what it may do, built once per database read rather than per request. */
interface CachedToken {
  row: ApiTokenRow;
  fetchedAt: number;
  expiresAtMs: number | null;
  principal: Principal;
}

const CACHE_LIMIT = 10_000;

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

const selectApiTokenByHash = preparedQuery((db, hash: string) => db.selectFrom('api_tokens').select(API_TOKEN_COLUMNS).where('token_hash', '=', hash));

export class ApiTokenAuthenticator {
  private readonly cache = new Map<string, CachedToken>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: () => Date,
    private readonly cacheMs: number,
  ) {}

  /**
   * The principal of the API token in an Authorization header. Synchronous when the token
   * was verified less than cacheMs ago (nearly every request), so that the hook costs no
   * promise; a promise when the database must be asked. Throws (or rejects) with the 401.
   */
  authenticate(authorization: string | undefined): Principal | Promise<Principal> {
    const token = apiTokenFromAuthorization(authorization);
    const hash = hashToken(token);
    const cached = this.cache.get(hash);
    // A cached entry was found by the hash of a stored API token: the token is well formed.
    if (cached !== undefined && Date.now() - cached.fetchedAt < this.cacheMs) return this.principalOf(cached);
    const kind = tokenKind(token); // checksum: a malformed token costs no lookup
    if (kind === null && !looksLikeJws(token)) throw invalidApiToken();
    if (kind !== 'api') {
      throw new AppError('wrong_token_kind', 'a user group token or embed token was sent where an API token is needed', {
        headers: { 'www-authenticate': 'Token' },
      });
    }
    return this.fetch(hash).then((entry) => this.principalOf(entry));
  }

  private principalOf(entry: CachedToken | undefined): Principal {
    if (!entry || entry.row.revoked_at !== null || (entry.expiresAtMs !== null && entry.expiresAtMs <= this.now().getTime())) {
      throw invalidApiToken();
    }
    return entry.principal;
  }

  private async fetch(hash: string): Promise<CachedToken | undefined> {
    const clock = Date.now();
    const row = await selectApiTokenByHash(this.db, hash);
    if (!row) {
      this.cache.delete(hash);
      return undefined;
    }
    const entry: CachedToken = {
      row,
      fetchedAt: clock,
      expiresAtMs: row.expires_at === null ? null : Date.parse(row.expires_at),
      principal: {
        tokenId: row.id,
        tokenHash: hash,
        accountId: row.account_id,
        scopes: new Set(row.scopes.split(',') as Scope[]),
        allowedEnvironment: row.allowed_environment,
        defaultEnvironment: row.default_environment,
      },
    };
    if (this.cacheMs > 0) {
      if (this.cache.size >= CACHE_LIMIT) this.cache.delete(this.cache.keys().next().value as string);
      this.cache.delete(hash);
      this.cache.set(hash, entry);
    }
    return entry;
  }
}
