// The rules of the hierarchy (docs/api.md, "Hierarchy"), checked inside the write's
// transaction, under the hierarchy lock (hierarchy.repository.ts): the parent exists in the
// same account and environment, the group is not its own ancestor, the hierarchy is at most
// UGS_MAX_HIERARCHY_DEPTH levels deep, and, when the account declared its levels, each
// group's level is one of them and deeper than its parent's.
import type { Kysely } from 'kysely';
import type { Database, UserGroupRow } from '../../db/schema.ts';
import { AppError, validationFailed } from '../../foundations/errors.ts';
import { findUserGroupChainByIdentity, type GroupIdentity } from '../user-groups.repository.ts';
import { accountLevels } from './hierarchy.repository.ts';

/** What a request says about the parent: nothing (keep it), null (none) or a user_group_id. */
export type ParentChoice = { given: false } | { given: true; providedId: string | null };

/**
 * The chain of the parent a request names, nearest first (empty for none), checked against
 * the group it will hold: `height` is how many levels the group and its descendants span
 * (1 for a new group), `moving` the group when it exists.
 */
export async function parentChainFor(
  trx: Kysely<Database>,
  key: GroupIdentity,
  parent: ParentChoice,
  rules: { height: number; maxDepth: number; moving?: UserGroupRow },
): Promise<UserGroupRow[]> {
  if (!parent.given || parent.providedId === null) return [];
  const chain = await findUserGroupChainByIdentity(trx, { ...key, providedId: parent.providedId });
  if (chain.length === 0) {
    throw new AppError('parent_not_found', `no user group with user_group_id "${parent.providedId}" in ${key.environment} to be the parent`, {
      details: [{ field: 'parent_user_group_id', issue: 'not_found' }],
    });
  }
  const moving = rules.moving;
  if (moving && chain.some((row) => row.team_id === moving.team_id)) {
    throw new AppError(
      'hierarchy_cycle',
      `user group "${moving.provided_id}" cannot be placed under "${parent.providedId}": "${parent.providedId}" is "${moving.provided_id}" or one of its descendants`,
      { details: [{ field: 'parent_user_group_id', issue: 'cycle' }] },
    );
  }
  const depth = chain.length + rules.height;
  if (depth > rules.maxDepth) {
    throw new AppError(
      'hierarchy_too_deep',
      `a hierarchy is at most ${rules.maxDepth} levels deep (UGS_MAX_HIERARCHY_DEPTH); this change would make it ${depth}`,
      { details: [{ field: 'parent_user_group_id', issue: 'too_deep' }] },
    );
  }
  return chain;
}

/**
 * When the account declared its levels: `level` is one of them, deeper than the parent's and
 * shallower than each of `childLevels`. Groups without a level, and accounts without
 * declared levels, are not checked.
 */
export async function checkLevel(
  trx: Kysely<Database>,
  accountId: number,
  level: string | null,
  parentLevel: string | null,
  childLevels: readonly string[],
): Promise<void> {
  if (level === null) return;
  const levels = await accountLevels(trx, accountId);
  if (levels === null) return;
  const rank = levels.indexOf(level);
  if (rank === -1) {
    throw validationFailed('hierarchy_level', 'not_declared', `hierarchy_level must be one of the account's levels: ${levels.join(', ')}`);
  }
  if (parentLevel !== null && levels.indexOf(parentLevel) >= rank) {
    throw validationFailed(
      'hierarchy_level',
      'not_below_parent',
      `hierarchy_level "${level}" must be deeper than the parent's ("${parentLevel}"); the levels are ${levels.join(', ')}`,
    );
  }
  const shallowerChild = childLevels.find((child) => levels.indexOf(child) !== -1 && levels.indexOf(child) <= rank);
  if (shallowerChild !== undefined) {
    throw validationFailed(
      'hierarchy_level',
      'not_above_children',
      `hierarchy_level "${level}" must be shallower than its children's (one is "${shallowerChild}")`,
    );
  }
}
