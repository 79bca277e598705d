// The user group operations (docs/api.md, "Operations"). Every invariant that must hold
// across processes is left to the database: the identity's unique key decides who creates.
// A failed operation throws before commit, so it changes nothing. Two operations have
// modules of their own: the token's rotation (token-rotation.service.ts) and the bulk upsert
// (upsert.service.ts), which writes each of its items with the steps exported here
// (insertNewIn, updateIn), so that an item follows the rules of a single create or PUT; the
// listing has its own too (list.service.ts).
import type { DatabaseHandle } from '../db/database.ts';
import type { Database, Environment, UserGroupRow } from '../db/schema.ts';
import type { Kysely } from 'kysely';
import { inTransaction } from '../db/transaction.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { AppError } from '../foundations/errors.ts';
import type { OpenedTokenCache } from './opened-tokens.ts';
import { UPDATABLE_FIELDS, type PutUser, type UserGroupInput } from './user-groups.schemas.ts';
import type { ServiceEvents } from '../metrics/metrics.ts';
import { appendAudit, appendAudits, type Actor, type AuditAction, type AuditDetails, type AuditEntry } from '../audit/audit.repository.ts';
import { generateToken, hashToken } from '../auth/token-format.ts';
import { requireScope, resolveEnvironment, type Principal } from '../auth/principal.ts';
import * as repository from './user-groups.repository.ts';
import type { Tenant } from '../db/tenant.ts';
import type { HeavyOperations } from '../accounts/heavy-operations.ts';
import { childLevels, deleteSubtree, hasChildren, lockHierarchy, replaceTagRows, subtreeHeight } from './hierarchy/hierarchy.repository.ts';
import { checkLevel, parentChainFor, type ParentChoice } from './hierarchy/hierarchy.ts';
import { checkProperties, normalizeUserGroupId, storedFields } from './stored-fields.ts';
import { resolveChain, type ResolvedGroup } from './group-chain.ts';
import type { GroupWithToken } from './user-groups.json.ts';

export interface UserGroupDeps {
  database: DatabaseHandle;
  /** Seals new tokens and opens stored ones (remembering what it opened). */
  tokens: OpenedTokenCache;
  now: () => Date;
  events: Pick<ServiceEvents, 'userGroupTokenIssued'>;
  /** UGS_MAX_HIERARCHY_DEPTH. */
  maxHierarchyDepth: number;
  /** UGS_MAX_TAGS_PER_ENVIRONMENT (tag-set.ts). */
  maxTagsPerEnvironment: number;
  /** The slots of each account's heavy operations: a bulk upsert runs in one. */
  heavyOperations: HeavyOperations;
}

/** The group with its token; only for committed rows (see OpenedTokenCache). The routes write it as JSON (user-groups.json.ts). */
export function withToken(group: ResolvedGroup, tokens: OpenedTokenCache): GroupWithToken {
  return { ...group, token: tokens.tokenOf(group.row) };
}

/** The group an input names: the caller's account, the environment it asks for (or its token's), the normalized id. */
export function keyFor(principal: Principal, input: { user_group_id: string | number; api_environment_tag?: Environment }): repository.GroupIdentity {
  return {
    accountId: principal.accountId,
    environment: resolveEnvironment(principal, input.api_environment_tag),
    providedId: normalizeUserGroupId(input.user_group_id),
  };
}

/** What the input says about the parent: absent (keep), null (none) or an id. */
export function parentChoice(input: UserGroupInput): ParentChoice {
  const parent = input.parent_user_group_id;
  return parent === undefined ? { given: false } : { given: true, providedId: parent === null ? null : normalizeUserGroupId(parent) };
}

/** A row's tags, as stored (a JSON array). */
export const tagsOf = (row: { group_tags: string }) => JSON.parse(row.group_tags) as string[];
/** Whether stored fields give a group tags (docs/api.md, "Tags": such a write holds the tenant's lock). */
const setsTags = (fields: { group_tags?: string }) => fields.group_tags !== undefined && fields.group_tags !== '[]';

