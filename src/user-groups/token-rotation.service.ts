// A group's token rotation (docs/api.md, "POST /api/user: rotate"): a compare-and-swap of the
// token's hash decides which of two concurrent rotations wins; the old token may keep working
// for a grace period (a retired token), or, with none, every earlier token ends at once.
import { inTransaction } from '../db/transaction.ts';
import type { Tenant } from '../db/tenant.ts';
import { AppError } from '../foundations/errors.ts';
import { appendAudit, type Actor } from '../audit/audit.repository.ts';
import { generateToken, hashToken, tokenKind } from '../auth/token-format.ts';
import { environmentForbidden, type Principal } from '../auth/principal.ts';
import {
  accountHasCurrentToken,
  dropRetiredTokens,
  findUserGroupChain,
  purgeExpiredRetiredTokens,
  retireToken,
  swapUserGroupToken,
} from './user-groups.repository.ts';
import { resolveChain } from './group-chain.ts';
import type { GroupWithToken } from './user-groups.json.ts';
import { auditEntry, withToken, type UserGroupDeps } from './user-groups.service.ts';

export async function rotateUserGroupToken(
  deps: UserGroupDeps,
  principal: Principal,
  actor: Actor,
  input: { current_token: string; grace_period_seconds?: number },
): Promise<GroupWithToken> {
  const tokenNotFound = new AppError('token_not_found', 'current_token is not the current token of any user group of this account');
  if (tokenKind(input.current_token) !== 'user_group') throw tokenNotFound;
  const oldHash = hashToken(input.current_token);
  const token = generateToken('user_group');
  const at = deps.now();
  const grace = input.grace_period_seconds ?? 0;
  const group = await inTransaction(deps.database, async (trx) => {
    const swapped = await swapUserGroupToken(trx, {
      accountId: principal.accountId,
      environment: principal.allowedEnvironment,
      oldHash,
      newHash: hashToken(token),
      newCiphertext: deps.tokens.seal(token),
      at: at.toISOString(),
    });
    if (!swapped) return undefined;
    const tenant: Tenant = { accountId: swapped.account_id, environment: swapped.environment };
    if (grace > 0) {
      await purgeExpiredRetiredTokens(trx, tenant, swapped.team_id, at.toISOString());
      await retireToken(trx, tenant, { tokenHash: oldHash, teamId: swapped.team_id, expiresAt: new Date(at.getTime() + grace * 1000).toISOString() });
    } else {
      // No grace: the answer to a leak. Every earlier token ends now, those still in the
      // grace period of an earlier rotation too (docs/api.md, "POST /api/user: rotate").
      await dropRetiredTokens(trx, tenant, swapped.team_id);
    }
    await appendAudit(trx, {
      ...auditEntry(swapped, 'user_group.rotate', actor, at),
      gracePeriodEndsAt: grace > 0 ? new Date(at.getTime() + grace * 1000) : undefined,
    });
    return resolveChain(await findUserGroupChain(trx, tenant, swapped.team_id));
  });
  if (!group) {
    // The current token of a group in an environment this API token may not use: forbidden,
    // not unknown (docs/api.md, "Environments and tokens"). Asked only when the swap found nothing.
    if (principal.allowedEnvironment !== null && (await accountHasCurrentToken(deps.database.db, principal.accountId, oldHash))) {
      throw environmentForbidden(principal.allowedEnvironment);
    }
    throw tokenNotFound;
  }
  deps.events.userGroupTokenIssued('rotate');
  return withToken(group, deps.tokens);
}
