// `ugs`: the command-line tool for what the HTTP API does not do (accounts, API tokens,
// migrations, history). It works on the same database as the server (DATABASE_URL).
import { Command, InvalidArgumentError, Option } from 'commander';
import { EMBED_SIGNING_ALGORITHMS, loadConfig, type EmbedSigningAlgorithm } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { Environment } from '../db/schema.ts';
import { openMigratedDatabase } from '../runtime.ts';
import { ACCOUNT_SLUG, allAccounts, createAccount, findAccount } from '../accounts/accounts.service.ts';
import { historyOfAccount } from '../audit/history.service.ts';
import { NO_TOKEN_ACTOR } from '../audit/actor.ts';
import { apiTokenStatus, issueApiToken, listApiTokens, revokeApiToken } from '../api-tokens/api-tokens.service.ts';
import { SCOPES, type Scope } from '../auth/principal.ts';
import { parseDuration } from '../duration.ts';
import { reencryptUserGroupTokens, reencryptWebhookSecrets, tokensPerKey } from '../crypto/reencrypt.ts';
import { reissueTokensOfLostKey } from '../user-groups/lost-key.service.ts';
import { DEFAULT_ACTIVATION_SECONDS, reencryptSigningKeys, replaceSigningKeysOfLostKey, rotateSigningKey, listSigningKeys } from '../embed/signing-keys.ts';
import { declareAccountLevels, readAccountLevels } from '../user-groups/account-levels.service.ts';
import { loadKeyring, type Keyring } from '../crypto/keyring.ts';
import { tailEvents } from '../events/event-tail.ts';
import fs from 'node:fs';
import { EVENT_TYPES, type EventType } from '../audit/outbox.ts';
import { createEndpoint, deleteEndpointIn, enableEndpointIn, listEndpointsOf } from '../webhooks/webhooks.service.ts';
import { webhookEndpointJson } from '../webhooks/webhooks.json.ts';
import { registerTransferCommands } from './transfer-commands.ts';
import { registerTagCommands } from './tag-commands.ts';

class UsageError extends Error {}

async function withDatabase<T>(work: (handle: DatabaseHandle) => Promise<T>): Promise<T> {
  const { handle } = await openMigratedDatabase(loadConfig());
  try {
    return await work(handle);
  } finally {
    await handle.close();
  }
}

