// The user group operations (docs/api.md, "Operations"). Every invariant that must hold
// across processes is left to the database: the identity's unique key decides who creates,
// a compare-and-swap UPDATE decides who rotates. A failed operation throws before commit,
// so it changes nothing.
import type { DatabaseHandle } from '../db/database.ts';
import type { Environment, UserGroupRow } from '../db/schema.ts';
import { inTransaction } from '../db/transaction.ts';
import { AppError } from '../errors.ts';
import type { OpenedTokenCache } from './opened-tokens.ts';
import type { UserGroupInput } from './user-groups.schemas.ts';
import type { ServiceEvents } from '../metrics/metrics.ts';
import { appendAudit, type Actor } from '../audit/audit.repository.ts';
import { generateToken, hashToken, tokenKind } from '../auth/token-format.ts';
import { assertEnvironmentAllowed, requireScope, resolveEnvironment, type Principal } from '../auth/principal.ts';
import {
  deleteUserGroup,
  findUserGroup,
  findUserGroupForUpdate,
  insertUserGroupIfAbsent,
  listUserGroups,
  dropRetiredTokens,
  purgeExpiredRetiredTokens,
  retireToken,
  swapUserGroupToken,
  updateUserGroupFields,
  type UserGroupKey,
} from './user-groups.repository.ts';
import { SETTABLE_FIELDS, checkProperties, normalizeUserGroupId, storedFields } from './user-group-fields.ts';
import type { UserGroupWithToken } from './user-groups.json.ts';

export interface UserGroupDeps {
  database: DatabaseHandle;
  /** Seals new tokens and opens stored ones (remembering what it opened). */
  tokens: OpenedTokenCache;
  now: () => Date;
  events: Pick<ServiceEvents, 'userGroupTokenIssued'>;
}


/** The group with its token; only for committed rows (see OpenedTokenCache). The routes write it as JSON (user-groups.json.ts). */
function withToken(row: UserGroupRow, tokens: OpenedTokenCache): UserGroupWithToken {
  return { row, token: tokens.tokenOf(row) };
}

function keyFor(principal: Principal, input: { user_group_id: string | number; api_environment_tag?: Environment }): UserGroupKey {
  return {
    accountId: principal.accountId,
    environment: resolveEnvironment(principal, input.api_environment_tag),
    providedId: normalizeUserGroupId(input.user_group_id),
  };
}

/** Inserts a new group with a fresh token (input already checked); undefined if the identity already exists. */
async function insertNew(deps: UserGroupDeps, key: UserGroupKey, input: UserGroupInput, actor: Actor): Promise<UserGroupRow | undefined> {
  const token = generateToken('user_group');
  const at = deps.now();
  return inTransaction(deps.database, async (trx) => {
    const row = await insertUserGroupIfAbsent(trx, {
      account_id: key.accountId,
      environment: key.environment,
      provided_id: key.providedId,
      name: key.providedId,
      mapping: null,
      properties: null,
      is_demo_group: 0,
      ...storedFields(input),
      token_hash: hashToken(token),
      token_ciphertext: deps.tokens.seal(token),
      created_at: at.toISOString(),
      updated_at: at.toISOString(),
    });
    if (row) await audit(trx, row, 'user_group.create', actor, at);
    return row;
  });
}

export async function createUserGroup(deps: UserGroupDeps, principal: Principal, actor: Actor, input: UserGroupInput): Promise<UserGroupWithToken> {
  requireScope(principal, 'write', 'creating a user group');
  checkProperties(input.properties);
  const key = keyFor(principal, input);
  const row = await insertNew(deps, key, input, actor);
  if (!row) {
    throw new AppError('user_group_exists', `a user group with user_group_id "${key.providedId}" already exists in ${key.environment}`);
  }
  deps.events.userGroupTokenIssued('create');
  return withToken(row, deps.tokens);
}

export async function getOrCreateUserGroup(
  deps: UserGroupDeps,
  principal: Principal,
  actor: Actor,
  input: UserGroupInput,
): Promise<{ created: boolean; group: UserGroupWithToken }> {
  requireScope(principal, 'read', 'looking up a user group');
  checkProperties(input.properties); // the field rules hold whether or not the group exists
  const key = keyFor(principal, input);
  // The hot path (the group exists) is one indexed read and no write.
  for (let attempt = 0; attempt < 3; attempt++) {
    const existing = await findUserGroup(deps.database.reads, key);
    if (existing) return { created: false, group: withToken(existing, deps.tokens) };
    requireScope(principal, 'write', 'creating a user group (it does not exist yet)');
    const inserted = await insertNew(deps, key, input, actor);
    if (inserted) {
      deps.events.userGroupTokenIssued('get_or_create');
      return { created: true, group: withToken(inserted, deps.tokens) };
    }
    // Another request created it between our read and our insert: read the winner's row.
  }
  throw new Error('get-or-create did not settle after 3 attempts (the group is being created and deleted concurrently)');
}

