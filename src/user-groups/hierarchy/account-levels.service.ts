// Declaring an account's hierarchy level names (docs/api.md, "Hierarchy"): what `ugs account
// levels` does. A level that groups use may not be dropped, and the check and the change are
// one transaction under the hierarchy lock of both environments, the lock every write that
// sets a level takes: a PUT that sets a level and a declaration that drops it run one after
// the other, on every instance, and the second sees the first.
import type { DatabaseHandle } from '../../db/database.ts';
import type { Environment } from '../../db/schema.ts';
import { inTransaction } from '../../db/transaction.ts';
import { findAccountBySlug } from '../../accounts/accounts.repository.ts';
import { accountLevels, levelsInUseOutside, lockHierarchy, setAccountLevels } from './hierarchy.repository.ts';

type LevelsOutcome =
  | { outcome: 'declared'; levels: string[] | null }
  | { outcome: 'no_account' }
  /** Groups use these levels, which the new list leaves out: nothing changed. */
  | { outcome: 'in_use'; levels: string[] };

/** Both environments, always in this order, so that two declarations never wait on each other's second lock. */
const LOCK_ORDER: Environment[] = ['Customer', 'Testing'];

/** The account's declared level names, or null when it declared none. */
export async function readAccountLevels(handle: DatabaseHandle, slug: string): Promise<LevelsOutcome> {
  const account = await findAccountBySlug(handle.db, slug);
  return account ? { outcome: 'declared', levels: await accountLevels(handle.db, account.id) } : { outcome: 'no_account' };
}

/** Declares the account's level names, shallowest first; null forgets them (any level name is accepted again). */
export function declareAccountLevels(handle: DatabaseHandle, slug: string, levels: string[] | null): Promise<LevelsOutcome> {
  return inTransaction(handle, async (trx) => {
    const account = await findAccountBySlug(trx, slug);
    if (!account) return { outcome: 'no_account' };
    for (const environment of LOCK_ORDER) await lockHierarchy(trx, handle.dialect, { accountId: account.id, environment });
    if (levels !== null) {
      // Groups already at a level outside the new list would break the rule at their next write.
      const outside = await levelsInUseOutside(trx, account.id, levels);
      if (outside.length > 0) return { outcome: 'in_use', levels: outside };
    }
    await setAccountLevels(trx, account.id, levels);
    return { outcome: 'declared', levels };
  });
}
