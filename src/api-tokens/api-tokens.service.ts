// Issuing, listing and revoking API tokens: by the command-line tool and the bootstrap (no
// limits: they have the database), and over HTTP by an admin token of the account, which
// can never grant more than it has (docs/api.md, "API tokens over HTTP"). Each change is
// audited in the same transaction. Verifying them is api-token-authenticator.ts.
import type { Kysely } from 'kysely';
import type { DatabaseHandle } from '../db/database.ts';
import type { AccountRow, Database, Environment } from '../db/schema.ts';
import { inTransaction } from '../db/transaction.ts';
import { AppError, validationFailed } from '../foundations/errors.ts';
import { ensureAccount, findAccountBySlug, lockAccount } from '../accounts/accounts.repository.ts';
import { appendAudit, type Actor } from '../audit/audit.repository.ts';
import { generateToken, hashToken, tokenStart } from '../auth/token-format.ts';
import * as repository from './api-tokens.repository.ts';
import type { AuditLogRow } from '../db/schema.ts';
import { apiTokenHistory } from '../audit/audit.repository.ts';
import { hasScope, type Principal, type Scope } from '../auth/principal.ts';

interface IssueApiTokenInput {
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
  const row = await repository.insertApiTokenRow(trx, {
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
  });
  await appendAudit(trx, {
    accountId: account.id,
    subjectType: 'api_token',
    subjectId: row.id,
    environment: input.allowedEnvironment,
    action: 'api_token.issue',
    actor,
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

export type { ApiTokenListing } from './api-tokens.repository.ts';

export async function listApiTokens(db: Kysely<Database>, accountSlug: string): Promise<repository.ApiTokenListing[] | undefined> {
  const account = await findAccountBySlug(db, accountSlug);
  if (!account) return undefined;
  return repository.listApiTokenRows(db, { accountId: account.id, environment: null });
}

/**
 * Revokes a token of any account, with no rule beyond "not already revoked": the command-line
 * tool is the break-glass, run by whoever holds the database (it may revoke the last admin
 * token, which HTTP refuses). Undefined if there is no such token or it was already revoked;
 * else the account, and whether this revocation left it without a lasting admin token (the tool
 * then says how to make one: docs/cli.md, "A lost API token").
 */
export async function revokeApiToken(
  handle: DatabaseHandle,
  id: number,
  actor: Actor,
  now: Date,
): Promise<{ account: string; lastAdminRevoked: boolean } | undefined> {
  return inTransaction(handle, async (trx) => {
    const token = await repository.findApiTokenById(trx, id);
    if (token === undefined) return undefined;
    const account = await lockAccount(trx, token.account_id);
    if ((await revokeApiTokenRow(trx, { accountId: token.account_id, environment: null }, id, actor, now)) === undefined) return undefined;
    const adminLeft = (await repository.unrevokedApiTokens(trx, token.account_id)).some((left) => isLastingAdmin(left, now));
    return { account: account.slug, lastAdminRevoked: isLastingAdmin(token, now) && !adminLeft };
  });
}

/** Marks a token revoked and audits it, inside the caller's transaction; undefined if it already was. */
async function revokeApiTokenRow(
  trx: Kysely<Database>,
  visible: repository.VisibleTokens,
  id: number,
  actor: Actor,
  now: Date,
): Promise<repository.ApiTokenListing | undefined> {
  const row = await repository.markApiTokenRevoked(trx, visible, id, now.toISOString());
  if (!row) return undefined;
  await appendAudit(trx, {
    accountId: row.account_id,
    subjectType: 'api_token',
    subjectId: row.id,
    environment: row.allowed_environment,
    action: 'api_token.revoke',
    actor,
    at: now,
  });
  return row;
}

/** The tokens a principal may see and manage (repository.VisibleTokens). */
function visibleTo(principal: Principal): repository.VisibleTokens {
  return { accountId: principal.accountId, environment: principal.allowedEnvironment };
}

export function listApiTokensAs(handle: DatabaseHandle, principal: Principal): Promise<repository.ApiTokenListing[]> {
  return repository.listApiTokenRows(handle.db, visibleTo(principal));
}

/** The issues and revocations of the tokens a principal may see, newest first. */
export function apiTokenHistoryAs(handle: DatabaseHandle, principal: Principal, limit: number): Promise<AuditLogRow[]> {
  return apiTokenHistory(handle.db, principal.accountId, principal.allowedEnvironment, limit);
}

/** The principal's own token, as a listing (any token may ask who it is). */
export async function currentApiToken(handle: DatabaseHandle, principal: Principal): Promise<repository.ApiTokenListing> {
  const token = await repository.findVisibleApiToken(handle.db, visibleTo(principal), principal.tokenId);
  if (!token) throw new Error(`the authenticated API token ${principal.tokenId} is not in its account`);
  return token;
}

type ApiTokenStatus = 'active' | 'expired' | 'revoked';

/** Whether a token works at `now` (docs/api.md, "Tokens": expiry is checked on every request). */
export function apiTokenStatus(token: Pick<repository.ApiTokenListing, 'revoked_at' | 'expires_at'>, now: Date): ApiTokenStatus {
  if (token.revoked_at !== null) return 'revoked';
  return token.expires_at !== null && Date.parse(token.expires_at) <= now.getTime() ? 'expired' : 'active';
}

/** What an admin token asks for when it creates a token over HTTP. */
export interface CreateApiTokenRequest {
  name: string | null;
  scopes: Scope[];
  /** undefined: the creating token's own restriction (none if it has none). */
  allowedEnvironment: Environment | null | undefined;
  defaultEnvironment: Environment | undefined;
  /** undefined: the creating token's own expiry (none if it has none). */
  expiresInSeconds: number | undefined;
}

/**
 * Creates a token for the creator's account, never with more than the creator has: no scope
 * it lacks, no environment it may not use, no life beyond its own expiry.
 */
export async function createApiTokenAs(
  handle: DatabaseHandle,
  creator: Principal,
  request: CreateApiTokenRequest,
  actor: Actor,
  now: Date,
): Promise<{ token: string; listing: repository.ApiTokenListing }> {
  const missing = request.scopes.filter((scope) => !hasScope(creator, scope));
  if (missing.length > 0) {
    throw new AppError(
      'insufficient_scope',
      `this API token cannot grant the ${missing.join(' and ')} scope${missing.length > 1 ? 's' : ''}: it does not have ${missing.length > 1 ? 'them' : 'it'} itself`,
    );
  }
  const allowedEnvironment = request.allowedEnvironment === undefined ? creator.allowedEnvironment : request.allowedEnvironment;
  if (creator.allowedEnvironment !== null && allowedEnvironment !== creator.allowedEnvironment) {
    throw new AppError(
      'environment_forbidden',
      `this API token may only be used in the ${creator.allowedEnvironment} environment, so the tokens it creates must be restricted to it too (allowed_environment "${creator.allowedEnvironment}")`,
    );
  }
  const defaultEnvironment = request.defaultEnvironment ?? allowedEnvironment ?? 'Customer';
  if (allowedEnvironment !== null && defaultEnvironment !== allowedEnvironment) {
    throw validationFailed(
      'default_environment',
      'outside_allowed_environment',
      `default_environment must be ${allowedEnvironment}, the environment the token is restricted to`,
    );
  }
  const creatorExpiry = creator.expiresAt === null ? null : new Date(creator.expiresAt);
  let expiresAt = request.expiresInSeconds === undefined ? creatorExpiry : new Date(now.getTime() + request.expiresInSeconds * 1000);
  if (creatorExpiry !== null && expiresAt !== null && expiresAt > creatorExpiry) {
    throw validationFailed(
      'expires_in_seconds',
      'after_creator_expiry',
      `a token cannot outlive the token that creates it, which expires at ${creatorExpiry.toISOString()}`,
    );
  }
  expiresAt ??= null;

  return inTransaction(handle, async (trx) => {
    const account = await lockAccount(trx, creator.accountId);
    const issued = await insertApiToken(
      trx,
      account,
      { scopes: request.scopes, allowedEnvironment, defaultEnvironment, expiresAt, name: request.name },
      actor,
      now,
    );
    const listing = await repository.findVisibleApiToken(trx, visibleTo(creator), issued.id);
    if (!listing) throw new Error(`API token ${issued.id} vanished in its own transaction`);
    return { token: issued.token, listing };
  });
}

/**
 * An admin token that keeps the account manageable whatever happens to the others: active,
 * unrestricted (it sees every token) and without an expiry (time alone cannot end it).
 */
const isLastingAdmin = (token: repository.ApiTokenListing, now: Date) =>
  token.scopes.split(',').includes('admin') && token.allowed_environment === null && token.expires_at === null && apiTokenStatus(token, now) === 'active';

/**
 * Revokes a token the revoker may see (repository.VisibleTokens: others answer 404, as another account's
 * do). The account keeps one lasting admin token (isLastingAdmin): revoking the last one (the
 * revoker itself, or one a concurrent request left last) is refused, with the account locked
 * so that two such revocations cannot both pass. The command-line tool is the break-glass.
 */
export async function revokeApiTokenAs(handle: DatabaseHandle, revoker: Principal, id: number, actor: Actor, now: Date): Promise<repository.ApiTokenListing> {
  return inTransaction(handle, async (trx) => {
    await lockAccount(trx, revoker.accountId);
    const target = await repository.findVisibleApiToken(trx, visibleTo(revoker), id);
    if (!target) throw new AppError('api_token_not_found', `no API token with id ${id} in this account`);
    if (target.revoked_at !== null) throw new AppError('api_token_revoked', `API token ${id} was already revoked at ${target.revoked_at}`);
    if (isLastingAdmin(target, now)) {
      const others = (await repository.unrevokedApiTokens(trx, revoker.accountId)).filter((token) => token.id !== id && isLastingAdmin(token, now));
      if (others.length === 0) {
        throw new AppError(
          'last_admin_token',
          `API token ${id} is the account's last admin token that is unrestricted and never expires: create another such token before revoking it (or revoke it with the command-line tool, ugs token revoke)`,
        );
      }
    }
    const revoked = await revokeApiTokenRow(trx, visibleTo(revoker), id, actor, now);

    if (!revoked) throw new Error(`API token ${id} could not be revoked in its own transaction`);
    return revoked;
  });
}
