// SQLite lets one connection write at a time, also across processes sharing the file
// (docs/deployment.md, "PostgreSQL and several instances", allows several). better-sqlite3
// runs synchronously, so its busy timeout would wait for another process's write lock on the
// event loop and freeze every request of this one
// (/healthz waited for as long as another process held BEGIN IMMEDIATE). So connections
// here have no busy timeout, and a write that finds the lock taken waits here instead:
// asynchronously, with backoff, up to a bound, after which it fails with SQLITE_BUSY, which
// the API answers 503 unavailable with Retry-After (docs/api.md, "Errors").

/** How long a write waits for another process's write lock before giving up (503). */
export const SQLITE_LOCK_WAIT_MS = 5000;

const MAX_BACKOFF_MS = 100;

function isSqliteBusy(err: unknown): boolean {
  return String((err as { code?: unknown })?.code).startsWith('SQLITE_BUSY');
}

/** Runs `attempt` again while it fails with SQLITE_BUSY, until `waitMs` have passed (then throws that error). */
export async function retryWhileLocked<T>(attempt: () => Promise<T>, waitMs: number): Promise<T> {
  const deadline = Date.now() + waitMs;
  for (let tries = 0; ; tries++) {
    try {
      return await attempt();
    } catch (err) {
      if (!isSqliteBusy(err) || Date.now() >= deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, backoffMs(tries, deadline)));
    }
  }
}

/**
 * The same wait, blocking: only for opening the database, before anything is served (the
 * open is synchronous, and its callers, the server and the command-line tool, have nothing
 * else to do meanwhile).
 */
export function retryWhileLockedSync<T>(attempt: () => T, waitMs: number): T {
  const deadline = Date.now() + waitMs;
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  for (let tries = 0; ; tries++) {
    try {
      return attempt();
    } catch (err) {
      if (!isSqliteBusy(err) || Date.now() >= deadline) throw err;
      Atomics.wait(sleeper, 0, 0, backoffMs(tries, deadline));
    }
  }
}

/** 1, 2, 4 … 100 ms, jittered so that waiting requests do not retry in step, and never past the deadline. */
export function backoffMs(tries: number, deadline: number): number {
  const backoff = Math.min(MAX_BACKOFF_MS, 2 ** tries) * (0.5 + Math.random());
  return Math.min(backoff, Math.max(0, deadline - Date.now()));
}
