// `ugs events tail`: an account's change events as JSON lines (docs/api.md, "Change events"),
// read from the database that a running server numbers them in.
import type { Command } from 'commander';
import { loadConfig } from '../config.ts';
import type { Environment } from '../db/schema.ts';
import { accountOption, environmentOption, integerIn, withDatabase } from './cli-parts.ts';

interface TailOptions {
  account: string;
  env?: Environment;
  types?: string;
  after?: string;
}

export function registerEventCommands(program: Command): void {
  const events = program.command('events').description('an account\'s change events (docs/api.md, "Change events")');
  events
    .command('tail')
    .description('print the events as JSON lines as they come, until interrupted (read from the database; a running server numbers them)')
    .addOption(accountOption())
    .addOption(environmentOption("only this environment's events"))
    .option('--types <types>', 'comma-separated event types, e.g. user_group.deleted,user_group.token_rotated')
    .option('--after <id>', 'start after this event id (default: only new events)', (value) =>
      String(integerIn(0, Number.MAX_SAFE_INTEGER, 'an event id')(value)),
    )
    .action(tail);
}

/** Follows the events until SIGINT or SIGTERM, which end it cleanly (exit 0). */
async function tail(opts: TailOptions): Promise<void> {
  const { tailEvents } = await import('../events/event-tail.ts');
  const stop = new AbortController();
  const interrupted = () => stop.abort();
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  const request = {
    accountSlug: opts.account,
    environment: opts.env ?? null,
    types: opts.types,
    after: opts.after,
    pollMs: loadConfig().eventPollMs,
    signal: stop.signal,
    // On stderr, so that stdout holds only events: what a script (or a test) waits for before it makes changes.
    onFollowing: (after: number) => process.stderr.write(`following the events of ${opts.account} after event ${after} (Ctrl-C stops)\n`),
  };
  try {
    await withDatabase((h) => tailEvents(h, request, (event) => process.stdout.write(`${JSON.stringify(event)}\n`)));
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
  }
}
