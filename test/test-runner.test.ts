// The test command itself: a test file that fails with a server still running must end, and
// take the server with it. CI once waited 85 minutes on such a file (a second server that
// did not start left the first one running, which kept the file's process alive). And the run
// ends with the list of everything it skipped, and why.
import { it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createTestDatabase } from './helpers/backends.ts';
import { ROOT } from './helpers/processes.ts';
import { GENEROUS_WAIT_MS } from './helpers/wait.ts';

const database = await createTestDatabase('sqlite');
after(() => database.drop());

/** `npm test`'s own command (test/run-tests.ts), on one file instead of the tier's. */
function testCommand(file: string): string[] {
  const { scripts } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { test: string } };
  const words = scripts.test.split(/\s+/);
  assert.equal(words[0], 'node');
  return [...words.slice(1), file];
}

/** Alive, and not a zombie waiting for its new parent to collect it. */
function isRunning(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

it('test command: a test file that fails with a server still running ends, and its server with it', async () => {
  const pidFile = path.join(path.dirname(database.url.slice('sqlite:'.length)), 'server.pid');
  // NODE_TEST_CONTEXT would make the inner run think it is a file of this one, and skip its
  // files; with this run's UGS_TEST_RUN_ID, its sweep at the end would drop this run's databases.
  const { NODE_TEST_CONTEXT: _, UGS_TEST_RUN_ID: __, ...env } = process.env;
  const child = spawn(process.execPath, testCommand('test/helpers/fixtures/abandoned-server.ts'), {
    cwd: ROOT,
    env: { ...env, DATABASE_URL: database.url, SERVER_PID_FILE: pidFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  // A guard for this test only: without the fix the run never ends, and this says so instead of hanging too.
  const guard = setTimeout(() => child.kill('SIGKILL'), 90_000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));
  clearTimeout(guard);
  assert.equal(signal, null, `the run did not end by itself:\n${output}`);
  assert.equal(code, 1, `the failing test is reported as a failure:\n${output}`);
  assert.match(output, /failed before its cleanup/);
  const pid = Number(fs.readFileSync(pidFile, 'utf8'));
  for (let i = 0; i < GENEROUS_WAIT_MS / 100 && isRunning(pid); i++) await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(isRunning(pid), false, `the server it left (pid ${pid}) was ended with the run`);
});

it('test command: the run ends with a list of everything skipped and why: suites, tests, tests that skip themselves, parts of tests', async () => {
  const { NODE_TEST_CONTEXT: _, UGS_TEST_RUN_ID: __, ...env } = process.env;
  const child = spawn(process.execPath, testCommand('test/helpers/fixtures/skips.ts'), { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  assert.equal(code, 0, output);
  // The list of the slowest files (helpers/timing-reporter.ts) may follow on the same stream.
  const list = output.slice(output.lastIndexOf('\nSkipped: ')).split('\nWall time: ')[0];
  const file = 'test/helpers/fixtures/skips.ts';
  assert.equal(
    list.trim(),
    [
      'Skipped: 4 (suites, tests and parts of tests)',
      `  - ${file} › a suite skipped as a whole`,
      '      the suite needs something missing',
      `  - ${file} › a suite that runs › a test skipped by its options`,
      '      the test needs something missing',
      `  - ${file} › a suite that runs › a test that skips itself`,
      '      found something missing while running',
      `  - ${file} › a suite that runs › a test that leaves out a part`,
      '      its second half: that half needs something missing',
    ].join('\n'),
    output,
  );
});
