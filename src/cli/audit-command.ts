// `ugs audit`: the history of an account or of one group, newest first (docs/api.md,
// "GET /api/user/history"), as the HTTP API records it.
import type { Command } from 'commander';
import type { Environment } from '../db/schema.ts';
import { actorOfEntry } from '../audit/actor.ts';
import { accountOption, environmentOption, integerIn, jsonOption, print, UsageError, withDatabase } from './cli-parts.ts';

interface AuditOptions {
  account: string;
  userGroupId?: string;
  env: Environment;
  limit: number;
  json?: boolean;
}

export function registerAuditCommand(program: Command): void {
  program
    .command('audit')
    .description('print the change history of an account, or of one user group, newest first')
    .addOption(accountOption())
    .option('--user-group-id <id>', 'only this user group')
    .addOption(environmentOption('environment of the user group', { default: 'Customer' }))
    .option('--limit <n>', 'how many entries (1-10000)', integerIn(1, 10_000, 'the limit'), 100)
    .addOption(jsonOption())
    .action(printHistory);
}

async function printHistory(opts: AuditOptions): Promise<void> {
  const { historyOfAccount } = await import('../audit/history.service.ts');
  const userGroup = opts.userGroupId === undefined ? undefined : { environment: opts.env, providedId: opts.userGroupId };
  const rows = await withDatabase((h) => historyOfAccount(h, { accountSlug: opts.account, userGroup, limit: opts.limit }));
  if (!rows) throw new UsageError(`no account "${opts.account}"`);
  const subject = (r: (typeof rows)[number]) =>
    r.subject_type === 'user_group'
      ? `${r.environment}/${r.provided_id} (team ${r.subject_id})`
      : r.subject_type === 'webhook_endpoint'
        ? `webhook endpoint ${r.subject_id}`
        : `token ${r.subject_id}`;
  const line = (r: (typeof rows)[number]) =>
    [
      r.created_at,
      r.action,
      subject(r),
      r.changed_fields ?? '',
      r.actor_token_id === null ? actorOfEntry(r) : `token ${r.actor_token_id}`,
      r.request_id ?? '',
    ].join('\t');
  print(opts, rows, rows.map(line).join('\n') || '(no entries)');
}
