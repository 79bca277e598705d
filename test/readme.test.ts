// The manual runs: every `sh` block of README.md, then of docs/api.md, then of docs/cli.md, in
// order, against one fresh server started as the README starts it, with its first-start token,
// after the banner's own "Try it" command (a newcomer runs that first, so it must not change
// what the README's answers show), each checked as test/helpers/walk-through.ts reads the
// pages. The commands run in a scratch checkout: its data/ is the server's,
// its examples/ the repository's, and `npx ugs` is the tests' own build. Then the backup steps
// of docs/operations.md, and, with TEST_POSTGRES_URL, the PostgreSQL steps of
// docs/deployment.md, which create their database and start the server on it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { POSTGRES_URL } from './helpers/backends.ts';
import { ROOT, TEST_BUILD, httpRequest, reapOnExit, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { userDocFiles } from './helpers/source-text.ts';
import { GENEROUS_WAIT_MS } from './helpers/wait.ts';
import { WalkThrough, runStep, shBlocks, walkThroughSteps } from './helpers/walk-through.ts';

/**
 * The pages whose `sh` examples run, in this order, on one server and database: the README's
 * calls as a newcomer meets them, then the reference's and the command-line tool's, which go on
 * from the groups made before them (CONTRIBUTING.md, "The docs are tested too").
 */
const WALK_THROUGH = ['README.md', 'docs/api.md', 'docs/cli.md'];

/**
 * The commands of the ```bash block that follows `marker` (an HTML comment that says the test
 * runs it) in a Markdown file, without their comments.
 */
function markedCommands(file: string, marker: string): string[] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  const match = new RegExp(`<!-- ${marker}[^>]*-->\\s*\`\`\`bash\\n([\\s\\S]*?)^\`\`\`$`, 'm').exec(text);
  assert.ok(match, `${file} has the block marked "${marker}"`);
  return match[1]
    .split('\n')
    .map((line) => line.replace(/\s+#[^'"]*$/, '').trim())
    .filter((line) => line && !line.startsWith('#'));
}

describe('the examples of the manual', () => {
  it('docs: every sh example that calls the service ($UGS) or runs ugs is on a page the walk-through runs', () => {
    const pages = userDocFiles();
    const outside = pages
      .filter((page) => !WALK_THROUGH.includes(page))
      .flatMap((page) =>
        shBlocks(page)
          .filter(({ block, notRun }) => notRun === undefined && /\$UGS\b|\bugs /.test(block))
          .map(({ block }) => `${page}: ${block}`),
      );
    assert.deepEqual(outside, [], `move them to one of ${WALK_THROUGH.join(', ')}, or say why they are not run`);
  });
});

describe(`the walk-through: ${WALK_THROUGH.join(', ')}`, () => {
  // A scratch checkout: where a newcomer runs the manual's commands.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-readme-'));
  fs.cpSync(path.join(ROOT, 'examples'), path.join(dir, 'examples'), { recursive: true, filter: (source) => !source.includes('node_modules') });
  fs.mkdirSync(path.join(dir, 'home'));
  let server: ServerProcess;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOME: path.join(dir, 'home'),
    DATABASE_URL: '', // the default, sqlite:./data/ugs.sqlite, in the scratch checkout
    UGS_KEY_FILE: '',
    UGS_SECRET_KEY: '',
  };
  /** What every command printed so far, and first the banner: where an API token is shown. */
  const printed: string[] = [];
  const walkThrough = new WalkThrough(env, dir, printed);
  const run = (command: string) => runStep(command, env, dir);

  before(async () => {
    // As `npm start` in the checkout: the database and its key file in ./data/.
    server = await spawnServer({ DATABASE_URL: 'sqlite:./data/ugs.sqlite', UGS_KEY_FILE: '', UGS_SECRET_KEY: '', UGS_BOOTSTRAP: 'true' }, { cwd: dir });
    await server.waitForOutput(/"msg":"started"/);
    env.UGS = server.baseUrl;
    printed.push(server.output());
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("README: after the first-start banner's own example, every sh example runs as written, in order, and answers what the README says", async () => {
    // A newcomer tries the banner's example first: it must leave nothing the README's answers would show.
    const banner = /^ Try it\b.*\n\s+(curl .*)$/m.exec(server.output());
    assert.ok(banner, `the banner has a "Try it" command:\n${server.output()}`);
    const tried = await run(banner[1]);
    assert.equal(tried.code, 0, tried.stderr);
    assert.match(tried.stdout, /\n200$/, `the banner's example works as printed:\n${tried.stdout}`);

    const steps = walkThroughSteps('README.md');
    assert.ok(steps.filter((s) => s.expect).length >= 6, `found ${steps.length} commands`);
    await walkThrough.walk('README.md');
  });

  it('docs/api.md: every sh example runs as written, in order, after the README, and answers what the reference says', async () => {
    assert.ok(walkThroughSteps('docs/api.md').filter((s) => s.expect).length >= 15);
    await walkThrough.walk('docs/api.md');
  });

  it('docs/cli.md: every sh example runs as written, in order, after docs/api.md, and every command succeeds', async () => {
    assert.ok(walkThroughSteps('docs/cli.md').length >= 25);
    await walkThrough.walk('docs/cli.md');
  });

  it('docs/operations.md: the backup steps run as written, after the walk-through, and the copy is a database of its own', async () => {
    for (const command of markedCommands('docs/operations.md', 'backup steps')) {
      const result = await run(command);
      assert.equal(result.code, 0, `${command}\n${result.stdout}\n${result.stderr}`);
      if (command.includes('ugs backup')) assert.match(result.stdout, /^backup written to /, command);
    }
    const copies = fs.readdirSync(path.join(dir, 'home', 'ugs-backups'));
    assert.equal(copies.length, 1, copies.join(', '));
    assert.match(copies[0], /^ugs-\d{4}-\d{2}-\d{2}\.sqlite$/);
  });
});

describe('docs/deployment.md on PostgreSQL', {
  skip: POSTGRES_URL ? false : 'TEST_POSTGRES_URL is not set: the PostgreSQL steps of docs/deployment.md did not run',
}, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-readme-pg-'));
  const admin = POSTGRES_URL ? new URL(POSTGRES_URL) : undefined;
  const name = `ugs_readme_${process.pid}_${Date.now().toString(36)}`;
  after(async () => {
    if (admin) {
      const client = new pg.Client({ connectionString: admin.toString() });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('docs/deployment.md: the PostgreSQL steps create the database and a key file outside the checkout, and npm start then serves on it with the first-start token', async () => {
    // As written, but on the test's server and in a database of its own name.
    const { hostname, port, username } = admin!;
    const commands = markedCommands('docs/deployment.md', 'postgres steps').map((command) => {
      const onTestServer = command
        .replace(/-h 127\.0\.0\.1 -p 5432 -U postgres ugs$/, `-h ${hostname} -p ${port || 5432} -U ${username} ${name}`)
        .replace(/postgres:\/\/postgres@127\.0\.0\.1:5432\/ugs\b/, `postgres://${username}@${hostname}:${port || 5432}/${name}`);
      if (/createdb|postgres:\/\//.test(command)) assert.ok(onTestServer.includes(name), `the database name was replaced in: ${command}`);
      return onTestServer;
    });
    const start = commands.pop()!;
    assert.match(start, /npm start$/, 'the steps end with npm start');
    const env = { ...process.env, HOME: dir, PORT: '0', HOST: '127.0.0.1', UGS_SECRET_KEY: '', UGS_KEY_FILE: '', UGS_BOOTSTRAP: '' };
    for (const command of commands) {
      const result = await runStep(command, env, dir);
      assert.equal(result.code, 0, `${command}\n${result.stdout}\n${result.stderr}`);
    }
    const keyFile = path.join(dir, '.config', 'ugs', 'secret.key');
    assert.equal(fs.statSync(keyFile).mode & 0o777, 0o600, 'the key file is readable by its owner only');
    const key = fs.readFileSync(keyFile, 'utf8');
    const again = await runStep(commands[1], env, dir);
    assert.notEqual(again.code, 0, 'making the key again fails');
    assert.equal(fs.readFileSync(keyFile, 'utf8'), key, 'and never overwrites it');

    // npm start, in the tests' own build of the checkout.
    const npm = reapOnExit(spawn('bash', ['-c', start], { cwd: TEST_BUILD, env, stdio: ['ignore', 'pipe', 'pipe'] }));
    let output = '';
    npm.stdout.on('data', (c) => (output += c));
    npm.stderr.on('data', (c) => (output += c));
    const exited = new Promise<number | null>((resolve) => npm.on('exit', resolve));
    try {
      const started = Date.now();
      while (!/Server listening at (http:\/\/[\d.]+:\d+)/.test(output) || !/^\s+(ugs_api_\S+)$/m.test(output)) {
        assert.ok(Date.now() - started < GENEROUS_WAIT_MS && npm.exitCode === null, `npm start did not serve:\n${output}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const baseUrl = /Server listening at (http:\/\/[\d.]+:\d+)/.exec(output)![1];
      const token = /^\s+(ugs_api_\S+)$/m.exec(output)![1];
      const created = await httpRequest(baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'example_1' } });
      assert.equal(created.status, 201, created.text);
    } finally {
      npm.kill('SIGTERM');
    }
    assert.equal(await exited, 0, output);
  });
});
