// The command-line tool (docs/cli.md, "API tokens", "Accounts"), run as a real process against the
// same database as a real server, which then honours what the tool did.
import { it, before, after } from 'node:test';
import { decodeProtectedHeader } from 'jose';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { Command } from 'commander';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { forEachBackend } from './helpers/harness.ts';
import { TEST_BUILD, httpRequest, runCommand, runUgs, spawnServer, type CommandResult, type ServerProcess } from './helpers/processes.ts';
import { runUgsHere } from './helpers/ugs-in-process.ts';
import { buildCli } from '../src/cli/main.ts';
import { eventually } from './helpers/wait.ts';

const API_TOKEN = /ugs_api_[0-9A-Za-z]{49}/g;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every command path of the tool, e.g. [], ['token'], ['token', 'create']. */
function commandPaths(command: Command, prefix: string[] = []): string[][] {
  return [prefix, ...command.commands.flatMap((c) => commandPaths(c, [...prefix, c.name()]))];
}

/** Runs a command line (npx, npm) from the root of the tests' own build, a tree shaped like the checkout. */
function runIn(command: string, args: string[], env: Record<string, string>): Promise<CommandResult> {
  return runCommand(command, args, { cwd: TEST_BUILD, env: { ...process.env, ...env } });
}

/** The random body of a token: what must never be shown in full. */
const bodyOf = (token: string) => token.slice(token.lastIndexOf('_') + 1, token.lastIndexOf('_') + 1 + 43);

function assertShowsNoToken(output: string, tokens: string[]): void {
  for (const token of tokens) {
    assert.ok(!output.includes(token), 'output holds a full token');
    const body = bodyOf(token);
    for (let i = 0; i + 12 <= body.length; i++) {
      assert.ok(!output.includes(body.slice(i, i + 12)), `output holds 12 characters of a token's secret part: ${body.slice(i, i + 12)}`);
    }
  }
}

