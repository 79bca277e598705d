// `ugs import` and `ugs export` (docs/cli.md, "Import and export"): an account's groups in and out
// as NDJSON, through the operations the API has. An import is the bulk upsert
// (upsertUserGroups) a batch at a time, acting for the operator in one account and
// environment; an export writes each group's own fields, parents before children, from one
// read snapshot, page by page.
import type { DatabaseHandle } from '../../db/database.ts';
import type { Environment } from '../../db/schema.ts';
import type { Tenant } from '../../db/tenant.ts';
import { findAccountBySlug } from '../../accounts/accounts.repository.ts';
import type { Principal } from '../../auth/principal.ts';
import type { HeavyOperations } from '../../accounts/heavy-operations.ts';
import { exportPage, type ExportRow } from './transfer.repository.ts';
import { MAX_CHAIN_DEPTH } from '../group-sql.ts';
import { groupWriter } from '../user-groups.json.ts';
import { UpsertItem } from '../user-groups.schemas.ts';

/** Groups per upsert transaction, as POST /api/users/upsert takes at most. */
export const IMPORT_BATCH_SIZE = 1000;
const EXPORT_PAGE_SIZE = 1000;

/** The account's tenant in `environment`, or undefined when there is no such account. */
export async function findTenant(handle: DatabaseHandle, slug: string, environment: Environment): Promise<Tenant | undefined> {
  const account = await findAccountBySlug(handle.db, slug);
  return account && { accountId: Number(account.id), environment };
}

/**
 * The operator at the command line, acting in one account and environment with the write
 * scope: what the services need of a caller. It has no API token (tokenId 0 names none; the
 * history records the command-line tool's actor, whose tokenId is null).
 */
export function operatorPrincipal(tenant: Tenant): Principal {
  return {
    tokenId: 0,
    tokenHash: '',
    accountId: tenant.accountId,
    scopes: new Set(['read', 'write']),
    allowedEnvironment: tenant.environment,
    defaultEnvironment: tenant.environment,
    expiresAt: null,
  };
}

/**
 * A group as one NDJSON line that `ugs import` takes back: its user_group_id and every field a
 * request may set (UpsertItem: the declaration's request fields), each written as answers
 * write it (user-groups.json.ts), never its token.
 */
const importableLine = groupWriter(UpsertItem);
const exportLine = (row: ExportRow) => importableLine({ row, parentProvidedId: row.parent_provided_id });

/**
 * The tenant's groups as NDJSON lines: the roots, then the groups one level down, and so on,
 * each level in team_id order, a page at a time. One read transaction (repeatable read on
 * PostgreSQL) makes it a snapshot: the groups as they were when the export began, whatever
 * is written meanwhile.
 */
export async function* exportUserGroupLines(handle: DatabaseHandle, tenant: Tenant, heavyOperations: HeavyOperations): AsyncGenerator<string> {
  // One of the account's heavy operations while it reads (docs/api.md, "Heavy operations").
  const slot = await heavyOperations.acquire(tenant.accountId, 'export');
  try {
    yield* snapshotLines(handle, tenant);
  } finally {
    await heavyOperations.release(slot);
  }
}

async function* snapshotLines(handle: DatabaseHandle, tenant: Tenant): AsyncGenerator<string> {
  const begin = handle.db.startTransaction();
  const trx = await (handle.dialect === 'postgres' ? begin.setIsolationLevel('repeatable read').setAccessMode('read only') : begin).execute();
  try {
    for (let depth = 0; depth <= MAX_CHAIN_DEPTH; depth++) {
      let found = false;
      for (let after = 0; ; ) {
        const rows = await exportPage(trx, tenant, depth, after, EXPORT_PAGE_SIZE);
        for (const row of rows) yield exportLine(row);
        found ||= rows.length > 0;
        if (rows.length < EXPORT_PAGE_SIZE) break;
        after = Number(rows[rows.length - 1].team_id);
      }
      // No group at this depth: none deeper either.
      if (!found) break;
    }
  } finally {
    await trx.rollback().execute();
  }
}
