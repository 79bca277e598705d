// `ugs`: the command-line tool for what the HTTP API does not do (accounts, API tokens,
// migrations, history). It works on the same database as the server (DATABASE_URL). Each
// command group is a module of its own that registers its commands and calls services; this
// file builds the program from them and turns what a command ends with into an exit status.
import { Command } from 'commander';
import { UsageError } from './cli-parts.ts';
import { registerAccountCommands } from './account-commands.ts';
import { registerTokenCommands } from './token-commands.ts';
import { registerWebhookCommands } from './webhook-commands.ts';
import { registerMigrateCommand } from './migrate-command.ts';
import { registerAuditCommand } from './audit-command.ts';
import { registerKeyCommands } from './key-commands.ts';
import { registerEventCommands } from './event-commands.ts';
import { registerTransferCommands } from './transfer-commands.ts';
import { registerTagCommands } from './tag-commands.ts';
import { SERVICE_VERSION } from '../foundations/version.ts';

export function buildCli(): Command {
  const program = new Command('ugs')
    .description('User Group Service administration. Uses DATABASE_URL (default sqlite:./data/ugs.sqlite).')
    .version(SERVICE_VERSION, '-V, --version', 'print the version of this release')
    .showHelpAfterError()
    .configureOutput({ outputError: (str, write) => write(str) });
  // In this order in `ugs --help`.
  registerAccountCommands(program);
  registerTokenCommands(program);
  registerWebhookCommands(program);
  registerMigrateCommand(program);
  registerAuditCommand(program);
  registerKeyCommands(program);
  registerEventCommands(program);
  registerTransferCommands(program);
  registerTagCommands(program);
  return program;
}

/**
 * Runs `ugs` with these arguments and answers its exit status: 0 done (or help asked for),
 * 1 failed, 2 a usage error (commander's, or a command's UsageError).
 */
export async function runCli(argv: string[]): Promise<number> {
  const program = buildCli();
  // Subcommands copy settings when they are created, so the override must reach each one:
  // otherwise commander calls process.exit(1) itself for a subcommand's usage error.
  const overrideExit = (command: Command): void => {
    command.exitOverride();
    command.commands.forEach(overrideExit);
  };
  overrideExit(program);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'commander.helpDisplayed' || code === 'commander.version') return 0;
    // Help asked for (`ugs help`) is 0; help shown because a subcommand is missing is 1.
    if (code === 'commander.help') return (err as { exitCode?: number }).exitCode ?? 0;
    if (code?.startsWith('commander.')) return 2; // commander already printed the problem and the help
    console.error(`ugs: ${err instanceof Error ? err.message : String(err)}`);
    return err instanceof UsageError ? 2 : 1;
  }
}
