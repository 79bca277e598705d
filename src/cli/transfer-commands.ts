// `ugs import`, `ugs export` and `ugs backup` (README, "Import, export and backup";
// docs/operations.md, "Backup and restore").
import fs from 'node:fs';
import path from 'node:path';
import { once } from 'node:events';
import { type Command, Option } from 'commander';
import { loadConfig } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { Environment } from '../db/schema.ts';
import type { Tenant } from '../db/tenant.ts';
import { BackupRefused, backupSqliteDatabase, sqliteFileOf } from '../db/backup.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { getBodyOf } from '../http/validation.ts';
import { UpsertItem } from '../user-groups/user-groups.schemas.ts';
import { OpenedTokenCache } from '../user-groups/opened-tokens.ts';
import type { UserGroupDeps } from '../user-groups/user-groups.service.ts';
import { precheckUpsertItems, upsertUserGroups, type UpsertOutcome } from '../user-groups/upsert.service.ts';
import { exportUserGroupLines, findTenant, IMPORT_BATCH_SIZE, operatorPrincipal } from '../user-groups/transfer.service.ts';
import { importFormatOf, readImportRows, type ImportFormat } from './import-file.ts';
import { csvFieldsOf } from './import-csv.ts';
import { ImportFileError, type ImportRow } from './import-row.ts';
import { ImportProgress } from './import-progress.ts';
import { COMMAND_LINE_ACTOR } from '../audit/actor.ts';

/** What main.ts lends these commands. */
export interface CliParts {
  withDatabase<T>(work: (handle: DatabaseHandle) => Promise<T>): Promise<T>;
  configuredKeyring(): Keyring;
  slug(value: string): string;
  usageError(message: string): Error;
}

/** The bulk upsert's validator, as POST /api/users/upsert checks each item. */
const validateUpsertItem = getBodyOf(UpsertItem);

type Counts = Record<UpsertOutcome['status'], number>;

