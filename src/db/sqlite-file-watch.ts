// The SQLite files at DATABASE_URL's path must stay the ones this process opened. A connection
// keeps working on a file that was deleted (`rm -r data/`) or replaced (a copy moved over it)
// while the service runs: commits succeed, into a file nobody will ever open again, and the
// next start finds an empty database (and prints a new first-start token). So the path is
// compared with what was opened, by device and inode: before a write begins and just before it
// commits (guardedWrite in database.ts: a write is refused, and rolled back, rather than
// committed into a file that is no longer at its path; once committed it is acknowledged), on
// every /readyz, and every second, to log the moment it happens (docs/operations.md, "The
// database file was deleted or replaced").
import fs from 'node:fs';
import path from 'node:path';

/** What the path held when the service opened it: its device and inode, as one text. */
type Identity = string;

const PART_NAMES = { '': 'database file', '-wal': 'write-ahead log (-wal)', '-shm': 'shared-memory file (-shm)' } as const;
type Part = keyof typeof PART_NAMES;
const PARTS = Object.keys(PART_NAMES) as Part[];

/** Where the process still holds the opened files: a way back to what it wrote (Linux only). */
export interface OpenCopies {
  database?: string;
  wal?: string;
}

export interface FileProblem {
  /** One sentence for the log: which file, and what became of it. */
  what: string;
  openCopies: OpenCopies;
}

export interface SqliteFileWatch {
  /** Null while the files at the path are the ones opened; else what happened. Stats the path (cheap; no cache). */
  problem(): FileProblem | null;
  /** Throws DatabaseFileGone when problem() is not null. */
  assertIntact(): void;
  close(): void;
}

/** Writes refused because the database file at the path is no longer the one this process writes. */
export class DatabaseFileGone extends Error {
  readonly code = 'UGS_DATABASE_FILE_GONE';
}

function identityOf(file: string): Identity | null {
  const stat = fs.statSync(file, { bigint: true, throwIfNoEntry: false });
  return stat ? `${stat.dev}:${stat.ino}` : null;
}

/**
 * Watches `file`, opened just before this is called. The -wal and -shm files appear with the
 * first statement: each is remembered when first seen, and SQLite never deletes them while a
 * connection (this process holds two) is open. `onChange` is called, from a timer every
 * `intervalMs`, when the problem starts and when it ends (the files put back where they were).
 */
export function watchSqliteFile(file: string, options: { intervalMs?: number; onChange?: (problem: FileProblem | null) => void } = {}): SqliteFileWatch {
  const absolute = path.resolve(file);
  const opened = new Map<Part, Identity>();
  const main = identityOf(absolute);
  if (main === null) throw new Error(`the database file ${absolute} vanished while it was being opened`);
  opened.set('', main);

  const check = (): FileProblem | null => {
    for (const part of PARTS) {
      const now = identityOf(absolute + part);
      const was = opened.get(part);
      if (was === undefined) {
        if (now !== null) opened.set(part, now);
        continue;
      }
      if (now === was) continue;
      const happened = now === null ? 'was deleted' : 'was replaced by another file';
      return {
        what: `the SQLite ${PART_NAMES[part]} ${absolute + part} ${happened} while the service ran`,
        openCopies: openCopies(opened),
      };
    }
    return null;
  };

  let last: FileProblem | null = null;
  const timer =
    options.onChange &&
    setInterval(() => {
      const now = check();
      if ((now === null) !== (last === null)) options.onChange?.(now);
      last = now;
    }, options.intervalMs ?? 1000);
  timer?.unref();

  return {
    problem: check,
    assertIntact() {
      const problem = check();
      if (problem) throw new DatabaseFileGone(problem.what);
    },
    close: () => clearInterval(timer),
  };
}

/** The /proc paths of this process's descriptors of the opened database file and -wal, found by inode. */
function openCopies(opened: Map<Part, Identity>): OpenCopies {
  const copies: OpenCopies = {};
  let descriptors: string[];
  try {
    descriptors = fs.readdirSync('/proc/self/fd');
  } catch {
    return copies; // not Linux
  }
  for (const fd of descriptors) {
    let identity: Identity;
    try {
      const stat = fs.fstatSync(Number(fd), { bigint: true });
      identity = `${stat.dev}:${stat.ino}`;
    } catch {
      continue; // closed meanwhile (readdir's own descriptor, say)
    }
    const where = `/proc/${process.pid}/fd/${fd}`;
    if (identity === opened.get('')) copies.database ??= where;
    else if (identity === opened.get('-wal')) copies.wal ??= where;
  }
  return copies;
}
