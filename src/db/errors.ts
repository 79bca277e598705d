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
  // read_only_sql_transaction: a write reached a node that cannot take writes now (a hot
  // standby, a primary restarting in recovery or being demoted, a database set to
  // default_transaction_read_only). A failover passes; the connection leaves the pool
  // (leavesPool, postgres-pool.ts).
  '25006',
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

/**
 * The breaker of the PostgreSQL pool is open (postgres-pool.ts): a connection to the primary
 * failed as unreachable a moment ago, and requests answer 503 at once until the probe reaches
 * it again (docs/operations.md, "When the primary cannot be reached").
 */
export class PrimaryUnreachable extends Error {
  constructor() {
    super('the primary database was found unreachable; waiting for the probe to reach it again');
    this.name = 'PrimaryUnreachable';
  }
}

/** A write met a node that cannot take writes now (25006: hot standby, recovery, default_transaction_read_only). */
export function isReadOnlyNode(err: unknown): boolean {
  return (err as DriverError)?.code === '25006';
}

/**
 * A new connection failed because the server cannot be reached or does not accept connections
 * now (refused, no route, no answer within the connect timeout, closed by a proxy with no
 * server behind it, starting up, shutting down or in recovery): what opens the pool's breaker.
 * Not a pool that is full (a wait for one of its connections), too many connections, refused
 * credentials or a missing database: those servers answer.
 */
export function isUnreachable(err: unknown): boolean {
  const e = err as DriverError;
  if (!e || typeof e !== 'object') return false;
  if (typeof e.code === 'string' && (UNREACHABLE_CODES.has(e.code) || e.code.startsWith('08'))) return true;
  const message = e.message ?? '';
  return /^timeout expired$/i.test(message) || /Connection terminated/i.test(message) || /connect ECONNREFUSED/i.test(message);
}

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
]);

/**
 * The connection that got this error must not serve another request (postgres-pool.ts): its
 * node cannot take writes (a session of a standby, or one made read-only, stays so), or the
 * server is shutting it down.
 */
export function leavesPool(err: unknown): boolean {
  const code = (err as DriverError)?.code;
  return typeof code === 'string' && (code === '25006' || code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03');
}

/** The database cannot be reached or is overloaded: the caller should come back later (503 unavailable). */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as DriverError;
  if (!e || typeof e !== 'object') return false;
  if (err instanceof PrimaryUnreachable) return true;
  if (e.code && UNAVAILABLE_CODES.has(e.code)) return true;
  // Class 08, connection exception; class 53, insufficient resources (too many connections, out
  // of memory or of lock table slots), but for disk_full, which storageFault reports.
  if (typeof e.code === 'string' && (e.code.startsWith('08') || (e.code.startsWith('53') && e.code !== '53100'))) return true;
  const message = e.message ?? '';
  // node-postgres reports pool and connection timeouts and dropped sockets only by message.
  return (
    /timeout exceeded when trying to connect/i.test(message) ||
    /^timeout expired$/i.test(message) || // a new connection's own connect timeout (postgres-pool.ts)
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
