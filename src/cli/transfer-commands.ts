// `ugs import`, `ugs export` and `ugs backup` (docs/cli.md, "Import and export", "Backups";
// docs/operations.md, "Backup and restore").
//
// Like the other command groups (cli-parts.ts), each action loads what it calls with
// `await import(…)`: building the program, for `ugs --help` or for another command, loads
// none of the import's, the export's or the backup's modules (the bulk upsert, the CSV
// parser, the SQLite driver, the fields' declaration).
import fs from 'node:fs';
import path from 'node:path';
import { once } from 'node:events';
import { type Command, Option } from 'commander';
import { loadConfig } from '../config.ts';
import type { Keyring } from '../crypto/keyring.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { Environment } from '../db/schema.ts';
import type { ImportFormat } from '../user-groups/transfer/import-file.ts';
import { accountOption, environmentOption, jsonOption, UsageError, withDatabase, withDatabaseKeys } from './cli-parts.ts';

export function registerTransferCommands(program: Command): void {
  registerImportCommand(program);
  registerExportCommand(program);
  registerBackupCommand(program);
}

interface ImportOptions {
  account: string;
  env: Environment;
  format?: ImportFormat;
  dryRun?: boolean;
  errors?: string;
  json?: boolean;
}

function registerImportCommand(program: Command): void {
  program
    .command('import')
    .description(
      "create or update an account's user groups from an NDJSON or CSV file, through the bulk upsert, 1,000 per transaction; running it again changes nothing already there",
    )
    .argument(
      '<file>',
      // The rule by which import-csv.ts reads a cell, rather than the fields it applies to: listing
      // them would load the fields' declaration (and TypeBox) for every command. docs/cli.md lists them.
      'UTF-8 NDJSON (one upsert item per line) or CSV (a header row naming the fields; commas, semicolons or tabs between them; JSON text for a field whose value is an object or a list); a row holds at most 1 MiB',
    )
    .addOption(accountOption())
    .addOption(environmentOption('the environment the groups are in (an item naming the other one fails)').makeOptionMandatory())
    .addOption(new Option('--format <format>', 'the file format (default: from the extension: .ndjson, .jsonl or .csv)').choices(['ndjson', 'csv']))
    .option(
      '--dry-run',
      'check every row with the upsert\'s validator and write nothing (the checks that need the database, such as "the parent exists", are not made)',
    )
    .option('--errors <file>', 'where the failed rows go, one JSON line each (default: <file>.errors.ndjson); rewritten by every run, removed when none failed')
    .addOption(jsonOption('print the summary as JSON'))
    .action(importCommand);
}

async function importCommand(file: string, opts: ImportOptions): Promise<void> {
  if (!fs.existsSync(file) || !fs.statSync(file).isFile()) throw new UsageError(`no file ${file}`);
  const { importFormatOf } = await import('../user-groups/transfer/import-file.ts');
  let format: ImportFormat;
  try {
    format = importFormatOf(file, opts.format);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const errorsFile = opts.errors ?? `${file}.errors.ndjson`;
  if (path.resolve(errorsFile) === path.resolve(file)) throw new UsageError('--errors names the input file');
  const dryRun = !!opts.dryRun;
  const { findTenant } = await import('../user-groups/transfer/transfer.service.ts');
  const { importFile } = await import('./import-batches.ts');
  const work = async (handle: DatabaseHandle, keyring?: Keyring) => {
    const tenant = await findTenant(handle, opts.account, opts.env);
    if (!tenant) throw new UsageError(`no account "${opts.account}"`);
    return importFile(handle, tenant, keyring, { file, format, errorsFile });
  };
  // A dry run writes nothing and needs no key; an import seals the new groups' tokens.
  const { counts, rows } = dryRun ? await withDatabase((handle) => work(handle)) : await withDatabaseKeys(work);
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
}

function registerExportCommand(program: Command): void {
  program
    .command('export')
    .description(
      "write an account's user groups as NDJSON that ugs import takes: every field, never a token; parents before children; one read snapshot, streamed page by page",
    )
    .addOption(accountOption())
    .addOption(environmentOption('the environment to export').makeOptionMandatory())
    .option('--output <file>', 'write to this file (default: standard output)')
    .action(exportCommand);
}

async function exportCommand(opts: { account: string; env: Environment; output?: string }): Promise<void> {
  if (opts.output !== undefined && fs.existsSync(opts.output)) throw new UsageError(`${opts.output} exists: give a new file name`);
  const { exportUserGroupLines, findTenant } = await import('../user-groups/transfer/transfer.service.ts');
  const { cliHeavyOperations } = await import('./cli-parts.ts');
  await withDatabase(async (handle) => {
    const tenant = await findTenant(handle, opts.account, opts.env);
    if (!tenant) throw new UsageError(`no account "${opts.account}"`);
    // The groups' fields are no secret like their tokens, but neither are they public.
    const out = opts.output === undefined ? process.stdout : fs.createWriteStream(opts.output, { flags: 'wx', mode: 0o600 });
    let count = 0;
    for await (const line of exportUserGroupLines(handle, tenant, await cliHeavyOperations(handle))) {
      count++;
      if (!out.write(`${line}\n`)) await once(out, 'drain');
    }
    if (out !== process.stdout) {
      await new Promise<void>((resolve, reject) => (out as fs.WriteStream).end((err?: Error | null) => (err ? reject(err) : resolve())));
      process.stderr.write(`exported ${count} user groups to ${path.resolve(opts.output!)}\n`);
    }
  });
}

function registerBackupCommand(program: Command): void {
  program
    .command('backup')
    .description(
      'SQLite: take an online, consistent copy of the database while the service runs, check it, and say where it is. PostgreSQL: explains pg_dump and base backups, and exits 2',
    )
    .argument('<file>', 'the copy to write (must not exist)')
    .addOption(jsonOption())
    .action(backupCommand);
}

async function backupCommand(target: string, opts: { json?: boolean }): Promise<void> {
  const config = loadConfig();
  const { BackupRefused, backupSqliteDatabase, sqliteFileOf } = await import('../db/backup.ts');
  const source = sqliteFileOf(config.databaseUrl);
  if (source === undefined) throw new UsageError(POSTGRES_BACKUP);
  let copy: { file: string; bytes: number };
  try {
    copy = backupSqliteDatabase(source, target);
  } catch (err) {
    throw err instanceof BackupRefused ? new UsageError(err.message) : err;
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
}

const POSTGRES_BACKUP = [
  'ugs backup copies SQLite databases only; this DATABASE_URL is PostgreSQL, which has its own tools:',
  '  pg_dump --format=custom --file=ugs.dump "$DATABASE_URL"      # a consistent logical copy while the service runs',
  '  pg_basebackup with WAL archiving                              # physical copies and point-in-time recovery',
  'Back up the secret key (UGS_SECRET_KEY or the key file) as well: see docs/operations.md, "Backup and restore".',
].join('\n');
