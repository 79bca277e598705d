// What the server and the command-line tool both need before they can work: the database
// (migrated) and the keys. Waits a bounded time for a database that is still starting.
import type { Config } from '../config.ts';
import { openDatabase, type DatabaseHandle, type DatabaseOptions } from '../db/database.ts';
import { isDatabaseUnavailable } from '../db/errors.ts';
import { migrateToLatest, type MigrationOptions, type MigrationOutcome } from '../db/migrate.ts';

export async function openMigratedDatabase(
  config: Pick<Config, 'databaseUrl'> & Partial<Pick<Config, 'dbPoolSize' | 'pgbouncerTransactionMode'>>,
  options: DatabaseOptions & { waitMs?: number; onWait?: (err: unknown) => void; migration?: MigrationOptions } = {},
): Promise<{ handle: DatabaseHandle; migrations: MigrationOutcome }> {
  const handle = openDatabase(config.databaseUrl, { poolSize: config.dbPoolSize, pgbouncerTransactionMode: config.pgbouncerTransactionMode, ...options });
  const deadline = Date.now() + (options.waitMs ?? 0);
  for (;;) {
    try {
      return { handle, migrations: await migrateToLatest(handle, options.migration) };
    } catch (err) {
      if (!isDatabaseUnavailable(err) || Date.now() > deadline) {
        await handle.close().catch(() => undefined);
        throw err;
      }
      options.onWait?.(err);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}