export async function updateUserGroup(deps: UserGroupDeps, principal: Principal, actor: Actor, input: UserGroupInput): Promise<UserGroupWithToken> {
  requireScope(principal, 'write', 'updating a user group');
  const key = keyFor(principal, input);
  checkProperties(input.properties);
  const changes = storedFields(input);
  if (Object.keys(changes).length === 0) {
    throw new AppError('validation_failed', `give at least one of ${SETTABLE_FIELDS.join(', ')} to update`, {
      details: [{ field: 'body', issue: 'nothing_to_update' }],
    });
  }
  const at = deps.now();
  const row = await inTransaction(deps.database, async (trx) => {
    const current = await findUserGroupForUpdate(trx, deps.database.dialect, key);
    if (!current) return undefined;
    const changed = (Object.keys(changes) as (keyof typeof changes)[]).filter((field) => changes[field] !== current[field]);
    if (changed.length === 0) return current;
    const updated = await updateUserGroupFields(trx, current.team_id, { ...changes, updated_at: at.toISOString() });
    if (updated) await audit(trx, updated, 'user_group.update', actor, at, changed);
    return updated;
  });
  if (!row) throw notFound(key);
  return withToken(row, deps.tokens);
}

export async function rotateUserGroupToken(
  deps: UserGroupDeps,
  principal: Principal,
  actor: Actor,
  input: { current_token: string; grace_period_seconds?: number },
): Promise<UserGroupWithToken> {
  requireScope(principal, 'write', 'rotating a user group token');
  const tokenNotFound = new AppError('token_not_found', 'current_token is not the current token of any user group of this account');
  if (tokenKind(input.current_token) !== 'user_group') throw tokenNotFound;
  const oldHash = hashToken(input.current_token);
  const token = generateToken('user_group');
  const at = deps.now();
  const grace = input.grace_period_seconds ?? 0;
  const row = await inTransaction(deps.database, async (trx) => {
    const swapped = await swapUserGroupToken(trx, {
      accountId: principal.accountId,
      oldHash,
      newHash: hashToken(token),
      newCiphertext: deps.tokens.seal(token),
      at: at.toISOString(),
    });
    if (!swapped) return undefined;
    assertEnvironmentAllowed(principal, swapped.environment); // throws: the swap is rolled back
    if (grace > 0) {
      await purgeExpiredRetiredTokens(trx, swapped.team_id, at.toISOString());
      await retireToken(trx, oldHash, swapped.team_id, new Date(at.getTime() + grace * 1000).toISOString());
    } else {
      // No grace: the answer to a leak. Every earlier token ends now, those still in the
      // grace period of an earlier rotation too (docs/api.md, "Rotation").
      await dropRetiredTokens(trx, swapped.team_id);
    }
    await audit(trx, swapped, 'user_group.rotate', actor, at);
    return swapped;
  });
  if (!row) throw tokenNotFound;
  deps.events.userGroupTokenIssued('rotate');
  return withToken(row, deps.tokens);
}

export async function removeUserGroup(
  deps: UserGroupDeps,
  principal: Principal,
  actor: Actor,
  input: { user_group_id: string | number; api_environment_tag?: Environment },
): Promise<UserGroupRow> {
  requireScope(principal, 'write', 'deleting a user group');
  const key = keyFor(principal, input);
  const at = deps.now();
  const row = await inTransaction(deps.database, async (trx) => {
    const deleted = await deleteUserGroup(trx, key);
    if (deleted) await audit(trx, deleted, 'user_group.delete', actor, at);
    return deleted;
  });
  if (!row) throw notFound(key);
  return row;
}

export async function listUserGroupsPage(
  deps: UserGroupDeps,
  principal: Principal,
  query: { api_environment_tag?: Environment; limit?: number; cursor?: string; q?: string },
): Promise<{ rows: UserGroupRow[]; nextCursor: string | null }> {
  requireScope(principal, 'read', 'listing user groups');
  const environment = resolveEnvironment(principal, query.api_environment_tag);
  const limit = query.limit ?? 100;
  const rows = await listUserGroups(deps.database.db, {
    accountId: principal.accountId,
    environment,
    afterTeamId: query.cursor === undefined ? 0 : decodeCursor(query.cursor),
    limit: limit + 1,
    prefix: query.q,
  });
  const page = rows.slice(0, limit);
  const more = rows.length > limit;
  return { rows: page, nextCursor: more ? encodeCursor(page[page.length - 1].team_id) : null };
}

function encodeCursor(teamId: number): string {
  return Buffer.from(JSON.stringify({ after: teamId })).toString('base64url');
}

function decodeCursor(cursor: string): number {
  try {
    const after = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')).after;
    if (Number.isSafeInteger(after) && after >= 0) return after;
  } catch {
    // fall through to the error below
  }
  throw new AppError('validation_failed', 'cursor is not one this service returned', { details: [{ field: 'cursor', issue: 'invalid' }] });
}

function notFound(key: UserGroupKey): AppError {
  return new AppError('user_group_not_found', `no user group with user_group_id "${key.providedId}" in ${key.environment}`);
}

function audit(trx: DatabaseHandle['db'], row: UserGroupRow, action: string, actor: Actor, at: Date, changedFields?: string[]) {
  return appendAudit(trx, {
    accountId: row.account_id,
    subjectType: 'user_group',
    subjectId: row.team_id,
    environment: row.environment,
    providedId: row.provided_id,
    action,
    changedFields,
    actorTokenId: actor.tokenId,
    requestId: actor.requestId,
    at,
  });
}
