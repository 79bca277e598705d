// The SQL of idempotent retries (migrations 0007, 0008; idempotency.ts). Every statement
// of a request names its account (docs/security.md, "Tenant isolation") and the API token that
// sent the key: each finds its row by the unique (account_id, api_token_id, idempotency_key),
// so no statement can reach another token's key. Only the sweeper's batch, background work of
// no request, spans accounts: by the expires_at index.
import type { ExpressionBuilder, Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';

/** An Idempotency-Key as sent by one API token of one account. */
export interface KeyOfToken {
  accountId: number;
  apiTokenId: number;
  key: string;
}

export interface Claim extends KeyOfToken {
  requestHash: string;
  /** A random id of this attempt. */
  owner: string;
  /** Now, and when the claim's lock and the row lapse (ISO 8601). */
  now: string;
  lockedUntil: string;
  expiresAt: string;
}

/**
 * Inserts the key's row as running under `owner`; or takes over the row that holds the key
 * when it has expired, or when it is still running the same request under a lock that has
 * lapsed (its process died). True when this attempt now owns the row. One statement, so that
 * of several attempts at once exactly one wins, on any number of instances.
 */
export async function claimKey(db: Kysely<Database>, claim: Claim): Promise<boolean> {
  const running = {
    request_hash: claim.requestHash,
    state: 'running' as const,
    owner: claim.owner,
    locked_until: claim.lockedUntil,
    response_status: null,
    response_sealed: null,
    created_at: claim.now,
    expires_at: claim.expiresAt,
  };
  const row = await db
    .insertInto('idempotency_keys')
    .values({ account_id: claim.accountId, api_token_id: claim.apiTokenId, idempotency_key: claim.key, ...running })
    .onConflict((conflict) =>
      conflict
        .columns(['account_id', 'api_token_id', 'idempotency_key'])
        .doUpdateSet(running)
        .where('idempotency_keys.account_id', '=', claim.accountId)
        .where('idempotency_keys.api_token_id', '=', claim.apiTokenId)
        .where((eb) =>
          eb.or([
            eb('idempotency_keys.expires_at', '<=', claim.now),
            eb.and([
              eb('idempotency_keys.state', '=', 'running'),
              eb('idempotency_keys.locked_until', '<=', claim.now),
              eb('idempotency_keys.request_hash', '=', claim.requestHash),
            ]),
          ]),
        ),
    )
    .returning('owner')
    .executeTakeFirst();
  return row?.owner === claim.owner;
}

/** The one row of a token's key: the columns of the unique index. */
function theKey({ accountId, apiTokenId, key }: KeyOfToken) {
  return (eb: ExpressionBuilder<Database, 'idempotency_keys'>) => eb.and({ account_id: accountId, api_token_id: apiTokenId, idempotency_key: key });
}

/** The key's row as it stands. */
export function findKey(db: Kysely<Database>, where: KeyOfToken) {
  return db
    .selectFrom('idempotency_keys')
    .select(['request_hash', 'state', 'locked_until', 'response_status', 'response_sealed', 'expires_at'])
    .where(theKey(where))
    .executeTakeFirst();
}

/** Extends the owner's lock while its request runs; false when it no longer owns the row. */
export async function extendLock(db: Kysely<Database>, where: KeyOfToken, owner: string, lockedUntil: string): Promise<boolean> {
  const result = await db.updateTable('idempotency_keys').set({ locked_until: lockedUntil }).where(theKey(where)).where('owner', '=', owner).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Compare-and-swap from running (owned by `owner`) to done with the sealed answer; false when another attempt took the row over. */
export async function finishKey(db: Kysely<Database>, where: KeyOfToken, owner: string, status: number, sealed: string): Promise<boolean> {
  const result = await db
    .updateTable('idempotency_keys')
    .set({ state: 'done', owner: null, locked_until: null, response_status: status, response_sealed: sealed })
    .where(theKey(where))
    .where('owner', '=', owner)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Deletes the owner's running row: the request may be retried for real. */
export async function releaseKey(db: Kysely<Database>, where: KeyOfToken, owner: string): Promise<void> {
  await db.deleteFrom('idempotency_keys').where(theKey(where)).where('owner', '=', owner).execute();
}

/** Deletes a stored answer no configured secret key opens (only that one: a newer row is kept). */
export async function dropAnswer(db: Kysely<Database>, where: KeyOfToken, sealed: string): Promise<void> {
  await db.deleteFrom('idempotency_keys').where(theKey(where)).where('response_sealed', '=', sealed).execute();
}

/** Deletes up to `limit` expired rows of any account; how many. */
export async function sweepExpiredKeys(db: Kysely<Database>, now: string, limit: number): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where('id', 'in', (eb) => eb.selectFrom('idempotency_keys').select('id').where('expires_at', '<=', now).orderBy('expires_at').limit(limit))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
