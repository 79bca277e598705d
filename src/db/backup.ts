// `ugs backup` (docs/operations.md, "Backup and restore"): an online, consistent copy of a
// SQLite database while the service runs and writes. VACUUM INTO reads the database in one
// read transaction, so the copy holds exactly what was committed when it began; in WAL mode
// that read never blocks the service's writes, and unlike the page-by-page backup API it
// never restarts because a write came in meanwhile. The copy is written beside the target,
// checked (PRAGMA integrity_check), and only then given the target's name.
//
// The copy also holds the leases of the instances serving the source (a webhook endpoint being
// delivered to, an open event stream, a request running under an Idempotency-Key). No instance
// serves the copy: a server started on it would wait for each of those leases to lapse (a
// webhook endpoint's for up to its whole length) before taking over. So the copy is written with
// them let go, as after a stop of every instance (docs/operations.md, "Backup and restore").
import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';

export interface SqliteBackup {
  /** The copy, absolute. */
  file: string;
  bytes: number;
}

/** The file of a `sqlite:` DATABASE_URL, or undefined for another database. */
export function sqliteFileOf(databaseUrl: string): string | undefined {
  return databaseUrl.startsWith('sqlite:') ? databaseUrl.slice('sqlite:'.length) : undefined;
}

export class BackupRefused extends Error {}

export function backupSqliteDatabase(source: string, target: string): SqliteBackup {
  const file = path.resolve(target);
  if (!fs.existsSync(source)) throw new BackupRefused(`no database at ${source}`);
  if (fs.existsSync(file)) throw new BackupRefused(`${file} exists: give a new file name (a backup never overwrites)`);
  if (!fs.existsSync(path.dirname(file))) throw new BackupRefused(`no directory ${path.dirname(file)}`);
  const partial = `${file}.partial-${process.pid}`;
  // The copy holds sealed tokens and token hashes: readable by its owner only, like the database.
  fs.closeSync(fs.openSync(partial, 'wx', 0o600));
  try {
    const database = new SQLite(source, { readonly: true, fileMustExist: true });
    try {
      database.pragma('busy_timeout = 5000');
      database.prepare('vacuum into ?').run(partial);
    } finally {
      database.close();
    }
    releaseLeases(partial);
    checkIntegrity(partial);
    fs.renameSync(partial, file);
  } catch (err) {
    fs.rmSync(partial, { force: true });
    throw err;
  }
  return { file, bytes: fs.statSync(file).size };
}

/** Lets go, in the copy, of every lease an instance of the source held (see the top of this file). */
function releaseLeases(file: string): void {
  const copy = new SQLite(file, { fileMustExist: true });
  try {
    copy.transaction(() => {
      copy.prepare('update webhook_endpoints set lease_owner = null, lease_until = null where lease_owner is not null').run();
      copy.prepare('delete from event_streams').run();
      copy.prepare("update idempotency_keys set locked_until = ? where state = 'running'").run(new Date(0).toISOString());
    })();
  } finally {
    copy.close();
  }
}

/** PRAGMA integrity_check on a copy: throws with SQLite's findings unless it answers "ok". */
function checkIntegrity(file: string): void {
  const copy = new SQLite(file, { readonly: true, fileMustExist: true });
  try {
    const findings = copy.pragma('integrity_check', { simple: false }) as { integrity_check: string }[];
    const problems = findings.map((row) => row.integrity_check).filter((line) => line !== 'ok');
    if (problems.length > 0) throw new Error(`the copy failed PRAGMA integrity_check: ${problems.slice(0, 5).join('; ')}`);
  } finally {
    copy.close();
  }
}
