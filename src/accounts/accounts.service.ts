// Accounts, as the command-line tool manages them (docs/cli.md, "Accounts").
import type { DatabaseHandle } from '../db/database.ts';
import type { AccountRow } from '../db/schema.ts';
import { inTransaction } from '../db/transaction.ts';
import { ensureAccount, findAccountBySlug, listAccounts } from './accounts.repository.ts';

/** Creates the account unless it exists; says which. */
export function createAccount(handle: DatabaseHandle, slug: string, now: Date): Promise<{ account: AccountRow; created: boolean }> {
  return inTransaction(handle, (trx) => ensureAccount(trx, slug, now));
}

/** Every account, oldest first: the operator's view, across tenants. */
export function allAccounts(handle: DatabaseHandle): Promise<AccountRow[]> {
  return listAccounts(handle.db);
}

/** The account of this slug, if there is one. */
export function findAccount(handle: DatabaseHandle, slug: string): Promise<AccountRow | undefined> {
  return findAccountBySlug(handle.db, slug);
}