/** Inserts a new group with a fresh token (input already checked); undefined if the identity already exists. */
function insertNew(deps: UserGroupDeps, key: repository.GroupIdentity, input: UserGroupInput, actor: Actor): Promise<ResolvedGroup | undefined> {
  const token = generateToken('user_group');
  const at = deps.now();
  return inTransaction(deps.database, async (trx) => {
    const inserted = await insertNewIn(trx, deps, key, input, token, at, actor);
    if (!inserted) return undefined;
    await appendAudit(trx, inserted.audit);
    return resolveChain(inserted.chain);
  });
}

/** The row of a new group: what the input leaves out, the name defaults to the id; columns that may be null are null. */
export function newGroupRow(
  deps: UserGroupDeps,
  key: repository.GroupIdentity,
  fields: ReturnType<typeof storedFields>,
  parentTeamId: number | null,
  token: string,
  at: Date,
): repository.NewUserGroup {
  return {
    account_id: key.accountId,
    environment: key.environment,
    provided_id: key.providedId,
    name: key.providedId,
    is_demo_group: 0,
    group_tags: '[]',
    ...fields,
    parent_team_id: parentTeamId,
    token_hash: hashToken(token),
    token_ciphertext: deps.tokens.seal(token),
    created_at: at.toISOString(),
    updated_at: at.toISOString(),
  };
}

/**
 * The insert of a new group, in the caller's transaction: its chain (the group, then its
 * ancestors) and its history entry, which the caller appends with its actor; undefined if the
 * identity already exists. Every rule is checked before the first write.
 */
export async function insertNewIn(
  trx: Kysely<Database>,
  deps: UserGroupDeps,
  key: repository.GroupIdentity,
  input: UserGroupInput,
  token: string,
  at: Date,
  actor: Actor,
): Promise<{ chain: UserGroupRow[]; audit: AuditEntry } | undefined> {
  const parent = parentChoice(input);
  const fields = storedFields(input);
  // A new group has no descendants: it can close no cycle, only be too deep or at the wrong
  // level. The lock when it has a parent or a level: a declaration of the account's levels
  // (account-levels.service.ts) takes it too; and when it has tags (hierarchy.repository.ts).
  if ((parent.given && parent.providedId !== null) || fields.hierarchy_level || setsTags(fields)) await lockHierarchy(trx, deps.database.dialect, key);

  const parentChain = await parentChainFor(trx, key, parent, { height: 1, maxDepth: deps.maxHierarchyDepth });
  await checkLevel(trx, key.accountId, fields.hierarchy_level ?? null, parentChain[0]?.hierarchy_level ?? null, []);
  const row = await repository.insertUserGroupIfAbsent(trx, newGroupRow(deps, key, fields, parentChain[0]?.team_id ?? null, token, at));
  if (!row) return undefined;
  const tags = tagsOf(row);
  if (tags.length > 0) await replaceTagRows(trx, key, row.team_id, tags, deps);
  const details: AuditDetails = {};
  if (parentChain.length > 0) details.parent_user_group_id = { old: null, new: parentChain[0].provided_id };
  if (tags.length > 0) details.group_tags = { old: [], new: tags };
  return { chain: [row, ...parentChain], audit: auditEntry(row, 'user_group.create', actor, at, undefined, details) };
}

export async function createUserGroup(deps: UserGroupDeps, principal: Principal, actor: Actor, input: UserGroupInput): Promise<GroupWithToken> {
  checkProperties(input.properties);
  const key = keyFor(principal, input);
  const group = await insertNew(deps, key, input, actor);
  if (!group) throw groupExists(key, key.providedId);
  deps.events.userGroupTokenIssued('create');
  return withToken(group, deps.tokens);
}