export function registerTransferCommands(program: Command, parts: CliParts): void {
  const environmentOption = (what: string) => new Option('--env <environment>', what).choices(['Customer', 'Testing']).makeOptionMandatory();

  program
    .command('import')
    .description(
      "create or update an account's user groups from an NDJSON or CSV file, through the bulk upsert, 1,000 per transaction; running it again changes nothing already there",
    )
    .argument(
      '<file>',
      `UTF-8 NDJSON (one upsert item per line) or CSV (a header row naming the fields; commas, semicolons or tabs between them; JSON text in ${csvFieldsOf('json').join(', ')}); a row holds at most 1 MiB`,
    )
    .requiredOption('--account <slug>', 'the account', parts.slug)
    .addOption(environmentOption('the environment the groups are in (an item naming the other one fails)'))
    .addOption(new Option('--format <format>', 'the file format (default: from the extension: .ndjson, .jsonl or .csv)').choices(['ndjson', 'csv']))
    .option(
      '--dry-run',
      'check every row with the upsert\'s validator and write nothing (the checks that need the database, such as "the parent exists", are not made)',
    )
    .option('--errors <file>', 'where the failed rows go, one JSON line each (default: <file>.errors.ndjson); rewritten by every run, removed when none failed')
    .option('--json', 'print the summary as JSON')
    .action(async (file: string, opts: { account: string; env: Environment; format?: ImportFormat; dryRun?: boolean; errors?: string; json?: boolean }) => {
      if (!fs.existsSync(file) || !fs.statSync(file).isFile()) throw parts.usageError(`no file ${file}`);
      let format: ImportFormat;
      try {
        format = importFormatOf(file, opts.format);
      } catch (err) {
        throw parts.usageError((err as Error).message);
      }
      const errorsFile = opts.errors ?? `${file}.errors.ndjson`;
      if (path.resolve(errorsFile) === path.resolve(file)) throw parts.usageError('--errors names the input file');
      const dryRun = !!opts.dryRun;
      const keyring = dryRun ? undefined : parts.configuredKeyring();
      const summary = await parts.withDatabase(async (handle) => {
        const tenant = await findTenant(handle, opts.account, opts.env);
        if (!tenant) throw parts.usageError(`no account "${opts.account}"`);
        return importFile(handle, tenant, keyring, { file, format, errorsFile });
      });
      const { counts, rows } = summary;
      const failed = counts.failed;
      const text = dryRun
        ? `dry run of ${rows} rows: ${failed} would fail, ${rows - failed} passed the checks made without the database; nothing was written`
        : `imported ${rows} rows: ${counts.created} created, ${counts.updated} updated, ${counts.unchanged} unchanged, ${failed} failed`;
      process.stdout.write(
        opts.json
          ? `${JSON.stringify({ rows, ...(dryRun ? { dry_run: true, failed } : counts), errors_file: failed > 0 ? path.resolve(errorsFile) : null })}\n`
          : `${text}${failed > 0 ? `\nfailed rows: ${path.resolve(errorsFile)}` : ''}\n`,
      );
      if (failed > 0) throw new Error(`${failed} of ${rows} rows ${dryRun ? 'would fail' : 'failed'}: see ${path.resolve(errorsFile)}`);
    });

  program
    .command('export')
    .description(
      "write an account's user groups as NDJSON that ugs import takes: every field, never a token; parents before children; one read snapshot, streamed page by page",
    )
    .requiredOption('--account <slug>', 'the account', parts.slug)
    .addOption(environmentOption('the environment to export'))
    .option('--output <file>', 'write to this file (default: standard output)')
    .action(async (opts: { account: string; env: Environment; output?: string }) => {
      if (opts.output !== undefined && fs.existsSync(opts.output)) throw parts.usageError(`${opts.output} exists: give a new file name`);
      await parts.withDatabase(async (handle) => {
        const tenant = await findTenant(handle, opts.account, opts.env);
        if (!tenant) throw parts.usageError(`no account "${opts.account}"`);
        // The groups' fields are no secret like their tokens, but neither are they public.
        const out = opts.output === undefined ? process.stdout : fs.createWriteStream(opts.output, { flags: 'wx', mode: 0o600 });
        let count = 0;
        for await (const line of exportUserGroupLines(handle, tenant)) {
          count++;
          if (!out.write(`${line}\n`)) await once(out, 'drain');
        }
        if (out !== process.stdout) {
          await new Promise<void>((resolve, reject) => (out as fs.WriteStream).end((err?: Error | null) => (err ? reject(err) : resolve())));
          process.stderr.write(`exported ${count} user groups to ${path.resolve(opts.output!)}\n`);
        }
      });
    });

  program
    .command('backup')
    .description(
      'SQLite: take an online, consistent copy of the database while the service runs, check it, and say where it is. PostgreSQL: explains pg_dump and base backups, and exits 2',
    )
    .argument('<file>', 'the copy to write (must not exist)')
    .option('--json', 'print JSON')
    .action((target: string, opts: { json?: boolean }) => {
      const config = loadConfig();
      const source = sqliteFileOf(config.databaseUrl);
      if (source === undefined) throw parts.usageError(POSTGRES_BACKUP);
      let copy: { file: string; bytes: number };
      try {
        copy = backupSqliteDatabase(source, target);
      } catch (err) {
        throw err instanceof BackupRefused ? parts.usageError(err.message) : err;
      }
      const key =
        config.secretKeys.length > 0
          ? { source: 'UGS_SECRET_KEY', text: 'the secret keys in UGS_SECRET_KEY' }
          : { source: path.resolve(config.keyFile), text: `the key file ${path.resolve(config.keyFile)}` };
      const json = { file: copy.file, bytes: copy.bytes, integrity_check: 'ok', key: key.source };
      process.stdout.write(
        opts.json
          ? `${JSON.stringify(json)}\n`
          : [
              `backup written to ${copy.file} (${copy.bytes.toLocaleString('en-US')} bytes; PRAGMA integrity_check: ok)`,
              `It holds everything committed before the backup began. Its user group tokens, embed signing keys and webhook secrets are sealed under ${key.text}:`,
              'without that key the copy cannot open them. Back the key up too, kept apart from the copy.',
            ].join('\n') + '\n',
      );
    });
}

const POSTGRES_BACKUP = [
  'ugs backup copies SQLite databases only; this DATABASE_URL is PostgreSQL, which has its own tools:',
  '  pg_dump --format=custom --file=ugs.dump "$DATABASE_URL"      # a consistent logical copy while the service runs',
  '  pg_basebackup with WAL archiving                              # physical copies and point-in-time recovery',
  'Back up the secret key (UGS_SECRET_KEY or the key file) as well: see docs/operations.md, "Backup and restore".',
].join('\n');

async function importFile(
  handle: DatabaseHandle,
  tenant: Tenant,
  keyring: Keyring | undefined,
  options: { file: string; format: ImportFormat; errorsFile: string },
): Promise<{ rows: number; counts: Counts }> {
  // A dry run writes nothing, so it needs no key; an import seals each created group's token
  // and never opens one (0: nothing remembered).
  const deps: UserGroupDeps | undefined = keyring && {
    database: handle,
    tokens: new OpenedTokenCache(keyring, 0),
    now: () => new Date(),
    events: { userGroupTokenIssued: () => undefined },
    maxHierarchyDepth: loadConfig().maxHierarchyDepth,
  };
  const principal = operatorPrincipal(tenant);
  const counts: Counts = { created: 0, updated: 0, unchanged: 0, failed: 0 };
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