function slug(value: string): string {
  if (!ACCOUNT_SLUG.test(value)) throw new InvalidArgumentError('an account slug is 1-63 characters: a-z, 0-9 and -, starting with a letter or digit');
  return value;
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

function scopes(value: string): Scope[] {
  const list = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (list.length === 0 || list.some((s) => !SCOPES.includes(s as Scope)))
    throw new InvalidArgumentError(`scopes are a comma-separated list of ${SCOPES.join(', ')}`);
  return [...new Set(list)] as Scope[];
}

/** A whole number written in plain digits: `1e3`, `0x10`, `1.0` or ` 7` are usage errors, never another number. */
function integerIn(min: number, max: number, what: string) {
  return (value: string): number => {
    const n = /^[0-9]{1,16}$/.test(value) ? Number(value) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${what} is a whole number from ${min} to ${max}, in plain digits`);
    return n;
  };
}

const tokenId = integerIn(1, Number.MAX_SAFE_INTEGER, 'a token id (see: ugs token list)');

/** The longest --expires-in: beyond it a date is not worth writing (and past year 275760 not even valid). */
const MAX_LIFETIME_MS = 100 * 365 * 86_400_000;

function duration(value: string): number {
  const ms = parseDuration(value);
  if (ms === null) throw new InvalidArgumentError('a duration is a number and a unit: 30s, 15m, 12h, 30d or 1w');
  if (ms > MAX_LIFETIME_MS) throw new InvalidArgumentError('a lifetime is at most 36500d (100 years); leave --expires-in out for a token that does not expire');
  return ms;
}

/** The configured keys; never creates a key file (only the server does, on first start). */
function configuredKeyring(): Keyring {
  const config = loadConfig();
  if (config.secretKeys.length === 0 && !fs.existsSync(config.keyFile)) {
    throw new UsageError(`no secret keys: set UGS_SECRET_KEY or create ${config.keyFile}`);
  }
  return loadKeyring(config.secretKeys, config.keyFile).keyring;
}

function print(json: boolean, value: unknown, text: string): void {
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${text}\n`);
}

export function buildCli(): Command {
  const program = new Command('ugs')
    .description('User Group Service administration. Uses DATABASE_URL (default sqlite:./data/ugs.sqlite).')
    .showHelpAfterError()
    .configureOutput({ outputError: (str, write) => write(str) });

  const account = program.command('account').description('manage accounts (tenants)');
  account
    .command('create')
    .description('create an account')
    .argument('<slug>', 'account slug: a-z, 0-9 and -', slug)
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { json?: boolean }) => {
      const { account: row, created } = await withDatabase((h) => createAccount(h, name, new Date()));
      if (!created) throw new UsageError(`account "${name}" already exists`);
      print(!!opts.json, { id: row.id, slug: row.slug, created_at: row.created_at }, `created account ${row.slug} (id ${row.id})`);
    });
  account
    .command('list')
    .description('list accounts')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const rows = await withDatabase((h) => allAccounts(h));
      print(!!opts.json, rows, rows.map((r) => `${r.id}\t${r.slug}\t${r.created_at}`).join('\n') || '(no accounts)');
    });

  account
    .command('levels')
    .description("show or declare the account's hierarchy level names, shallowest first (e.g. Customer,User)")
    .argument('<slug>', 'account slug', slug)
    .argument('[levels]', 'comma-separated level names, shallowest first', levelNames)
    .option('--clear', 'forget the declared levels: any level name is accepted again')
    .option('--json', 'print JSON')
    .action(async (name: string, levels: string[] | undefined, opts: { clear?: boolean; json?: boolean }) => {
      if (levels && opts.clear) throw new UsageError('give levels or --clear, not both');
      const done = await withDatabase((h) =>
        levels === undefined && !opts.clear ? readAccountLevels(h, name) : declareAccountLevels(h, name, opts.clear ? null : levels!),
      );
      if (done.outcome === 'no_account') throw new UsageError(`no account "${name}"`);
      if (done.outcome === 'in_use') throw new UsageError(`groups of account "${name}" use levels not in the list: ${done.levels.join(', ')}`);
      const result = done.levels;

      print(
        !!opts.json,
        { account: name, levels: result },
        result === null ? `account ${name} declares no levels` : `account ${name} levels: ${result.join(' > ')}`,
      );
    });

  const token = program.command('token').description('manage API tokens');
  token
    .command('create')
    .description('issue an API token and print it once (the account is created if missing)')
    .requiredOption('--account <slug>', 'the account the token belongs to', slug)
    .option('--scopes <list>', "comma-separated: read, write, admin (manages the account's API tokens over HTTP)", scopes, ['read', 'write'] as Scope[])
    .addOption(new Option('--env <environment>', 'the only environment the token may use').choices(['Customer', 'Testing', 'any']).default('any'))
    .addOption(new Option('--default-env <environment>', 'environment used when a request names none').choices(['Customer', 'Testing']))
    .option('--expires-in <duration>', 'lifetime, e.g. 30d, 12h, 15m', duration)
    .option('--name <label>', 'a label to recognise the token by')
    .option('--json', 'print one JSON object with id and token')
    .action(async (opts: { account: string; scopes: Scope[]; env: string; defaultEnv?: Environment; expiresIn?: number; name?: string; json?: boolean }) => {
      const allowedEnvironment = opts.env === 'any' ? null : (opts.env as Environment);
      if (allowedEnvironment && opts.defaultEnv && opts.defaultEnv !== allowedEnvironment) {
        throw new UsageError(`--default-env ${opts.defaultEnv} contradicts --env ${allowedEnvironment}`);
      }
      const now = new Date();
      const issued = await withDatabase((h) =>
        issueApiToken(
          h,
          {
            accountSlug: opts.account,
            scopes: opts.scopes,
            allowedEnvironment,
            defaultEnvironment: opts.defaultEnv,
            expiresAt: opts.expiresIn ? new Date(now.getTime() + opts.expiresIn) : null,
            name: opts.name ?? null,
          },
          NO_TOKEN_ACTOR,
          now,
        ),
      );
      const { accountCreated, ...view } = issued;
      print(
        !!opts.json,
        { ...view, account_created: accountCreated },
        [
          accountCreated ? `created account ${issued.account}` : '',
          `API token ${issued.id} for account ${issued.account} (scopes ${issued.scopes.join(',')}, environment ${allowedEnvironment ?? 'any'}, default ${issued.default_environment}${issued.expires_at ? `, expires ${issued.expires_at}` : ''}).`,
          'It is shown only this once:',
          '',
          `  ${issued.token}`,
        ]
          .filter((line, i) => i > 0 || line)
          .join('\n'),
      );
    });
  token
    .command('list')
    .description('list the API tokens of an account (never shows a token)')
    .requiredOption('--account <slug>', 'the account', slug)
    .option('--json', 'print JSON')
    .action(async (opts: { account: string; json?: boolean }) => {
      const rows = await withDatabase((h) => listApiTokens(h.db, opts.account));
      if (!rows) throw new UsageError(`no account "${opts.account}"`);
      const state = (r: (typeof rows)[number]) => apiTokenStatus(r, new Date());
      print(
        !!opts.json,
        rows.map((r) => ({ ...r, status: state(r) })),
        ['id\tstart\t\tscopes\t\tenv\tdefault\tstatus\texpires\tname']
          .concat(
            rows.map((r) =>
              [r.id, `${r.token_start}…`, r.scopes, r.allowed_environment ?? 'any', r.default_environment, state(r), r.expires_at ?? '-', r.name ?? ''].join(
                '\t',
              ),
            ),
          )
          .join('\n'),
      );
    });
  token
    .command('revoke')
    .description(
      'revoke an API token: refused on every instance within a second. The break-glass: it revokes any token, even the last admin token that HTTP refuses to revoke',
    )

    .argument('<id>', 'token id (see: ugs token list)', tokenId)
    .option('--json', 'print JSON')
    .action(async (id: number, opts: { json?: boolean }) => {
      const revoked = await withDatabase((h) => revokeApiToken(h, id, NO_TOKEN_ACTOR, new Date()));
      if (!revoked) throw new UsageError(`no active API token with id ${id}`);
      print(!!opts.json, { id, revoked: true }, `revoked API token ${id}`);
    });

  const endpointNotFoundAsUsage = (err: unknown): never => {
    throw err instanceof Error && 'code' in err && err.code === 'webhook_endpoint_not_found' ? new UsageError(err.message) : err;
  };
  const webhooks = program.command('webhooks').description('manage an account\'s webhook endpoints (docs/api.md, "Webhooks")');
  const accountId = async (h: DatabaseHandle, name: string) => {
    const found = await findAccount(h, name);
    if (!found) throw new UsageError(`no account "${name}"`);
    return Number(found.id);
  };
  webhooks
    .command('list')
    .description('list the webhook endpoints of an account (never shows a secret)')
    .requiredOption('--account <slug>', 'the account', slug)
    .option('--json', 'print JSON')
    .action(async (opts: { account: string; json?: boolean }) => {
      const rows = (await withDatabase(async (h) => listEndpointsOf(h, await accountId(h, opts.account)))).map(webhookEndpointJson);
      print(
        !!opts.json,
        rows,
        ['id\tstatus\tenv\ttypes\turl']
          .concat(rows.map((r) => [r.id, r.status, r.environment ?? 'any', r.types?.join(',') ?? 'all', r.url].join('\t')))
          .join('\n'),
      );
    });
  webhooks
    .command('create')
    .description('create a webhook endpoint and print its secret once')
    .requiredOption('--account <slug>', 'the account', slug)
    .requiredOption('--url <url>', 'where events are POSTed: http(s), to a public address unless UGS_WEBHOOK_ALLOW_PRIVATE=true')
    .option('--types <list>', `comma-separated event types (default: all): ${EVENT_TYPES.join(', ')}`)
    .addOption(new Option('--env <environment>', 'only the events of this environment').choices(['Customer', 'Testing', 'any']).default('any'))
    .option('--description <text>', 'what it is for')
    .option('--json', 'print JSON, with the secret')
    .action(async (opts: { account: string; url: string; types?: string; env: string; description?: string; json?: boolean }) => {
      const types = opts.types === undefined ? null : [...new Set(opts.types.split(',').map((s) => s.trim()))];
      const unknown = (types ?? []).filter((type) => !(EVENT_TYPES as readonly string[]).includes(type));
      if (unknown.length > 0) throw new UsageError(`unknown event types ${unknown.join(', ')}: types are ${EVENT_TYPES.join(', ')}`);
      const keyring = configuredKeyring();
      const config = loadConfig();
      const created = await withDatabase(async (h) =>
        createEndpoint(
          { database: h, keyring, allowPrivate: config.webhookAllowPrivate, maxEndpoints: config.webhookMaxEndpoints },
          { accountId: await accountId(h, opts.account), environment: opts.env === 'any' ? null : (opts.env as Environment) },
          { url: opts.url, types: types as EventType[] | null, description: opts.description ?? null },
          NO_TOKEN_ACTOR,
          new Date(),
        ),
      );
      const json = { ...webhookEndpointJson(created.endpoint), secret: created.secret };
      print(
        !!opts.json,
        json,
        [`webhook endpoint ${json.id} for account ${opts.account}: ${json.url}`, 'Its secret is shown only this once:', '', `  ${json.secret}`].join('\n'),
      );
    });
  /** A command on one endpoint of an account: `ugs webhooks <name> --account <slug> <id> [--json]`. */
  const endpointCommand = (name: string, description: string) =>
    webhooks
      .command(name)
      .description(description)
      .requiredOption('--account <slug>', 'the account', slug)
      .argument('<id>', 'endpoint id (see: ugs webhooks list)', integerIn(1, Number.MAX_SAFE_INTEGER, 'an endpoint id'))
      .option('--json', 'print JSON');
  endpointCommand('delete', 'delete a webhook endpoint with its pending deliveries').action(async (id: number, opts: { account: string; json?: boolean }) => {
    await withDatabase(async (h) =>
      deleteEndpointIn(h, { accountId: await accountId(h, opts.account), environment: null }, id, NO_TOKEN_ACTOR, new Date()),
    ).catch(endpointNotFoundAsUsage);
    print(!!opts.json, { id, deleted: true }, `deleted webhook endpoint ${id}`);
  });
  endpointCommand('enable', 'enable an endpoint disabled after 3 days of failures: its pending deliveries are sent again at once').action(
    async (id: number, opts: { account: string; json?: boolean }) => {
      const enabled = await withDatabase(async (h) =>
        enableEndpointIn(h, { accountId: await accountId(h, opts.account), environment: null }, id, NO_TOKEN_ACTOR, new Date()),
      ).catch(endpointNotFoundAsUsage);
      print(!!opts.json, webhookEndpointJson(enabled), `webhook endpoint ${id} is enabled`);
    },
  );

  program
    .command('migrate')
    .description('apply database migrations (the server also does this on start)')
    .action(async () => {
      const { handle, migrations } = await openMigratedDatabase(loadConfig());
      await handle.close();
      console.log(migrations.applied.length ? `applied: ${migrations.applied.join(', ')}` : 'database is up to date');
    });

  program
    .command('audit')
    .description('print the change history of an account, or of one user group, newest first')
    .requiredOption('--account <slug>', 'the account', slug)
    .option('--user-group-id <id>', 'only this user group')
    .addOption(new Option('--env <environment>', 'environment of the user group').choices(['Customer', 'Testing']).default('Customer'))
    .option('--limit <n>', 'how many entries (1-10000)', integerIn(1, 10_000, 'the limit'), 100)
    .option('--json', 'print JSON')
    .action(async (opts: { account: string; userGroupId?: string; env: Environment; limit: number; json?: boolean }) => {
      const userGroup = opts.userGroupId === undefined ? undefined : { environment: opts.env, providedId: opts.userGroupId };
      const rows = await withDatabase((h) => historyOfAccount(h, { accountSlug: opts.account, userGroup, limit: opts.limit }));
      if (!rows) throw new UsageError(`no account "${opts.account}"`);
      print(
        !!opts.json,
        rows,
        rows
          .map((r) =>
            [
              r.created_at,
              r.action,
              r.subject_type === 'user_group'
                ? `${r.environment}/${r.provided_id} (team ${r.subject_id})`
                : r.subject_type === 'webhook_endpoint'
                  ? `webhook endpoint ${r.subject_id}`
                  : `token ${r.subject_id}`,
              r.changed_fields ?? '',
              r.actor_token_id === null ? 'cli' : `token ${r.actor_token_id}`,
              r.request_id ?? '',
            ].join('\t'),
          )
          .join('\n') || '(no entries)',
      );
    });

  const keys = program.command('keys').description('secret keys that protect stored user group tokens (UGS_SECRET_KEY, newest first)');
  keys
    .command('status')
    .description('how many user group tokens are sealed under each key id')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const keyring = configuredKeyring();
      const rows = await withDatabase((h) => tokensPerKey(h.db));
      const state = (id: string) => (id === keyring.currentKeyId ? 'current' : keyring.keyIds.includes(id) ? 'old' : 'NOT CONFIGURED');
      const listed = rows.map((r) => ({ ...r, state: state(r.key_id) }));
      for (const id of keyring.keyIds) if (!rows.some((r) => r.key_id === id)) listed.push({ key_id: id, tokens: 0, state: state(id) });
      print(
        !!opts.json,
        { current_key_id: keyring.currentKeyId, keys: listed },
        ['key id\ttokens\tstate', ...listed.map((r) => `${r.key_id}\t${r.tokens}\t${r.state}`)].join('\n'),
      );
    });
  keys
    .command('reencrypt')
    .description('re-seal every user group token under the newest key, in batches, while the server runs')
    .option('--batch-size <n>', 'rows per transaction (1-10000)', integerIn(1, 10_000, 'the batch size'), 500)
    .option('--json', 'print JSON')
    .action(async (opts: { batchSize: number; json?: boolean }) => {
      const keyring = configuredKeyring();
      const [outcome, signing, webhookSecrets] = await withDatabase(
        async (h) =>
          [
            await reencryptUserGroupTokens(h, keyring, { batchSize: opts.batchSize }),
            await reencryptSigningKeys(h, keyring),
            await reencryptWebhookSecrets(h, keyring),
          ] as const,
      );
      print(
        !!opts.json,
        { current_key_id: keyring.currentKeyId, ...outcome, embed_signing_keys: signing, webhook_secrets: webhookSecrets },
        [
          `re-sealed ${outcome.resealed} of ${outcome.examined} user group tokens under key ${keyring.currentKeyId}`,
          `re-sealed ${signing.resealed} embed signing keys`,
          `re-sealed ${webhookSecrets.resealed} webhook endpoint secrets`,
          webhookSecrets.unreadable.length
            ? `webhook endpoints whose secrets are sealed under keys that are not configured: ${webhookSecrets.unreadable.join(', ')}`
            : '',
          signing.unreadable.length ? `embed signing keys sealed under keys that are not configured: ${signing.unreadable.join(', ')}` : '',
          outcome.changedConcurrently
            ? `${outcome.changedConcurrently} were rotated meanwhile (already under the newest key of the rotating instance; run again to be sure)`
            : '',
          outcome.unreadable.length
            ? `${outcome.unreadable.length} are sealed under keys that are not configured: ${[...new Set(outcome.unreadable.map((u) => u.key_id))].join(', ')}`
            : '',
        ]
          .filter(Boolean)
          .join('\n'),
      );
      if (outcome.unreadable.length + signing.unreadable.length + webhookSecrets.unreadable.length > 0) {
        throw new Error('some tokens or signing keys could not be re-sealed: add their keys to UGS_SECRET_KEY (after the newest) and run again');
      }
    });

  keys
    .command('reissue')
    .description('for a key that is lost for good: give every group whose token it sealed a new token under the newest configured key')
    .argument('<key-id...>', 'the lost key ids (see: ugs keys status, or the message of a refused start)', (value: string, previous: string[] = []) => {
      if (!/^[0-9a-f]{8}$/.test(value)) throw new InvalidArgumentError('a key id is 8 hex digits');
      return [...previous, value];
    })
    .option('--json', 'print JSON')
    .action(async (keyIds: string[], opts: { json?: boolean }) => {
      const keyring = configuredKeyring();
      for (const keyId of keyIds) {
        if (keyring.keyIds.includes(keyId))
          throw new UsageError(`key ${keyId} is configured, so its tokens can be read: move them with ugs keys reencrypt instead`);
      }
      const outcomes = await withDatabase(async (h) => {
        const done = [];
        for (const keyId of keyIds) {
          const reissued = await reissueTokensOfLostKey(h, keyring, keyId, NO_TOKEN_ACTOR, () => new Date());
          const replaced = await replaceSigningKeysOfLostKey(h, keyring, keyId, new Date(), loadConfig().embedSigningAlgorithm);
          done.push({ ...reissued, replaced_signing_keys: replaced });
        }
        return done;
      });
      print(
        !!opts.json,
        { current_key_id: keyring.currentKeyId, keys: outcomes },
        outcomes
          .map(
            (o) =>
              `key ${o.key_id}: ${o.reissued} user group tokens reissued under key ${keyring.currentKeyId}; their old tokens no longer work` +
              (o.replaced_signing_keys.length > 0
                ? `\nembed signing keys ${o.replaced_signing_keys.join(', ')} replaced by a new key; their tokens verify until they expire`
                : ''),
          )
          .join('\n'),
      );
    });

  const embedKeys = keys.command('embed').description('the keys that sign embed tokens (published at /.well-known/jwks.json)');
  embedKeys
    .command('rotate')
    .description('add a new signing key: published at once, it signs after --activate-in; older keys stay published until their tokens expire')
    .addOption(
      new Option(
        '--alg <algorithm>',
        'the algorithm of the new key (default: UGS_EMBED_SIGNING_ALG, else ES256); keys of other algorithms stay published until their tokens expire',
      ).choices(EMBED_SIGNING_ALGORITHMS),
    )
    .option(
      '--activate-in <duration>',
      `how long the new key is published before it signs, so that verifiers' cached key sets learn it first (default ${DEFAULT_ACTIVATION_SECONDS / 60}m; 0s: at once)`,
      (value: string) => (/^0+\s*[smhdw]$/.test(value.trim()) ? 0 : duration(value)),
      DEFAULT_ACTIVATION_SECONDS * 1000,
    )
    .option('--json', 'print JSON')
    .action(async (opts: { alg?: EmbedSigningAlgorithm; activateIn: number; json?: boolean }) => {
      const keyring = configuredKeyring();
      const algorithm = opts.alg ?? loadConfig().embedSigningAlgorithm;
      const rotation = await withDatabase((h) => rotateSigningKey(h, keyring, new Date(), opts.activateIn, algorithm));
      print(
        !!opts.json,
        rotation,
        [
          `added embed signing key ${rotation.kid} (${rotation.algorithm}); it signs from ${rotation.activates_at}`,
          ...rotation.dropped.map((kid) => `dropped key ${kid}: every token it signed has expired`),
        ].join('\n'),
      );
    });
  embedKeys
    .command('list')
    .description('the signing keys: when each signs, and until when it stays published')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const listed = await withDatabase((h) => listSigningKeys(h));
      print(
        !!opts.json,
        listed,
        [
          'kid\talgorithm\tactivates at\tretired at\tpublished until at least',
          ...listed.map((k) => [k.kid, k.algorithm, k.activates_at, k.retired_at ?? '-', k.signed_until].join('\t')),
        ].join('\n'),
      );
    });

  const events = program.command('events').description('an account\'s change events (docs/api.md, "Change events")');
  events
    .command('tail')
    .description('print the events as JSON lines as they come, until interrupted (read from the database; a running server numbers them)')
    .requiredOption('--account <slug>', 'the account', slug)
    .addOption(new Option('--env <environment>', "only this environment's events").choices(['Customer', 'Testing']))
    .option('--types <types>', 'comma-separated event types, e.g. user_group.deleted,user_group.token_rotated')
    .option('--after <id>', 'start after this event id (default: only new events)', (value) =>
      String(integerIn(0, Number.MAX_SAFE_INTEGER, 'an event id')(value)),
    )
    .action(async (opts: { account: string; env?: Environment; types?: string; after?: string }) => {
      const stop = new AbortController();
      const interrupted = () => stop.abort();
      process.once('SIGINT', interrupted);
      process.once('SIGTERM', interrupted);
      try {
        await withDatabase((h) =>
          tailEvents(
            h,
            {
              accountSlug: opts.account,
              environment: opts.env ?? null,
              types: opts.types,
              after: opts.after,
              pollMs: loadConfig().eventPollMs,
              signal: stop.signal,
            },
            (event) => process.stdout.write(`${JSON.stringify(event)}\n`),
          ),
        );
      } finally {
        process.off('SIGINT', interrupted);
        process.off('SIGTERM', interrupted);
      }
    });

  registerTransferCommands(program, { withDatabase, configuredKeyring, slug, usageError: (message) => new UsageError(message) });
  registerTagCommands(program, { withDatabase, slug, usageError: (message) => new UsageError(message) });

  return program;
}

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
