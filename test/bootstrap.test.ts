// First start on an empty database (docs/api.md, "Tokens"): an account `default` and one
// read,write,admin API token, printed once on stderr, so a new user can make a call at once.
import { it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { forEachBackend } from './helpers/harness.ts';
import { ROOT, SERVER_ENTRY, httpRequest, reapOnExit, runUgs } from './helpers/processes.ts';
import { PROCESS_START_MS, eventually } from './helpers/wait.ts';

const API_TOKEN = /ugs_api_[0-9A-Za-z]{49}/g;

interface Server {
  baseUrl: string;
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  stop(): Promise<number | null>;
}

/** A server process whose stdout and stderr are kept apart (the banner belongs on stderr). */
async function startServer(env: Record<string, string>): Promise<Server> {
  const child = reapOnExit(
    spawn(process.execPath, [SERVER_ENTRY], {
      cwd: ROOT,
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c) => (stdout += c));
  child.stderr!.on('data', (c) => (stderr += c));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`server did not print its listening line within ${PROCESS_START_MS / 1000} s of its start:\n${stdout}\n${stderr}`)),
      PROCESS_START_MS,
    );
    const check = () => {
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout!.on('data', check);
    child.on('exit', () => {
      clearTimeout(timer);
      reject(new Error(`server exited before listening:\n${stdout}\n${stderr}`));
    });
  });
  return {
    baseUrl,
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Waits until the server has finished its start (the bootstrap runs right after listening): its "started" line. */
async function settled(server: Server): Promise<void> {
  await eventually('the "started" log line', () => /"msg":"started"/.test(server.stdout()));
  const ready = await httpRequest(server.baseUrl, 'GET', '/readyz');
  assert.equal(ready.status, 200);
}

const tokensIn = (text: string) => new Set(text.match(API_TOKEN) ?? []);

forEachBackend('bootstrap on an empty database', (backend) => {
  const databases: TestDatabase[] = [];
  const servers: Server[] = [];
  const secretKey = crypto.randomBytes(32).toString('base64');

  async function emptyDatabase(): Promise<string> {
    const database = await createTestDatabase(backend);
    databases.push(database);
    return database.url;
  }
  async function start(env: Record<string, string>): Promise<Server> {
    const server = await startServer({ UGS_SECRET_KEY: secretKey, ...env });
    servers.push(server);
    return server;
  }
  async function defaultTokens(databaseUrl: string): Promise<{ id: number; name: string; scopes: string; status: string }[]> {
    const listed = await runUgs(['token', 'list', '--account', 'default', '--json'], { DATABASE_URL: databaseUrl });
    assert.equal(listed.code, 0, listed.stderr);
    return JSON.parse(listed.stdout);
  }

  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    for (const d of databases) await d.drop();
  });

  it('the first start with UGS_BOOTSTRAP unset prints one working API token on stderr; the second start prints none', async () => {
    const url = await emptyDatabase();
    const first = await start({ DATABASE_URL: url, UGS_BOOTSTRAP: '' }); // empty: as if unset
    await settled(first);
    const shown = tokensIn(first.stderr());
    assert.equal(shown.size, 1, `one token in the banner:\n${first.stderr()}`);
    const [token] = shown;
    assert.match(first.stderr(), /shown only this once/);
    assert.equal(first.stderr().split(token).length - 1, 2, 'the token appears once, plus once in the example curl command');
    assert.ok(!first.stdout().includes(token), 'the token never reaches the JSON logs on stdout');

    const call = await httpRequest(first.baseUrl, 'GET', '/api/user?user_group_id=example_1', { token });
    assert.equal(call.status, 201, JSON.stringify(call.body));
    assert.equal(call.body.new_user_group, true);

    const tokens = await defaultTokens(url);
    assert.equal(tokens.length, 1);
    assert.equal(tokens[0].scopes, 'admin,read,write');
    assert.equal(tokens[0].status, 'active');
    assert.ok(token.startsWith((tokens[0] as unknown as { token_start: string }).token_start));

    assert.equal(await first.stop(), 0);
    const second = await start({ DATABASE_URL: url, UGS_BOOTSTRAP: 'true' });
    await settled(second);
    assert.equal(tokensIn(second.stderr() + second.stdout()).size, 0, 'no token on the second start');
    assert.equal((await defaultTokens(url)).length, 1, 'no second bootstrap token');
    // The bootstrap token still works on the second instance.
    assert.equal((await httpRequest(second.baseUrl, 'GET', '/api/users', { token })).status, 200);
    assert.equal(await second.stop(), 0);
  });

  it("history: the first start's token was issued by the first start (actor first_start), not by the command-line tool; ugs and API tokens say so too", async () => {
    const url = await emptyDatabase();
    const server = await start({ DATABASE_URL: url, UGS_BOOTSTRAP: 'true' });
    await settled(server);
    const [token] = tokensIn(server.stderr());
    const byCli = await runUgs(['token', 'create', '--account', 'default', '--name', 'cli', '--json'], { DATABASE_URL: url });
    assert.equal(byCli.code, 0, byCli.stderr);
    const byHttp = await httpRequest(server.baseUrl, 'POST', '/api/api_tokens', { token, body: { scopes: ['read'], name: 'http' } });
    assert.equal(byHttp.status, 201, byHttp.text);

    const history = await httpRequest(server.baseUrl, 'GET', '/api/api_tokens/history', { token });
    assert.equal(history.status, 200, history.text);
    const [first] = await defaultTokens(url);
    assert.deepEqual(
      history.body.entries.map((e: { api_token_id: number; actor: string; actor_token_id: number | null }) => [e.api_token_id, e.actor, e.actor_token_id]),
      [
        [byHttp.body.api_token.id, 'api_token', first.id],
        [JSON.parse(byCli.stdout).id, 'command_line', null],
        [first.id, 'first_start', null],
      ],
    );
    const audit = await runUgs(['audit', '--account', 'default'], { DATABASE_URL: url });
    assert.match(audit.stdout, new RegExp(`\\tapi_token\\.issue\\ttoken ${first.id}\\t\\tfirst_start\\t`));
  });

  it('UGS_BOOTSTRAP=false on an empty database prints no token and creates no account', async () => {
    const url = await emptyDatabase();
    const server = await start({ DATABASE_URL: url, UGS_BOOTSTRAP: 'false' });
    await settled(server);
    assert.equal(tokensIn(server.stderr() + server.stdout()).size, 0);
    const listed = await runUgs(['account', 'list', '--json'], { DATABASE_URL: url });
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(JSON.parse(listed.stdout), []);
  });

  it('two servers starting at once with UGS_BOOTSTRAP=true on one empty database issue exactly one bootstrap token', async () => {
    const url = await emptyDatabase();
    const pair = await Promise.all([start({ DATABASE_URL: url, UGS_BOOTSTRAP: 'true' }), start({ DATABASE_URL: url, UGS_BOOTSTRAP: 'true' })]);
    await Promise.all(pair.map(settled));
    const printed = pair.map((s) => tokensIn(s.stderr()));
    assert.deepEqual(
      printed.map((set) => set.size).sort(),
      [0, 1],
      `exactly one instance prints a token:\n--- 1:\n${pair[0].stderr()}\n--- 2:\n${pair[1].stderr()}`,
    );
    const tokens = await defaultTokens(url);
    assert.equal(tokens.length, 1, 'exactly one bootstrap token exists');
    const [token] = printed.find((set) => set.size === 1)!;
    for (const s of pair) assert.equal((await httpRequest(s.baseUrl, 'GET', '/api/users', { token })).status, 200);
  });
});
