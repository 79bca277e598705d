// The one place that opens write transactions. SQLite takes the write lock up front
// (BEGIN IMMEDIATE), so two processes never both read and then both try to upgrade; when
// another process holds it, the transaction waits without blocking the event loop
// (sqlite-lock.ts). PostgreSQL transactions that lose a serialization race or a deadlock
// are run again whole.
import { AsyncLocalStorage } from 'node:async_hooks';
import { sql } from './kysely.ts';
import type { Kysely } from 'kysely';
import type { DatabaseHandle } from './database.ts';
import { askingCommitPositions } from './commit-position.ts';
import { isRetryableTransactionError } from './errors.ts';
import type { Database } from './schema.ts';
import { SQLITE_LOCK_WAIT_MS, retryWhileLocked } from './sqlite-lock.ts';

const MAX_ATTEMPTS = 5;
/** SQLite: how long a BEGIN that finds another process's write lock tries again in its place in this process's line. */
const BEGIN_IN_PLACE_MS = 250;

/** The accounts whose history the running transaction wrote (noteWrittenAccount). */
const writtenAccounts = new AsyncLocalStorage<Set<number>>();

/**
 * Says that the running write transaction changes an account's rows (the history does, for
 * every change: audit.repository.ts), so that its write position is recorded after the commit
 * (DatabaseHandle.afterWrite; docs/api.md, "Reads from replicas"). Outside inTransaction, nothing.
 */
export function noteWrittenAccount(accountId: number): void {
  writtenAccounts.getStore()?.add(accountId);
}

export async function inTransaction<T>(handle: DatabaseHandle, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  if (!handle.afterWrite) {
    const result = await runTransaction(handle, work);
    for (const listener of handle.onCommit) listener();
    return result;
  }
  const { positionAfterCommit, record } = handle.afterWrite;
  // Accounts noted by an attempt that was retried stay noted: a position recorded too many is harmless.
  const accounts = new Set<number>();
  // The position is read with the commit, in the same query (commit-position.ts): no second
  // round trip, in which a primary that dies leaves it unknown.
  const { result, position } = await handle.db.connection().execute(async (conn) => {
    const { result, positions } = await askingCommitPositions(() => writtenAccounts.run(accounts, () => postgresTransaction(conn, work)));
    return { result, position: accounts.size > 0 ? await positionAfterCommit(conn, positions) : 0n };
  });
  for (const listener of handle.onCommit) listener();
  // Before the answer: a read sent as soon as the answer arrives must find the position.
  if (accounts.size > 0) await record(accounts, position);
  return result;
}

/**
 * One write statement on its own, outside any transaction (a lease taken, renewed or given
 * back): on SQLite it waits for another process's write lock as a transaction does, instead of
 * failing at once with SQLITE_BUSY (connections have no busy timeout: sqlite-lock.ts).
 * PostgreSQL waits for row locks by itself.
 */
export function singleWrite<T>(handle: Pick<DatabaseHandle, 'dialect' | 'lockWaitMs'>, statement: () => Promise<T>): Promise<T> {
  return handle.dialect === 'sqlite' ? retryWhileLocked(statement, handle.lockWaitMs ?? SQLITE_LOCK_WAIT_MS) : statement();
}

async function runTransaction<T>(handle: DatabaseHandle, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  if (handle.dialect === 'sqlite') return retryWhileLocked(() => sqliteTransaction(handle, work), handle.lockWaitMs ?? SQLITE_LOCK_WAIT_MS);
  return postgresTransaction(handle.db, work);
}

/** `db`: the pool, or one connection of it (inTransaction, with a replica). */
async function postgresTransaction<T>(db: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute(work);
    } catch (err) {
      if (attempt >= MAX_ATTEMPTS || !isRetryableTransactionError(err)) throw err;
      await new Promise((resolve) => setTimeout(resolve, 5 * attempt + Math.random() * 10));
    }
  }
}

function sqliteTransaction<T>(handle: DatabaseHandle, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  // better-sqlite3 gives Kysely one connection guarded by a mutex: holding it keeps every
  // other query of this process out until the transaction ends. A BEGIN that finds the lock
  // taken by another process tries again for a moment while it keeps the mutex: most such
  // locks are held for a few milliseconds, and a write that let go of the mutex at once went
  // back to the end of this process's line, behind every write queued meanwhile (under one
  // account's bulk work, for seconds). Past that moment it fails and releases the mutex, so
  // this process goes on serving while the other holds the lock longer.
  return handle.db.connection().execute(async (conn) => {
    await retryWhileLocked(() => sql`begin immediate`.execute(conn), BEGIN_IN_PLACE_MS);
    try {
      const result = await work(conn);
      await sql`commit`.execute(conn);
      return result;
    } catch (err) {
      await sql`rollback`.execute(conn).catch(() => undefined);
      throw err;
    }
  });
}
