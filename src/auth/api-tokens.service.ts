// Issuing, listing and revoking API tokens (the command-line tool, the bootstrap), each
// change audited in the same transaction. Verifying them is api-token-authenticator.ts.
import type { Kysely } from 'kysely';
import type { DatabaseHandle } from '../db/database.ts';
import type { AccountRow, Database, Environment } from '../db/schema.ts';
import { inTransaction } from '../db/transaction.ts';
import { ensureAccount, findAccountBySlug } from '../accounts/accounts.repository.ts';
import { appendAudit, type Actor } from '../audit/audit.repository.ts';
import { generateToken, hashToken, tokenStart } from './token-format.ts';
import { insertApiTokenRow, listApiTokenRows, markApiTokenRevoked, type ApiTokenListing } from './api-tokens.repository.ts';
import type { Scope } from './principal.ts';

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
  const row = await insertApiTokenRow(trx, {
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

export type { ApiTokenListing };

export async function listApiTokens(db: Kysely<Database>, accountSlug: string): Promise<ApiTokenListing[] | undefined> {
  const account = await findAccountBySlug(db, accountSlug);
  if (!account) return undefined;
  return listApiTokenRows(db, account.id);
}

/** Revokes a token; returns false if there is no such token or it was already revoked. */
export async function revokeApiToken(handle: DatabaseHandle, id: number, actor: Actor, now: Date): Promise<boolean> {
  return inTransaction(handle, async (trx) => {
    const row = await markApiTokenRevoked(trx, id, now.toISOString());
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
