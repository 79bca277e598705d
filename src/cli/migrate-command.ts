// `ugs migrate`: the migrations the server also applies on start (the legacy ones and the
// expand changes); `ugs migrate --contract` also the contract changes, once no live instance
// runs code that still needs what they remove (docs/operations.md, "Upgrades, migrations and
// rollback"). `ugs instances`: the instances serving this database, from their heartbeats.
import type { Command } from 'commander';
import { loadConfig } from '../config.ts';
import { jsonOption, print, withDatabase } from './cli-parts.ts';

export function registerMigrateCommand(program: Command): void {
  program
    .command('migrate')
    .description('apply database migrations (the server also does this on start)')
    .option('--contract', 'also the contract changes: only once every instance runs this release (refused while an older one is alive)')
    .action(async (options: { contract?: boolean }) => {
      const { openMigratedDatabase } = await import('../process/runtime.ts');
      const { refuseContractWhileOlderAlive } = await import('../process/instance-registry.ts');
      const { handle, migrations } = await openMigratedDatabase(loadConfig(), {
        migration: options.contract ? { contract: true, beforeContract: refuseContractWhileOlderAlive } : {},
      });
      await handle.close();
      console.log(migrations.applied.length ? `applied: ${migrations.applied.join(', ')}` : 'database is up to date');
    });

  program
    .command('instances')
    .description('list the instances serving this database (those whose heartbeat is under a minute old)')
    .addOption(jsonOption())
    .action(async (options: { json?: boolean }) => {
      const { liveInstances } = await import('../process/instance-registry.ts');
      const rows = await withDatabase((handle) => liveInstances(handle.db));
      const text = rows.length
        ? rows
            .map((row) => `${row.host}:${row.pid}  ${row.version}  schema ${row.schema}  since ${row.started_at}  seen ${row.seen_at}  ${row.settings}`)
            .join('\n')
        : 'no instance has sent a heartbeat in the last minute (releases before 0.2.0 send none)';
      print(options, { instances: rows.map((row) => ({ ...row, settings: JSON.parse(row.settings) })) }, text);
    });
}