forEachBackend('the ugs command-line tool', (backend) => {
  let database: TestDatabase;
  let env: Record<string, string>;
  let server: ServerProcess;
  const issuedTokens: string[] = [];
  let acmeTokens = 0; // how many tokens this suite issued to the account acme

  // The commands run in this process (helpers/ugs-in-process.ts); the binary itself runs in the
  // tests of `ugs migrate`, `npx ugs` and `npm run ugs` below.
  const ugs = (...args: string[]) => runUgsHere(args, env);
  async function createToken(...args: string[]): Promise<{ id: number; token: string; [key: string]: unknown }> {
    const r = await ugs('token', 'create', ...args, '--json');
    assert.equal(r.code, 0, r.stderr);
    const issued = JSON.parse(r.stdout);
    issuedTokens.push(issued.token);
    if (issued.account === 'acme') acmeTokens++;
    return issued;
  }
  async function tokenCount(account: string): Promise<number> {
    const r = await ugs('token', 'list', '--account', account, '--json');
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout).length;
  }

  const secretKey = crypto.randomBytes(32).toString('base64');
  before(async () => {
    database = await createTestDatabase(backend);
    env = { DATABASE_URL: database.url };
    server = await spawnServer({ ...env, UGS_SECRET_KEY: secretKey });
  });

  after(async () => {
    await server?.stop('SIGTERM');
    await database?.drop();
  });

  it('migrate applies the schema to an empty database, then reports it up to date', async () => {
    const fresh = await createTestDatabase(backend);
    try {
      const first = await runUgs(['migrate'], { DATABASE_URL: fresh.url });
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, /applied: 0001-initial/);
      const second = await runUgs(['migrate'], { DATABASE_URL: fresh.url });
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stdout, /up to date/);
    } finally {
      await fresh.drop();
    }
  });

  it('account create makes an account, and refuses an existing one or a bad slug with a clear message', async () => {
    const created = await ugs('account', 'create', 'initech', '--json');
    assert.equal(created.code, 0, created.stderr);
    assert.equal(JSON.parse(created.stdout).slug, 'initech');

    const again = await ugs('account', 'create', 'initech');
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /account "initech" already exists/);

    const bad = await ugs('account', 'create', 'Not_A_Slug');
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /account slug is 1-63 characters/);
  });

  it('account levels declares level names the API then enforces, shows them, refuses to drop a level in use, and --clear forgets them', async () => {
    const { token } = await createToken('--account', 'levels-co');
    const declared = await ugs('account', 'levels', 'levels-co', 'Customer,User', '--json');
    assert.equal(declared.code, 0, declared.stderr);
    assert.deepEqual(JSON.parse(declared.stdout), { account: 'levels-co', levels: ['Customer', 'User'] });
    assert.match((await ugs('account', 'levels', 'levels-co')).stdout, /levels: Customer > User/);
    const create = (level: string) =>
      httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: `lv-${level}`, hierarchy_level: level } });
    const refused = await create('Team');
    assert.equal(refused.status, 400, refused.text);
    assert.match(refused.body.error.message, /one of the account's levels: Customer, User/);
    assert.equal((await create('User')).status, 201);
    const narrowed = await ugs('account', 'levels', 'levels-co', 'Customer');
    assert.notEqual(narrowed.code, 0);
    assert.match(narrowed.stderr, /use levels not in the list: User/);
    for (const bad of ['A,A', 'A,,B', 'L'.repeat(65), Array.from({ length: 11 }, (_, i) => `L${i}`).join(',')]) {
      const r = await ugs('account', 'levels', 'levels-co', bad);
      assert.notEqual(r.code, 0, bad);
      assert.match(r.stderr, /1 to 10 distinct comma-separated names/);
    }
    assert.match((await ugs('account', 'levels', 'no-such-account')).stderr, /no account "no-such-account"/);
    const cleared = await ugs('account', 'levels', 'levels-co', '--clear');
    assert.equal(cleared.code, 0, cleared.stderr);
    assert.match(cleared.stdout, /declares no levels/);
    assert.equal((await create('Team')).status, 201, 'any level name once the levels are cleared');
  });

  it('token create prints the token once, --json gives id and token, and a missing account is created', async () => {
    const text = await ugs('token', 'create', '--account', 'acme', '--name', 'ci');
    assert.equal(text.code, 0, text.stderr);
    const shown = text.stdout.match(API_TOKEN) ?? [];
    assert.equal(shown.length, 1, 'the token is printed exactly once');
    assert.match(text.stdout, /created account acme/);
    assert.match(text.stdout, /shown only this once/);
    issuedTokens.push(shown[0]);
    acmeTokens++;
    const works = await httpRequest(server.baseUrl, 'GET', '/api/users', { token: shown[0] });
    assert.equal(works.status, 200);

    const json = await createToken('--account', 'acme');
    assert.equal(typeof json.id, 'number');
    assert.match(json.token, /^ugs_api_[0-9A-Za-z]{49}$/);
    assert.equal(json.account_created, false, 'acme exists by now');
    assert.deepEqual(json.scopes, ['read', 'write'], 'both scopes by default');

    const fresh = await createToken('--account', 'brand-new-co');
    assert.equal(fresh.account_created, true);
    assert.equal(await tokenCount('brand-new-co'), 1);
  });

  it('token create --scopes read issues a token that can read but not create', async () => {
    const reader = await createToken('--account', 'acme', '--scopes', 'read');
    assert.deepEqual(reader.scopes, ['read']);
    assert.equal((await httpRequest(server.baseUrl, 'GET', '/api/users', { token: reader.token })).status, 200);
    const create = await httpRequest(server.baseUrl, 'POST', '/api/user', { token: reader.token, body: { user_group_id: 'by-reader' } });
    assert.equal(create.status, 403);
    assert.equal(create.body.error.code, 'insufficient_scope');
  });

  it("token create --scopes read,write,admin grants admin: the token manages the account's API tokens over HTTP", async () => {
    const admin = await createToken('--account', 'acme', '--scopes', 'read,write,admin');
    assert.deepEqual(admin.scopes, ['read', 'write', 'admin']);
    const listed = await httpRequest(server.baseUrl, 'GET', '/api/api_tokens', { token: admin.token });
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    assert.ok(listed.body.api_tokens.some((token: { id: number }) => token.id === admin.id));
    const withoutAdmin = await createToken('--account', 'acme');
    const refused = await httpRequest(server.baseUrl, 'GET', '/api/api_tokens', { token: withoutAdmin.token });
    assert.equal(refused.body.error.code, 'insufficient_scope', 'the default scopes are read,write, without admin');
  });

  it('token create --env Testing restricts the token to Testing and makes it the default', async () => {
    const testing = await createToken('--account', 'acme', '--env', 'Testing');
    const created = await httpRequest(server.baseUrl, 'GET', '/api/user', { token: testing.token, body: { user_group_id: 'env-t' } });
    assert.equal(created.status, 201);
    assert.equal(created.body.user_group.api_environment_tag, 'Testing');
    const customer = await httpRequest(server.baseUrl, 'GET', '/api/user', {
      token: testing.token,
      body: { user_group_id: 'env-t', api_environment_tag: 'Customer' },
    });
    assert.equal(customer.status, 403);
    assert.equal(customer.body.error.code, 'environment_forbidden');
  });

  it('token create --default-env Testing picks Testing when a request names no environment, and allows Customer', async () => {
    const token = await createToken('--account', 'acme', '--default-env', 'Testing');
    assert.equal(token.default_environment, 'Testing');
    const implicit = await httpRequest(server.baseUrl, 'POST', '/api/user', { token: token.token, body: { user_group_id: 'env-d' } });
    assert.equal(implicit.status, 201);
    assert.equal(implicit.body.user_group.api_environment_tag, 'Testing');
    const explicit = await httpRequest(server.baseUrl, 'POST', '/api/user', {
      token: token.token,
      body: { user_group_id: 'env-d', api_environment_tag: 'Customer' },
    });
    assert.equal(explicit.status, 201);
    assert.equal(explicit.body.user_group.api_environment_tag, 'Customer');
  });

  it('token create --expires-in 1s issues a token that is refused after it expires', async () => {
    const before = Date.now();
    const shortLived = await createToken('--account', 'acme', '--expires-in', '1s');
    const expiresAt = Date.parse(String(shortLived.expires_at));
    assert.ok(expiresAt > before && expiresAt <= Date.now() + 1000, `expires_at ${shortLived.expires_at} is about a second after issue`);
    await sleep(Math.max(0, expiresAt - Date.now()) + 100);
    const refused = await httpRequest(server.baseUrl, 'GET', '/api/users', { token: shortLived.token });
    assert.equal(refused.status, 401);
    assert.equal(refused.body.error.code, 'invalid_api_token');
  });

  it('token create refuses bad input with a non-zero exit and a clear message', async () => {
    const cases: [string[], RegExp][] = [
      [['--account', 'acme', '--scopes', 'root'], /scopes are a comma-separated list of read, write, admin/],
      [['--account', 'acme', '--env', 'Prod'], /'Prod' is invalid\. Allowed choices are Customer, Testing, any/],
      [['--account', 'acme', '--expires-in', 'forever'], /a duration is a number and a unit/],
      [['--account', 'acme', '--expires-in', '999999999w'], /a lifetime is at most 36500d \(100 years\); leave --expires-in out/],
      [['--account', 'Bad_Slug!'], /account slug is 1-63 characters/],
      [['--account', 'acme', '--env', 'Customer', '--default-env', 'Testing'], /--default-env Testing contradicts --env Customer/],
    ];
    const results = await Promise.all(cases.map(([args]) => ugs('token', 'create', ...args)));
    for (const [i, r] of results.entries()) {
      const [args, message] = cases[i];
      assert.equal(r.code, 2, `token create ${args.join(' ')} exits 2 (usage error); got ${r.code}`);
      assert.match(r.stderr, message, `token create ${args.join(' ')}`);
      assert.doesNotMatch(r.stdout, API_TOKEN);
    }
  });

  it('token list shows the tokens of an account without ever showing a token', async () => {
    const listed = await createToken('--account', 'acme', '--name', 'listed');
    const text = await ugs('token', 'list', '--account', 'acme');
    const json = await ugs('token', 'list', '--account', 'acme', '--json');
    assert.equal(text.code, 0, text.stderr);
    assert.equal(json.code, 0, json.stderr);
    assert.ok(issuedTokens.length >= 5);
    assertShowsNoToken(text.stdout + text.stderr + json.stdout + json.stderr, issuedTokens);
    const rows = JSON.parse(json.stdout);
    assert.equal(rows.length, acmeTokens, 'every token issued to acme is listed, and the refused commands issued none');
    const row = rows.find((r: { id: number }) => r.id === listed.id);
    assert.ok(row, 'the new token is listed');
    assert.equal(row.name, 'listed');
    assert.equal(row.status, 'active');
    assert.ok(listed.token.startsWith(row.token_start), 'a short, non-secret start identifies it');
    assert.equal(row.token, undefined);
    assert.equal(row.token_hash, undefined);
    assert.match(text.stdout, new RegExp(`^${listed.id}\\t${row.token_start}…`, 'm'));
  });

  it('token revoke makes the server refuse the token with 401, and a second revoke fails clearly', async () => {
    const victim = await createToken('--account', 'acme');
    assert.equal((await httpRequest(server.baseUrl, 'GET', '/api/users', { token: victim.token })).status, 200);
    const revoked = await ugs('token', 'revoke', String(victim.id));
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.match(revoked.stdout, new RegExp(`revoked API token ${victim.id}`));
    // Within a second on every instance (the server caches lookups for at most 500 ms).
    const deadline = Date.now() + 1500;
    let refused: Awaited<ReturnType<typeof httpRequest>>;
    do {
      refused = await httpRequest(server.baseUrl, 'GET', '/api/users', { token: victim.token });
      if (refused.status === 401) break;
      await sleep(50);
    } while (Date.now() < deadline);
    assert.equal(refused.status, 401);
    assert.equal(refused.body.error.code, 'invalid_api_token');

    const list = JSON.parse((await ugs('token', 'list', '--account', 'acme', '--json')).stdout);
    assert.equal(list.find((r: { id: number }) => r.id === victim.id).status, 'revoked');

    const twice = await ugs('token', 'revoke', String(victim.id));
    assert.notEqual(twice.code, 0);
    assert.match(twice.stderr, new RegExp(`no active API token with id ${victim.id}`));
  });

  it('token revoke of the last admin token that never expires says the account has none left and how to make one; other revocations say nothing', async () => {
    const admin = await createToken('--account', 'lastadmin', '--scopes', 'read,write,admin');
    const plain = await createToken('--account', 'lastadmin');
    const quiet = await ugs('token', 'revoke', String(plain.id));
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.equal(quiet.stderr, '', 'a token without admin leaves the admin token: nothing to say');
    const last = await ugs('token', 'revoke', String(admin.id));
    assert.equal(last.code, 0, last.stderr);
    assert.match(last.stdout, new RegExp(`revoked API token ${admin.id}`));
    assert.equal(
      last.stderr,
      'ugs: account lastadmin has no admin token left that is unrestricted and never expires: to manage its tokens over HTTP, create one: npx ugs token create --account lastadmin --scopes read,write,admin\n',
    );
  });

  it('token revoke takes an id in plain digits only: 1e3, 0x1, 1.0 or -1 is a usage error that revokes nothing', async () => {
    const revocations = async () =>
      JSON.parse((await ugs('token', 'list', '--account', 'acme', '--json')).stdout).map((r: { id: number; revoked_at: string | null }) => [
        r.id,
        r.revoked_at,
      ]);
    const before = await revocations();
    for (const id of ['1e3', '0x1', '1.0', '-1', '0', ' 1', '1_000', '99999999999999999']) {
      const r = await ugs('token', 'revoke', id);
      assert.equal(r.code, 2, `revoke ${JSON.stringify(id)}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /a token id \(see: ugs token list\) is a whole number from 1 to \d+, in plain digits/);
    }
    assert.deepEqual(await revocations(), before, 'nothing was revoked');
  });

  it('audit prints the history of an account and of one user group, newest first, without tokens', async () => {
    const actor = await createToken('--account', 'acme');
    const created = await httpRequest(server.baseUrl, 'POST', '/api/user', { token: actor.token, body: { user_group_id: 'audited' } });
    assert.equal(created.status, 201);
    const updated = await httpRequest(server.baseUrl, 'PUT', '/api/user', { token: actor.token, body: { user_group_id: 'audited', name: 'Renamed' } });
    assert.equal(updated.status, 200);
    const rotated = await httpRequest(server.baseUrl, 'POST', '/api/user', {
      token: actor.token,
      body: { current_token: created.body.user_group.token },
    });
    assert.equal(rotated.status, 200);

    const json = await ugs('audit', '--account', 'acme', '--user-group-id', 'audited', '--json');
    assert.equal(json.code, 0, json.stderr);
    const entries = JSON.parse(json.stdout);
    assert.deepEqual(
      entries.map((e: { action: string }) => e.action),
      ['user_group.rotate', 'user_group.update', 'user_group.create'],
    );
    assert.deepEqual(JSON.parse(entries[1].changed_fields), ['name']);
    for (const e of entries) assert.equal(Number(e.actor_token_id), actor.id);
    assert.equal(entries[0].request_id, rotated.headers['x-request-id']);

    const text = await ugs('audit', '--account', 'acme');
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /user_group\.rotate\tCustomer\/audited/);
    assert.match(text.stdout, new RegExp(`api_token\\.issue\\ttoken ${actor.id}\\t`));
    assertShowsNoToken(json.stdout + text.stdout, [...issuedTokens, created.body.user_group.token, rotated.body.user_group.token]);
  });

  it('webhooks create, list, enable and delete an endpoint of an account, each change in ugs audit; an unknown endpoint is a usage error (exit 2)', async () => {
    // Creating one seals its secret: the command needs the server's key.
    const webhooks = (...args: string[]) => runUgsHere(['webhooks', ...args], { ...env, UGS_SECRET_KEY: secretKey });
    assert.equal((await ugs('account', 'create', 'hooks')).code, 0);
    // A host that does not resolve is accepted (docs/api.md, "Webhooks"): nothing is sent here.
    const created = await webhooks('create', '--account', 'hooks', '--url', 'https://hooks.ugs-cli-test.invalid/in', '--json');
    assert.equal(created.code, 0, created.stderr);
    const { id, secret } = JSON.parse(created.stdout);
    assert.match(secret, /^whsec_/);
    const enabled = await webhooks('enable', '--account', 'hooks', String(id), '--json');
    assert.equal(enabled.code, 0, enabled.stderr);
    assert.equal(JSON.parse(enabled.stdout).status, 'enabled');
    assert.ok(!enabled.stdout.includes(secret), 'enable never shows the secret');
    const listed = await webhooks('list', '--account', 'hooks');
    assert.match(listed.stdout, new RegExp(`^${id}\\tenabled\\t`, 'm'));
    const unknown = await webhooks('enable', '--account', 'hooks', '999999');
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no webhook endpoint with id 999999/);
    assert.equal((await webhooks('delete', '--account', 'hooks', String(id))).code, 0);
    const audit = await ugs('audit', '--account', 'hooks');
    assert.equal(audit.code, 0, audit.stderr);
    for (const action of ['create', 'delete']) assert.match(audit.stdout, new RegExp(`\\twebhook_endpoint\\.${action}\\twebhook endpoint ${id}\\t`));
    assert.ok(!audit.stdout.includes(secret), 'the history never holds the secret');
  });

  // These two do not depend on the database: run once, on the first backend.
  const once = backend === BACKENDS[0] ? {} : { skip: 'does not depend on the database (run on the first backend)' };

  it('keys embed rotate --alg adds a signing key of that algorithm, which the running server publishes at once and signs with from its activation; list shows both with their algorithms', async () => {
    const { token } = await createToken('--account', 'acme');
    await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'cli-embed' } });
    const embedToken = async () => {
      const res = await httpRequest(server.baseUrl, 'POST', '/api/embed_token', { token, body: { user_group_id: 'cli-embed', expires_in_seconds: 600 } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.embed_token;
    };
    const first = decodeProtectedHeader(await embedToken());
    const before = first.kid;
    assert.equal(first.alg, 'ES256', 'a new deployment signs with ES256');
    const keysEnv = { ...env, UGS_SECRET_KEY: secretKey };

    const rotated = await runUgsHere(['keys', 'embed', 'rotate', '--alg', 'RS256', '--activate-in', '0s', '--json'], keysEnv);
    assert.equal(rotated.code, 0, rotated.stderr);
    const { kid, algorithm, activates_at } = JSON.parse(rotated.stdout);
    assert.equal(algorithm, 'RS256');
    assert.ok(Math.abs(Date.parse(activates_at) - Date.now()) < 60_000);
    // Within the server's one-second copy of the key table: published, then signing.
    await eventually(`the server signs with the new key ${kid}`, async () => decodeProtectedHeader(await embedToken()).kid === kid);
    assert.equal(decodeProtectedHeader(await embedToken()).alg, 'RS256');
    const jwks = await httpRequest(server.baseUrl, 'GET', '/.well-known/jwks.json');
    assert.deepEqual(jwks.body.keys.map((key: { kid: string }) => key.kid).sort(), [before, kid].sort(), 'the old key stays published while its tokens live');

    const listed = await runUgsHere(['keys', 'embed', 'list', '--json'], keysEnv);
    assert.equal(listed.code, 0, listed.stderr);
    const keys = JSON.parse(listed.stdout) as { kid: string; algorithm: string; retired_at: string | null; signed_until: string }[];
    assert.deepEqual(
      keys.map((k) => k.kid),
      [kid, before],
    );
    assert.deepEqual(
      keys.map((k) => k.algorithm),
      ['RS256', 'ES256'],
    );
    const listedText = await runUgsHere(['keys', 'embed', 'list'], keysEnv);
    assert.match(listedText.stdout, new RegExp(`^${kid}\tRS256\t`, 'm'));
    assert.match(listedText.stdout, new RegExp(`^${before}\tES256\t`, 'm'));
    assert.equal(keys[0].retired_at, null);
    assert.equal(keys[1].retired_at, activates_at);
    assert.ok(Date.parse(keys[1].signed_until) >= Date.now() + 590_000, 'published until its last token expires');
    assert.ok(!listed.stdout.includes('private') && !listed.stdout.includes('"d"'), 'no private key is printed');

    const bad = await runUgsHere(['keys', 'embed', 'rotate', '--activate-in', 'soon'], keysEnv);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /a duration is a number and a unit/);
    const symmetric = await runUgsHere(['keys', 'embed', 'rotate', '--alg', 'HS256'], keysEnv);
    assert.equal(symmetric.code, 2, 'only ES256, RS256 and EdDSA');
    assert.match(symmetric.stderr, /Allowed choices are ES256, RS256, EdDSA/);

    // An EdDSA key is published only in the set that asks for it (docs/api.md, "Keys"): the rotation says so, and when it will sign.
    const eddsa = await runUgs(['keys', 'embed', 'rotate', '--alg', 'EdDSA', '--activate-in', '1h', '--json'], keysEnv);
    assert.equal(eddsa.code, 0, eddsa.stderr);
    const pending = JSON.parse(eddsa.stdout) as { kid: string; activates_at: string };
    assert.match(eddsa.stderr, /EdDSA keys are published only at \/\.well-known\/jwks\.json\?alg=ES256,RS256,EdDSA, not at \/\.well-known\/jwks\.json/);
    assert.ok(eddsa.stderr.includes(`from ${pending.activates_at}`), eddsa.stderr);
    await eventually('the EdDSA key in the set that asks for it', async () =>
      (await httpRequest(server.baseUrl, 'GET', '/.well-known/jwks.json?alg=ES256,RS256,EdDSA')).body.keys.some(
        (key: { kid: string }) => key.kid === pending.kid,
      ),
    );
    const listedDefault = await httpRequest(server.baseUrl, 'GET', '/.well-known/jwks.json');
    assert.deepEqual(listedDefault.body.keys.map((key: { kty: string }) => key.kty).sort(), ['EC', 'RSA'], 'the default set lists no OKP key');
    const rsa = await runUgs(['keys', 'embed', 'rotate', '--alg', 'RS256', '--activate-in', '1h'], keysEnv);
    assert.equal(rsa.stderr, '', 'no warning for a key every verifier reads');
  });

  it('--help on every command exits 0 and prints its usage', once, async () => {
    const paths = commandPaths(buildCli());
    assert.ok(paths.length >= 9, `commands: ${paths.map((p) => p.join(' ')).join(', ')}`);
    const results = await Promise.all(paths.map((p) => ugs(...p, '--help')));
    for (const [i, r] of results.entries()) {
      const name = ['ugs', ...paths[i]].join(' ');
      assert.equal(r.code, 0, `${name} --help: ${r.stderr}`);
      assert.match(r.stdout, new RegExp(`^Usage: ${name}`), `${name} --help prints its usage`);
    }
  });

  it("runs from the root of a checkout (the tests' own build) as `npx ugs` and as `npm run --silent ugs --`", once, async () => {
    const npxHelp = await runIn('npx', ['ugs', '--help'], env);
    assert.equal(npxHelp.code, 0, npxHelp.stderr);
    assert.match(npxHelp.stdout, /^Usage: ugs /);
    const npmHelp = await runIn('npm', ['run', '--silent', 'ugs', '--', '--help'], env);
    assert.equal(npmHelp.code, 0, npmHelp.stderr);
    assert.match(npmHelp.stdout, /^Usage: ugs /, 'npm --silent adds nothing to the output');
  });

  it('npx ugs and npm run ugs read the same DATABASE_URL as the server', async () => {
    const viaNpx = await runIn('npx', ['ugs', 'token', 'list', '--account', 'acme', '--json'], env);
    assert.equal(viaNpx.code, 0, viaNpx.stderr);
    const viaNpm = await runIn('npm', ['run', '--silent', 'ugs', '--', 'token', 'list', '--account', 'acme', '--json'], env);
    assert.equal(viaNpm.code, 0, viaNpm.stderr);
    const rows = JSON.parse(viaNpx.stdout);
    assert.deepEqual(JSON.parse(viaNpm.stdout), rows);
    assert.ok(rows.length >= 5, 'both read the test database');
    assertShowsNoToken(viaNpx.stdout, issuedTokens);
  });
});
