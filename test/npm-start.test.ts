// What a supervisor does (systemd, a container runtime, a process manager): start the service
// with `npm start` and send SIGTERM to that one PID, not to its process group. The server
// under npm must drain and exit 0, and no process may be left behind holding the port.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TEST_BUILD, httpRequest, requireTestBuild } from './helpers/processes.ts';
import { PROCESS_START_MS } from './helpers/wait.ts';

const SHUTDOWN_TIMEOUT_MS = 10_000;

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('npm start under a supervisor', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-npm-start-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('npm start: SIGTERM to the PID npm start gives drains the server and exits 0, leaving no process and a free port', async () => {
    requireTestBuild();
    // In the tests' own build, a tree shaped like the checkout, with the same `start` script.
    const npm = spawn('npm', ['start'], {
      cwd: TEST_BUILD,
      env: {
        ...process.env,
        PORT: '0',
        HOST: '127.0.0.1',
        DATABASE_URL: `sqlite:${path.join(dir, 'ugs.sqlite')}`,
        UGS_KEY_FILE: path.join(dir, 'secret.key'),
        UGS_SECRET_KEY: '',
        UGS_SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
        UGS_BOOTSTRAP: 'false',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, as a supervisor's child has: nothing here signals the group.
      detached: true,
    });
    let output = '';
    npm.stdout!.on('data', (c) => (output += c));
    npm.stderr!.on('data', (c) => (output += c));
    const exited = new Promise<number | null>((resolve) => npm.on('exit', (code) => resolve(code)));
    const baseUrl = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`npm start did not print its listening line within ${PROCESS_START_MS / 1000} s:\n${output}`)),
        PROCESS_START_MS,
      );
      npm.stdout!.on('data', () => {
        const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      });
    });
    const serverPid = Number(/"pid":(\d+)/.exec(output)?.[1]);
    assert.ok(serverPid > 0, 'the server logged its pid');
    assert.notEqual(serverPid, npm.pid, 'npm runs the server as its child');
    assert.equal((await httpRequest(baseUrl, 'GET', '/healthz')).status, 200);

    const signalledAt = Date.now();
    process.kill(npm.pid!, 'SIGTERM'); // that PID alone
    const code = await exited;
    assert.equal(code, 0, output);
    assert.ok(Date.now() - signalledAt < SHUTDOWN_TIMEOUT_MS, 'ended within the shutdown timeout');
    assert.match(output, /"msg":"stopped"/, 'the server drained and logged its last line');
    assert.equal(isRunning(serverPid), false, 'no server process is left behind');
    await assert.rejects(httpRequest(baseUrl, 'GET', '/healthz'), /ECONNREFUSED/, 'the port is free');
  });
});
