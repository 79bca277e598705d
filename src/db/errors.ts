// Classifies driver errors by what they mean for a caller, without leaking driver text.
import { DatabaseFileGone } from './sqlite-file-watch.ts';

interface DriverError {
  code?: string;
  errno?: string | number;
  message?: string;
}

/** PostgreSQL serialization failure or deadlock: retry the whole transaction. (SQLite: sqlite-lock.ts.) */
export function isRetryableTransactionError(err: unknown): boolean {
  const code = (err as DriverError)?.code;
  return code === '40001' || code === '40P01';
}

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EPIPE',
  '57P01', // admin_shutdown (also what a connection gets when its database is dropped under it)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down, in recovery)
  '57P05', // idle_session_timeout
  '57014', // query_canceled (statement timeout)
  '25P03', // idle_in_transaction_session_timeout
  '55P03', // lock_not_available (lock timeout)
  // A serialization failure or deadlock that the transaction's own retries did not get past
  // (transaction.ts): contention, which passes.
  '40001',
  '40P01',
  'SQLITE_BUSY',
]);

/**
 * A wait for a lock that other transactions held ran out (PostgreSQL's lock_timeout, 55P03,
 * set below half the statement timeout: database.ts): contention on the caller's own rows, not an
 * outage, answered 429 lock_timeout (docs/api.md, "Errors"). Background loops count it with
 * isDatabaseUnavailable's codes, as a failure that passes.
 */
export function isLockTimeout(err: unknown): boolean {
  return (err as DriverError)?.code === '55P03';
}

/** The database cannot be reached or is overloaded: the caller should come back later (503 unavailable). */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as DriverError;
  if (!e || typeof e !== 'object') return false;
  if (e.code && UNAVAILABLE_CODES.has(e.code)) return true;
  // Class 08, connection exception; class 53, insufficient resources (too many connections, out
  // of memory or of lock table slots), but for disk_full, which storageFault reports.
  if (typeof e.code === 'string' && (e.code.startsWith('08') || (e.code.startsWith('53') && e.code !== '53100'))) return true;
  const message = e.message ?? '';
  // node-postgres reports pool and connection timeouts and dropped sockets only by message.
  return (
    /timeout exceeded when trying to connect/i.test(message) ||
    /Connection terminated/i.test(message) ||
    /Query read timeout/i.test(message) ||
    /Client has encountered a connection error/i.test(message) ||
    /connect ECONNREFUSED/i.test(message)
  );
}

/**
 * Why the service's data is out of reach until someone acts on the database, or undefined:
 * - `full_or_failing`: its storage refused a write, the disk is full or failing (SQLite's
 *   SQLITE_FULL and SQLITE_IOERR family; PostgreSQL's disk_full 53100 and class 58, system
 *   and I/O errors). Reads may still work, and writes work again once there is room.
 * - `missing`: the database or the service's tables are gone (3D000 invalid_catalog_name on
 *   connecting to a dropped database; 57P04 database_dropped; 3F000 and 42P01, the schema or a
 *   table no longer exists, as in a database created again empty; SQLite's "no such table", as
 *   in a file replaced by an empty one). A migrated database never lacks a table the code
 *   names, so these mean the data went away, not a bug.
 * - `refused`: the server no longer accepts the service's credentials (class 28: a password
 *   changed or a role dropped after the start).
 * - `file_gone`: SQLite's database file (or its -wal or -shm) was deleted or replaced while the
 *   service ran (sqlite-file-watch.ts): writes are refused until the files are put back.
 * None passes by itself in seconds, unlike isDatabaseUnavailable's; every one passes without a
 * restart once the database is restored or room is made.
 */
export type StorageFault = 'full_or_failing' | 'missing' | 'refused' | 'file_gone';

export function storageFault(err: unknown): StorageFault | undefined {
  if (err instanceof DatabaseFileGone) return 'file_gone';
  const code = (err as DriverError)?.code;
  if (typeof code !== 'string') return undefined;
  if (code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR') || code === '53100' || code.startsWith('58')) return 'full_or_failing';
  if (code === '3D000' || code === '57P04' || code === '3F000' || code === '42P01') return 'missing';
  if (code === 'SQLITE_ERROR' && /^no such table/.test((err as DriverError).message ?? '')) return 'missing';
  if (code.startsWith('28')) return 'refused';
  return undefined;
}

/** A unique constraint refused the write (PostgreSQL 23505; SQLite's UNIQUE and PRIMARY KEY constraints). */

export function isUniqueViolation(err: unknown): boolean {
  const code = (err as DriverError)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}
