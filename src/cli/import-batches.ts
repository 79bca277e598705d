// The work of `ugs import` (transfer-commands.ts): the file's rows, a batch at a time, through
// the bulk upsert (or, for a dry run, its checks made without the database), each failed row
// written to the errors file, and the progress on a terminal.
import fs from 'node:fs';
import { loadConfig } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { Tenant } from '../db/tenant.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { getBodyOf } from '../http/validation.ts';
import { UpsertItem } from '../user-groups/user-groups.schemas.ts';
import { OpenedTokenCache } from '../user-groups/opened-tokens.ts';
import type { UserGroupDeps } from '../user-groups/user-groups.service.ts';
import { precheckUpsertItems, upsertUserGroups, type UpsertOutcome } from '../user-groups/upsert.service.ts';
import { IMPORT_BATCH_SIZE, operatorPrincipal } from '../user-groups/transfer/transfer.service.ts';
import { readImportRows, type ImportFormat } from '../user-groups/transfer/import-file.ts';
import { ImportFileError, type ImportRow } from '../user-groups/transfer/import-row.ts';
import { ImportProgress } from './import-progress.ts';
import { COMMAND_LINE_ACTOR } from '../audit/actor.ts';
import { cliHeavyOperations } from './cli-parts.ts';

/** The bulk upsert's validator, as POST /api/users/upsert checks each item. */
const validateUpsertItem = getBodyOf(UpsertItem);

/** How many rows went each way. */
export type ImportCounts = Record<UpsertOutcome['status'], number>;

/**
 * Imports `file` into the tenant; without a keyring, a dry run (it writes nothing, so it needs
 * no key). Answers how many rows were read and what became of them.
 */
export async function importFile(
  handle: DatabaseHandle,
  tenant: Tenant,
  keyring: Keyring | undefined,
  options: { file: string; format: ImportFormat; errorsFile: string },
): Promise<{ rows: number; counts: ImportCounts }> {
  // A dry run writes nothing, so it needs no key; an import seals each created group's token
  // and never opens one (0: nothing remembered).
  const deps: UserGroupDeps | undefined = keyring && {
    database: handle,
    tokens: new OpenedTokenCache(keyring, 0),
    now: () => new Date(),
    events: { userGroupTokenIssued: () => undefined },
    maxHierarchyDepth: loadConfig().maxHierarchyDepth,
    maxTagsPerEnvironment: loadConfig().maxTagsPerEnvironment,
    heavyOperations: await cliHeavyOperations(handle),
  };
  const principal = operatorPrincipal(tenant);
  const counts: ImportCounts = { created: 0, updated: 0, unchanged: 0, failed: 0 };
  let rowsRead = 0;
  fs.rmSync(options.errorsFile, { force: true });
  let errors: number | undefined;
  const fail = (row: ImportRow, error: { code: string; message: string }) => {
    counts.failed++;
    // The service speaks of the caller's API token; here the caller is --env.
    if (error.code === 'environment_forbidden')
      error = { ...error, message: `the import is into ${tenant.environment} (--env); this item names another environment` };
    errors ??= fs.openSync(options.errorsFile, 'w', 0o600);
    fs.writeSync(errors, `${JSON.stringify({ row: row.row, item: row.item, error })}\n`);
  };
  const { stream, rows } = readImportRows(options.file, options.format);
  const progress = new ImportProgress(fs.statSync(options.file).size, !deps);
  let batch: ImportRow[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const items = batch.map((row) => row.item);
    const outcomes = deps
      ? await upsertUserGroups(deps, principal, COMMAND_LINE_ACTOR, items, validateUpsertItem)
      : precheckUpsertItems(principal, items, validateUpsertItem);
    for (const [index, outcome] of outcomes.entries()) {
      if (outcome?.status === 'failed') fail(batch[index], outcome.error!);
      else if (outcome) counts[outcome.status]++;
    }
    batch = [];
  };
  try {
    for await (const row of rows) {
      rowsRead++;
      if (row.failure) fail(row, row.failure);
      else batch.push(row);
      if (batch.length >= IMPORT_BATCH_SIZE) {
        await flush();
        progress.update(rowsRead, stream.bytesRead, counts);
      }
    }
    await flush();
    progress.done(rowsRead, counts);
  } catch (err) {
    if (err instanceof ImportFileError && rowsRead > 0 && deps) {
      // What the message says: every row before the one that cannot be read is in.
      await flush();
      progress.done(rowsRead, counts);
      throw new Error(`${err.message} (the rows before it were imported: fix the file and run the import again)`);
    }
    progress.done(rowsRead, counts);
    throw err;
  } finally {
    if (errors !== undefined) fs.closeSync(errors);
  }
  return { rows: rowsRead, counts };
}
