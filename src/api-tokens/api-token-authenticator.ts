// Verifies the API token of every management request. Verified tokens are remembered for a
// fraction of a second (apiTokenCacheMs < 1 s), which keeps the database off the hot path
// while a revocation still takes effect on every instance within a second (docs/api.md,
// "Tokens").
import { AppError } from '../foundations/errors.ts';
import type { ApiTokenRow } from '../db/schema.ts';
import type { PageViewReads } from '../db/database.ts';
import { BoundedMap } from '../foundations/bounded-map.ts';
import { bareToken, credentialFromAuthorization, hashToken, looksLikeJws, tokenKind } from '../auth/token-format.ts';
import { findApiTokenByHash } from './api-tokens.repository.ts';
import type { Principal, Scope } from '../auth/principal.ts';

const TOKEN_CHALLENGE = { 'www-authenticate': 'Token' };
const HOW_TO_SEND = 'send the API token as Authorization: Token <API token>';

/** The API token in an `Authorization: Token <token>` header (Bearer is accepted too). */
function apiTokenFromAuthorization(header: string | undefined): string {
  const token = credentialFromAuthorization(header);
  if (token === undefined) throw new AppError('missing_api_token', HOW_TO_SEND, { headers: TOKEN_CHALLENGE });
  if (token === null) throw malformedAuthorization(header as string);
  return token;
}

/**
 * A header not of the form `Token <t>`: each message says what to send instead (docs/api.md,
 * "Requests"). The token alone, without its scheme, is the usual slip: the token may well be
 * valid, so the answer must not say it is not.
 */
function malformedAuthorization(header: string): AppError {
  const bare = bareToken(header);
  if (bare === null) return invalidApiToken(`the Authorization header is not of the form Token <API token>: ${HOW_TO_SEND}`);
  if (bare.kind === 'api') return invalidApiToken(`the Authorization header has no scheme: ${HOW_TO_SEND}`);
  return wrongTokenKind(bare.kind);
}

function invalidApiToken(message = 'the API token is not valid (unknown, malformed, revoked or expired)'): AppError {
  return new AppError('invalid_api_token', message, { headers: TOKEN_CHALLENGE });
}

function wrongTokenKind(kind: 'user_group' | 'embed'): AppError {
  const sent = kind === 'user_group' ? 'a user group token (ugs_grp_…)' : 'an embed token';
  return new AppError(
    'wrong_token_kind',
    `${sent} was sent where an API token is needed: it is for the embed side (/api/embed/…, as Authorization: Bearer <token>); ` +
      `the management API takes an API token (ugs_api_…): ${HOW_TO_SEND}`,
    { headers: TOKEN_CHALLENGE },
  );
}

/** A verified token and what it may do, built once per database read rather than per request. */
interface CachedToken {
  row: ApiTokenRow;
  fetchedAt: number;
  expiresAtMs: number | null;
  principal: Principal;
}

const CACHE_LIMIT = 10_000;

export class ApiTokenAuthenticator {
  private readonly cache = new BoundedMap<string, CachedToken>(CACHE_LIMIT);

  constructor(
    /** A page view's reads: the token table may be read on a replica (docs/api.md, "Reads from replicas"). */
    private readonly reads: PageViewReads,
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
    if (kind !== 'api') throw wrongTokenKind(kind ?? 'embed');
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
    const row = await this.reads.findingAccount(
      (reads) => findApiTokenByHash(reads, hash),
      (found) => found.account_id,
    );
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
        expiresAt: row.expires_at,
      },
    };
    if (this.cacheMs > 0) {
      this.cache.delete(hash); // to the end: the newest entry is the last one dropped
      this.cache.set(hash, entry);
    }
    return entry;
  }
}
