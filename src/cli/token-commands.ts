// `ugs token create|list|revoke`: API tokens are issued and revoked here (docs/cli.md, "API
// tokens"), through the same service as the HTTP API's admin routes.
import { type Command, InvalidArgumentError, Option } from 'commander';
import type { Environment } from '../db/schema.ts';
import { COMMAND_LINE_ACTOR } from '../audit/actor.ts';
import { SCOPES, type Scope } from '../auth/principal.ts';
import { accountOption, duration, environmentOption, integerIn, jsonOption, print, UsageError, withDatabase } from './cli-parts.ts';

interface CreateOptions {
  account: string;
  scopes: Scope[];
  env: string;
  defaultEnv?: Environment;
  expiresIn?: number;
  name?: string;
  json?: boolean;
}

export function registerTokenCommands(program: Command): void {
  const token = program.command('token').description('manage API tokens');
  token
    .command('create')
    .description('issue an API token and print it once (the account is created if missing)')
    .addOption(accountOption('the account the token belongs to'))
    .addOption(
      new Option('--scopes <list>', "comma-separated: read, write, admin (manages the account's API tokens over HTTP)")
        .argParser(scopes)
        .default(['read', 'write'] satisfies Scope[], 'read,write'),
    )
    .addOption(environmentOption('the only environment the token may use', { any: true, default: 'any' }))
    .addOption(new Option('--default-env <environment>', 'environment used when a request names none').choices(['Customer', 'Testing']))
    .option('--expires-in <duration>', 'lifetime, e.g. 30d, 12h, 15m', duration)
    .option('--name <label>', 'a label to recognise the token by')
    .addOption(jsonOption('print one JSON object with id and token'))
    .action(createToken);
  token
    .command('list')
    .description('list the API tokens of an account (never shows a token)')
    .addOption(accountOption())
    .addOption(jsonOption())
    .action(listTokens);
  token
    .command('revoke')
    .description(
      'revoke an API token: refused on every instance within a second. The break-glass: it revokes any token, even the last admin token that HTTP refuses to revoke',
    )
    .argument('<id>', 'token id (see: ugs token list)', integerIn(1, Number.MAX_SAFE_INTEGER, 'a token id (see: ugs token list)'))
    .addOption(jsonOption())
    .action(async (id: number, opts: { json?: boolean }) => {
      const { revokeApiToken } = await import('../api-tokens/api-tokens.service.ts');
      const revoked = await withDatabase((h) => revokeApiToken(h, id, COMMAND_LINE_ACTOR, new Date()));
      if (!revoked) throw new UsageError(`no active API token with id ${id}`);
      print(opts, { id, revoked: true }, `revoked API token ${id}`);
      // The break-glass may leave an account that nobody can manage over HTTP: say so, and the way back.
      if (revoked.lastAdminRevoked) {
        process.stderr.write(
          `ugs: account ${revoked.account} has no admin token left that is unrestricted and never expires: to manage its tokens over HTTP, create one: npx ugs token create --account ${revoked.account} --scopes read,write,admin\n`,
        );
      }
    });
}

async function createToken(opts: CreateOptions): Promise<void> {
  const allowedEnvironment = opts.env === 'any' ? null : (opts.env as Environment);
  if (allowedEnvironment && opts.defaultEnv && opts.defaultEnv !== allowedEnvironment) {
    throw new UsageError(`--default-env ${opts.defaultEnv} contradicts --env ${allowedEnvironment}`);
  }
  const { issueApiToken } = await import('../api-tokens/api-tokens.service.ts');
  const now = new Date();
  const request = {
    accountSlug: opts.account,
    scopes: opts.scopes,
    allowedEnvironment,
    defaultEnvironment: opts.defaultEnv,
    expiresAt: opts.expiresIn ? new Date(now.getTime() + opts.expiresIn) : null,
    name: opts.name ?? null,
  };
  const issued = await withDatabase((h) => issueApiToken(h, request, COMMAND_LINE_ACTOR, now));
  const { accountCreated, ...view } = issued;
  const expires = issued.expires_at ? `, expires ${issued.expires_at}` : '';
  print(
    opts,
    { ...view, account_created: accountCreated },
    [
      ...(accountCreated ? [`created account ${issued.account}`] : []),
      `API token ${issued.id} for account ${issued.account} (scopes ${issued.scopes.join(',')}, environment ${allowedEnvironment ?? 'any'}, default ${issued.default_environment}${expires}).`,
      'It is shown only this once:',
      '',
      `  ${issued.token}`,
    ].join('\n'),
  );
}

async function listTokens(opts: { account: string; json?: boolean }): Promise<void> {
  const { apiTokenStatus, listApiTokens } = await import('../api-tokens/api-tokens.service.ts');
  const rows = await withDatabase((h) => listApiTokens(h.db, opts.account));
  if (!rows) throw new UsageError(`no account "${opts.account}"`);
  const now = new Date();
  const listed = rows.map((r) => ({ ...r, status: apiTokenStatus(r, now) }));
  const line = (r: (typeof listed)[number]) =>
    [r.id, `${r.token_start}…`, r.scopes, r.allowed_environment ?? 'any', r.default_environment, r.status, r.expires_at ?? '-', r.name ?? ''].join('\t');
  print(opts, listed, ['id\tstart\t\tscopes\t\tenv\tdefault\tstatus\texpires\tname', ...listed.map(line)].join('\n'));
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
