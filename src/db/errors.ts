// Classifies driver errors by what they mean for a caller, without leaking driver text.

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
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '57014', // query_canceled (statement timeout)
  '53300', // too_many_connections
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
  'SQLITE_BUSY',
]);

/** The database cannot be reached or is overloaded: the caller should come back later (503). */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as DriverError;
  if (!e || typeof e !== 'object') return false;
  if (e.code && UNAVAILABLE_CODES.has(e.code)) return true;
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
 * The database's storage refused a write: the disk is full or failing (SQLite's SQLITE_FULL and
 * SQLITE_IOERR family; PostgreSQL's disk_full 53100 and io_error 58030). Reads may still work,
 * and writes work again once there is room, without a restart.
 */
export function isStorageFault(err: unknown): boolean {
  const code = (err as DriverError)?.code;
  return typeof code === 'string' && (code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR') || code === '53100' || code === '58030');
}

/** A unique constraint refused the write (PostgreSQL 23505; SQLite's UNIQUE and PRIMARY KEY constraints). */

export function isUniqueViolation(err: unknown): boolean {
  const code = (err as DriverError)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}
