// `ugs migrate`: the migrations the server also applies on start (docs/operations.md).
import type { Command } from 'commander';
import { loadConfig } from '../config.ts';

export function registerMigrateCommand(program: Command): void {
  program
    .command('migrate')
    .description('apply database migrations (the server also does this on start)')
    .action(async () => {
      const { openMigratedDatabase } = await import('../process/runtime.ts');
      const { handle, migrations } = await openMigratedDatabase(loadConfig());
      await handle.close();
      console.log(migrations.applied.length ? `applied: ${migrations.applied.join(', ')}` : 'database is up to date');
    });
}