export async function getOrCreateUserGroup(
  deps: UserGroupDeps,
  principal: Principal,
  actor: Actor,
  input: UserGroupInput,
): Promise<{ created: boolean; group: GroupWithToken }> {
  checkProperties(input.properties); // the field rules hold whether or not the group exists
  const key = keyFor(principal, input);
  // The hot path (the group exists) is one indexed read, its ancestors in the same statement, and no write.
  // The first read may come from a replica (docs/api.md, "Reads from replicas"); after an insert
  // that found the group taken, the winner's row is read on the primary, where it is committed.
  for (let attempt = 0; attempt < 3; attempt++) {
    const existing =
      attempt === 0
        ? await deps.database.pageViews.ofAccount(key.accountId, (reads) => repository.findUserGroup(reads, key))
        : await repository.findUserGroup(deps.database.reads, key);
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

/** A group by its identity, never creating it (docs/api.md, "GET /api/user/lookup"). */
export async function lookupUserGroup(
  deps: UserGroupDeps,
  principal: Principal,
  input: { user_group_id: string; api_environment_tag?: Environment },
): Promise<GroupWithToken> {
  const key = keyFor(principal, input);
  const group = await deps.database.pageViews.ofAccount(key.accountId, (reads) => repository.findUserGroup(reads, key));
  if (!group) throw notFound(key);
  return withToken(group, deps.tokens);
}

export async function updateUserGroup(deps: UserGroupDeps, principal: Principal, actor: Actor, input: PutUser): Promise<GroupWithToken> {
  const key = keyFor(principal, input);
  checkProperties(input.properties);
  const changes = storedFields(input);
  const parent = parentChoice(input);
  const newId = input.new_user_group_id === undefined ? undefined : normalizeUserGroupId(input.new_user_group_id);
  if (Object.keys(changes).length === 0 && !parent.given && newId === undefined) {
    throw new AppError('validation_failed', `give at least one of ${UPDATABLE_FIELDS.join(', ')} to update`, {
      details: [{ field: 'body', issue: 'nothing_to_update' }],
    });
  }
  if (newId === key.providedId) {
    throw new AppError('validation_failed', 'new_user_group_id is the current user_group_id: give a different one to rename', {
      details: [{ field: 'new_user_group_id', issue: 'same_as_current' }],
    });
  }
  const at = deps.now();
  const group = await inTransaction(deps.database, async (trx) => {
    const { row, audit } = await updateIn(trx, deps, key, { changes, parent, newId }, actor, at);
    if (audit) await appendAudit(trx, audit);
    return resolveChain(await repository.findUserGroupChain(trx, key, row.team_id));
  });
  return withToken(group, deps.tokens);
}

interface GroupChange {
  changes: ReturnType<typeof storedFields>;
  parent: ParentChoice;
  /** A rename: the new user_group_id. */
  newId?: string;
}

/**
 * A change to an existing group, in the caller's transaction: the group as it is afterwards,
 * and the history entry for the caller to append (none when nothing changed). Every rule is
 * checked before the first write.
 */
export async function updateIn(
  trx: Kysely<Database>,
  deps: UserGroupDeps,
  key: repository.GroupIdentity,
  { changes, parent, newId }: GroupChange,
  actor: Actor,
  at: Date,
): Promise<{ row: UserGroupRow; audit?: AuditEntry }> {
  // The hierarchy lock before any row lock (hierarchy.repository.ts), and only when the
  // change could break a rule of the hierarchy or sets the tags.
  const reshapes = parent.given || changes.hierarchy_level !== undefined;
  if (reshapes || changes.group_tags !== undefined) await lockHierarchy(trx, deps.database.dialect, key);
  const current = await repository.findUserGroupForUpdate(trx, deps.database.dialect, key, { keyChange: newId !== undefined });
  if (!current) throw notFound(key);
  const details: AuditDetails = {};
  const changed = changedFields(changes, current);
  let parentTeamId = current.parent_team_id;
  // The group and its ancestors as they are: the old parent, and the parent chain when it stays.
  const currentChain = reshapes ? await repository.findUserGroupChain(trx, key, current.team_id) : undefined;
  if (currentChain) {
    const height = parent.given ? await subtreeHeight(trx, key, current.team_id) : 0;
    const parentChain = parent.given
      ? await parentChainFor(trx, key, parent, { height, maxDepth: deps.maxHierarchyDepth, moving: current })
      : currentChain.slice(1);
    parentTeamId = parentChain[0]?.team_id ?? null;
    const level = changes.hierarchy_level !== undefined ? changes.hierarchy_level : current.hierarchy_level;
    await checkLevel(trx, key.accountId, level, parentChain[0]?.hierarchy_level ?? null, await childLevelsIfChanged(trx, key, current, level));
    if (parentTeamId !== current.parent_team_id) {
      changed.push('parent_user_group_id');
      details.parent_user_group_id = { old: currentChain[1]?.provided_id ?? null, new: parentChain[0]?.provided_id ?? null };
    }
  }
  if (newId !== undefined) {
    changed.push('user_group_id');
    details.user_group_id = { old: current.provided_id, new: newId };
  }
  if (changed.includes('group_tags')) details.group_tags = { old: tagsOf(current), new: JSON.parse(changes.group_tags!) };
  if (changed.length === 0) return { row: current };
  let updated: UserGroupRow | undefined;
  try {
    updated = await repository.updateUserGroupFields(trx, key, current.team_id, {
      ...changes,
      parent_team_id: parentTeamId,
      ...(newId === undefined ? {} : { provided_id: newId }),
      updated_at: at.toISOString(),
    });
  } catch (err) {
    // Another group holds the new id, or took it a moment ago: the identity's unique key decides.
    if (newId !== undefined && isUniqueViolation(err)) throw groupExists(key, newId);
    throw err;
  }
  if (!updated) throw notFound(key);
  if (details.group_tags) await replaceTagRows(trx, key, updated.team_id, tagsOf(updated), deps);
  return { row: updated, audit: auditEntry(updated, 'user_group.update', actor, at, changed, details) };
}

/** The fields whose stored value a change replaces with another: the history's changed_fields (before parent and id). */
export function changedFields(changes: ReturnType<typeof storedFields>, current: UserGroupRow): string[] {
  return (Object.keys(changes) as (keyof typeof changes)[]).filter((field) => changes[field] !== current[field]);
}

/** The levels of a group's children, when its level changes to a named one (they must stay deeper). */
async function childLevelsIfChanged(trx: Kysely<Database>, tenant: Tenant, group: UserGroupRow, level: string | null): Promise<string[]> {
  if (level === null || level === group.hierarchy_level) return [];
  return childLevels(trx, tenant, group.team_id);
}

/**
 * Deletes a group; with `cascade`, its whole subtree in one transaction, one history entry per
 * deleted group. Without it, a group that has children stays (409): deleting it would orphan
 * them, and the foreign key would refuse anyway. Answers with the group as it was and how
 * many groups went.
 */
export async function removeUserGroup(
  deps: UserGroupDeps,
  principal: Principal,
  actor: Actor,
  input: { user_group_id: string | number; api_environment_tag?: Environment; cascade?: boolean },
): Promise<{ group: ResolvedGroup; deletedCount: number }> {
  const key = keyFor(principal, input);
  const at = deps.now();
  return inTransaction(deps.database, async (trx) => {
    // Under the hierarchy lock, no child can be added while we look.
    await lockHierarchy(trx, deps.database.dialect, key);
    const current = await repository.findUserGroupForUpdate(trx, deps.database.dialect, key, { keyChange: true });
    if (!current) throw notFound(key);
    const group = resolveChain(await repository.findUserGroupChain(trx, key, current.team_id));
    if (!input.cascade && (await hasChildren(trx, key, current.team_id))) {
      throw new AppError(
        'user_group_has_children',
        `user group "${key.providedId}" has children: delete or move them first, or delete the whole subtree with cascade=true`,
      );
    }
    const deleted = await deleteSubtree(trx, key, current.team_id);
    await appendAudits(
      trx,
      deleted.map((row) => auditEntry(row, 'user_group.delete', actor, at)),
    );
    return { group, deletedCount: deleted.length };
  });
}

function groupExists(key: repository.GroupIdentity, providedId: string): AppError {
  return new AppError('user_group_exists', `a user group with user_group_id "${providedId}" already exists in ${key.environment}`);
}

function notFound(key: repository.GroupIdentity): AppError {
  return new AppError('user_group_not_found', `no user group with user_group_id "${key.providedId}" in ${key.environment}`);
}

export function auditEntry(row: UserGroupRow, action: AuditAction, actor: Actor, at: Date, changedFields?: string[], details?: AuditDetails): AuditEntry {
  return {
    generation: row.token_generation,
    accountId: row.account_id,
    subjectType: 'user_group',
    subjectId: row.team_id,
    environment: row.environment,
    providedId: row.provided_id,
    action,
    changedFields,
    details: details && Object.keys(details).length > 0 ? details : undefined,
    actor,
    at,
  };
}
