// The line for SQLite's one write connection in a process: bulk work waits while anything else
// is waiting.
//
// Every statement of a process that is not a hot read goes through one connection
// (database.ts), taken whole by a transaction until it ends. Kysely's driver hands it to its
// waiters in the order they came, so a single write of one account (a create, a webhook
// delivery's lease or record) waited behind every part of another account's bulk upserts and
// tag renames queued before it, and a webhook delivery needs the connection a dozen times
// (docs/performance.md, "Why the code is the way it is"). Here the work of a heavy operation (accounts/heavy-operations.ts) takes
// the connection only when nothing else waits for it: another write waits at most for the part
// that holds it. A bulk call still goes on: its parts run whenever the connection is free, and
// between the other writes, which are short.
//
// The order within each class is the order of arrival, as before. Only this process's line:
// between processes sharing the file, SQLite's lock decides (sqlite-lock.ts).
import { AsyncLocalStorage } from 'node:async_hooks';
import type { DatabaseConnection, Driver } from 'kysely';
import { SqliteDialect } from './kysely.ts';

const bulkWork = new AsyncLocalStorage<true>();

/** Runs `work` as bulk work: on SQLite, each of its statements and transactions waits for the connection behind every other waiter. */
export function asBulkWork<T>(work: () => Promise<T>): Promise<T> {
  return bulkWork.run(true, work);
}

/** Who waits for the connection: everything else first, then bulk work, each in the order it came. */
class WriteLine {
  private held = false;
  private readonly others: (() => void)[] = [];
  private readonly bulk: (() => void)[] = [];

  take(): Promise<void> | undefined {
    if (!this.held) {
      this.held = true;
      return undefined;
    }
    return new Promise<void>((resolve) => (bulkWork.getStore() ? this.bulk : this.others).push(resolve));
  }

  /** Hands the connection to the next waiter (it stays held), or frees it. */
  give(): void {
    const next = this.others.shift() ?? this.bulk.shift();
    if (next) next();
    else this.held = false;
  }
}

/** Kysely's SQLite dialect, with the connection taken through a WriteLine. */
export class SqliteDialectWithWriteLine extends SqliteDialect {
  override createDriver(): Driver {
    const driver = super.createDriver();
    const line = new WriteLine();
    // The driver's own mutex stays, and is always free when the line hands the connection on.
    const acquire = driver.acquireConnection.bind(driver);
    const release = driver.releaseConnection.bind(driver);
    driver.acquireConnection = async (): Promise<DatabaseConnection> => {
      await line.take();
      try {
        return await acquire();
      } catch (err) {
        line.give();
        throw err;
      }
    };
    driver.releaseConnection = async (connection: DatabaseConnection): Promise<void> => {
      try {
        await release(connection);
      } finally {
        line.give();
      }
    };
    return driver;
  }
}
