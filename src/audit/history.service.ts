// The history the command-line tool prints (`ugs audit`): an account's, or one user group's.
import type { DatabaseHandle } from '../db/database.ts';
import type { AuditLogRow, Environment } from '../db/schema.ts';
import { findAccountBySlug } from '../accounts/accounts.repository.ts';
import { accountHistory, userGroupHistory } from './audit.repository.ts';

/** Newest first; undefined when there is no such account. */
export async function historyOfAccount(
  handle: DatabaseHandle,
  query: { accountSlug: string; userGroup?: { environment: Environment; providedId: string }; limit: number },
): Promise<AuditLogRow[] | undefined> {
  const account = await findAccountBySlug(handle.db, query.accountSlug);
  if (!account) return undefined;
  return query.userGroup === undefined
    ? accountHistory(handle.db, account.id, query.limit)
    : userGroupHistory(handle.db, { accountId: account.id, ...query.userGroup }, query.limit);
}
