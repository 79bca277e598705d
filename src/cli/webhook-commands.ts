// `ugs webhooks list|create|delete|enable`: an account's webhook endpoints (docs/api.md,
// "Webhooks"), through the same service as the HTTP API, acting for the operator.
import type { Command } from 'commander';
import { loadConfig } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { Environment } from '../db/schema.ts';
import { COMMAND_LINE_ACTOR } from '../audit/actor.ts';
import { EVENT_TYPES, type EventType } from '../outbox/event-types.ts';
import { accountOption, environmentOption, integerIn, jsonOption, print, UsageError, withDatabase, withDatabaseKeys } from './cli-parts.ts';

interface CreateOptions {
  account: string;
  url: string;
  types?: string;
  env: string;
  description?: string;
  json?: boolean;
}

type EndpointOptions = { account: string; json?: boolean };

export function registerWebhookCommands(program: Command): void {
  const webhooks = program.command('webhooks').description('manage an account\'s webhook endpoints (docs/api.md, "Webhooks")');
  webhooks
    .command('list')
    .description('list the webhook endpoints of an account (never shows a secret)')
    .addOption(accountOption())
    .addOption(jsonOption())
    .action(listEndpoints);
  webhooks
    .command('create')
    .description('create a webhook endpoint and print its secret once')
    .addOption(accountOption())
    .requiredOption('--url <url>', 'where events are POSTed: http(s), to a public address unless UGS_WEBHOOK_ALLOW_PRIVATE=true')
    .option('--types <list>', `comma-separated event types (default: all): ${EVENT_TYPES.join(', ')}`)
    .addOption(environmentOption('only the events of this environment', { any: true, default: 'any' }))
    .option('--description <text>', 'what it is for')
    .addOption(jsonOption('print JSON, with the secret'))
    .action(createWebhookEndpoint);
  /** A command on one endpoint of an account: `ugs webhooks <name> --account <slug> <id> [--json]`. */
  const endpointCommand = (name: string, description: string) =>
    webhooks
      .command(name)
      .description(description)
      .addOption(accountOption())
      .argument('<id>', 'endpoint id (see: ugs webhooks list)', integerIn(1, Number.MAX_SAFE_INTEGER, 'an endpoint id'))
      .addOption(jsonOption());
  endpointCommand('delete', 'delete a webhook endpoint with its pending deliveries').action(deleteWebhookEndpoint);
  endpointCommand('enable', 'enable an endpoint disabled after 3 days of failures: its pending deliveries are sent again at once').action(
    enableWebhookEndpoint,
  );
}

async function listEndpoints(opts: EndpointOptions): Promise<void> {
  const { listEndpointsOf } = await import('../webhooks/webhooks.service.ts');
  const { webhookEndpointJson } = await import('../webhooks/webhooks.json.ts');
  const rows = (await withDatabase(async (h) => listEndpointsOf(h, (await accountOf(h, opts.account)).accountId))).map(webhookEndpointJson);
  const line = (r: (typeof rows)[number]) => [r.id, r.status, r.environment ?? 'any', r.types?.join(',') ?? 'all', r.url].join('\t');
  print(opts, rows, ['id\tstatus\tenv\ttypes\turl', ...rows.map(line)].join('\n'));
}

async function createWebhookEndpoint(opts: CreateOptions): Promise<void> {
  const types = opts.types === undefined ? null : [...new Set(opts.types.split(',').map((s) => s.trim()))];
  const unknown = (types ?? []).filter((type) => !(EVENT_TYPES as readonly string[]).includes(type));
  if (unknown.length > 0) throw new UsageError(`unknown event types ${unknown.join(', ')}: types are ${EVENT_TYPES.join(', ')}`);
  const config = loadConfig();
  const { createEndpoint } = await import('../webhooks/webhooks.service.ts');
  const { webhookEndpointJson } = await import('../webhooks/webhooks.json.ts');
  const created = await withDatabaseKeys(async (h, keyring) =>
    createEndpoint(
      { database: h, keyring, allowPrivate: config.webhookAllowPrivate, maxEndpoints: config.webhookMaxEndpoints },
      { ...(await accountOf(h, opts.account)), environment: opts.env === 'any' ? null : (opts.env as Environment) },
      { url: opts.url, types: types as EventType[] | null, description: opts.description ?? null },
      COMMAND_LINE_ACTOR,
      new Date(),
    ),
  );
  const json = { ...webhookEndpointJson(created.endpoint), secret: created.secret };
  print(
    opts,
    json,
    [`webhook endpoint ${json.id} for account ${opts.account}: ${json.url}`, 'Its secret is shown only this once:', '', `  ${json.secret}`].join('\n'),
  );
}

async function deleteWebhookEndpoint(id: number, opts: EndpointOptions): Promise<void> {
  const { deleteEndpointIn } = await import('../webhooks/webhooks.service.ts');
  await withDatabase(async (h) => deleteEndpointIn(h, await accountOf(h, opts.account), id, COMMAND_LINE_ACTOR, new Date())).catch(endpointNotFoundAsUsage);
  print(opts, { id, deleted: true }, `deleted webhook endpoint ${id}`);
}

async function enableWebhookEndpoint(id: number, opts: EndpointOptions): Promise<void> {
  const { enableEndpointIn } = await import('../webhooks/webhooks.service.ts');
  const { webhookEndpointJson } = await import('../webhooks/webhooks.json.ts');
  const enabled = await withDatabase(async (h) => enableEndpointIn(h, await accountOf(h, opts.account), id, COMMAND_LINE_ACTOR, new Date())).catch(
    endpointNotFoundAsUsage,
  );
  print(opts, webhookEndpointJson(enabled), `webhook endpoint ${id} is enabled`);
}

/** The operator acts on the account's endpoints of every environment. */
async function accountOf(handle: DatabaseHandle, slug: string): Promise<{ accountId: number; environment: null }> {
  const { findAccount } = await import('../accounts/accounts.service.ts');
  const found = await findAccount(handle, slug);
  if (!found) throw new UsageError(`no account "${slug}"`);
  return { accountId: Number(found.id), environment: null };
}

function endpointNotFoundAsUsage(err: unknown): never {
  throw err instanceof Error && 'code' in err && err.code === 'webhook_endpoint_not_found' ? new UsageError(err.message) : err;
}
