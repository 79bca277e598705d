// `ugs account create|list|levels` (docs/cli.md, "Accounts"; levels: docs/api.md, "Hierarchy").
import { type Command, InvalidArgumentError } from 'commander';
import { jsonOption, print, slug, UsageError, withDatabase } from './cli-parts.ts';

export function registerAccountCommands(program: Command): void {
  const account = program.command('account').description('manage accounts (tenants)');
  account
    .command('create')
    .description('create an account')
    .argument('<slug>', 'account slug: a-z, 0-9 and -', slug)
    .addOption(jsonOption())
    .action(async (name: string, opts: { json?: boolean }) => {
      const { createAccount } = await import('../accounts/accounts.service.ts');
      const { account: row, created } = await withDatabase((h) => createAccount(h, name, new Date()));
      if (!created) throw new UsageError(`account "${name}" already exists`);
      print(opts, { id: row.id, slug: row.slug, created_at: row.created_at }, `created account ${row.slug} (id ${row.id})`);
    });
  account
    .command('list')
    .description('list accounts')
    .addOption(jsonOption())
    .action(async (opts: { json?: boolean }) => {
      const { allAccounts } = await import('../accounts/accounts.service.ts');
      const rows = await withDatabase((h) => allAccounts(h));
      print(opts, rows, rows.map((r) => `${r.id}\t${r.slug}\t${r.created_at}`).join('\n') || '(no accounts)');
    });
  account
    .command('levels')
    .description("show or declare the account's hierarchy level names, shallowest first (e.g. Customer,User)")
    .argument('<slug>', 'account slug', slug)
    .argument('[levels]', 'comma-separated level names, shallowest first', levelNames)
    .option('--clear', 'forget the declared levels: any level name is accepted again')
    .addOption(jsonOption())
    .action(showOrDeclareLevels);
}

async function showOrDeclareLevels(name: string, levels: string[] | undefined, opts: { clear?: boolean; json?: boolean }): Promise<void> {
  if (levels && opts.clear) throw new UsageError('give levels or --clear, not both');
  const { declareAccountLevels, readAccountLevels } = await import('../user-groups/hierarchy/account-levels.service.ts');
  const done = await withDatabase((h) =>
    levels === undefined && !opts.clear ? readAccountLevels(h, name) : declareAccountLevels(h, name, opts.clear ? null : levels!),
  );
  if (done.outcome === 'no_account') throw new UsageError(`no account "${name}"`);
  if (done.outcome === 'in_use') throw new UsageError(`groups of account "${name}" use levels not in the list: ${done.levels.join(', ')}`);
  const result = done.levels;
  print(opts, { account: name, levels: result }, result === null ? `account ${name} declares no levels` : `account ${name} levels: ${result.join(' > ')}`);
}

/** Level names, shallowest first: distinct, 1-64 characters each, no control characters, at most 10 (the deepest hierarchy). */
function levelNames(value: string): string[] {
  const list = value.split(',').map((s) => s.trim());
  const plain = /^[^\u0000-\u001F\u007F]{1,64}$/u;
  if (list.length > 10 || list.some((name) => !plain.test(name) || [...name].length > 64) || new Set(list).size !== list.length) {
    throw new InvalidArgumentError('levels are 1 to 10 distinct comma-separated names, shallowest first (1-64 characters each), e.g. Customer,User');
  }
  return list;
}
