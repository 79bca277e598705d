// `npm run dev` (tsx watch) stopped the way a terminal's process manager or an IDE stops it:
// SIGTERM to npm's PID alone. npm hands the signal to its child; when that child was a shell
// running tsx, the shell died and tsx and the server were left running on the port.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, httpRequest } from './helpers/processes.ts';
import { PROCESS_START_MS } from './helpers/wait.ts';

/** Every process whose environment holds `marker` (this test's own processes, and only them). */
function processesMarked(marker: string): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (fs.readFileSync(`/proc/${entry}/environ`, 'latin1').includes(marker)) found.push(Number(entry));
    } catch {
      // ended meanwhile, or not ours to read
    }
  }
  return found;
}

describe('npm run dev under a process manager', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-npm-dev-'));
  const marker = `UGS_NPM_DEV_TEST=${crypto.randomUUID()}`;
  after(() => {
    for (const pid of processesMarked(marker)) process.kill(pid, 'SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("npm run dev: SIGTERM to npm's PID stops it whole: the server drains, and npm, tsx and the server end, leaving the port free", async () => {
    const npm = spawn('npm', ['run', 'dev'], {
      cwd: ROOT,
      env: {
        ...process.env,
        [marker.split('=')[0]]: marker.split('=')[1],
        PORT: '0',
        HOST: '127.0.0.1',
        DATABASE_URL: `sqlite:${path.join(dir, 'ugs.sqlite')}`,
        UGS_KEY_FILE: path.join(dir, 'secret.key'),
        UGS_SECRET_KEY: '',
        UGS_BOOTSTRAP: 'false',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, as a process manager's child has: nothing here signals the group.
      detached: true,
    });
    let output = '';
    npm.stdout!.on('data', (c) => (output += c));
    npm.stderr!.on('data', (c) => (output += c));
    const exited = new Promise<number | null>((resolve) => npm.on('exit', (code) => resolve(code)));
    const baseUrl = await new Promise<string>((resolve, reject) => {
      // tsx compiles the source first: half again the bound of a compiled server's start.
      const bound = PROCESS_START_MS * 1.5;
      const timer = setTimeout(() => reject(new Error(`npm run dev did not print its listening line within ${bound / 1000} s:\n${output}`)), bound);
      npm.stdout!.on('data', () => {
        const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      });
    });
    assert.equal((await httpRequest(baseUrl, 'GET', '/healthz')).status, 200);
    assert.ok(processesMarked(marker).length >= 3, 'npm, tsx watch and the server run');

    process.kill(npm.pid!, 'SIGTERM'); // that PID alone
    const code = await exited;
    // What npm's children leave behind is gone within the drain's bound (a loaded machine is slow).
    const deadline = Date.now() + 30_000;
    while (processesMarked(marker).length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual(processesMarked(marker), [], `no process is left behind (npm exited with ${code}):\n${output}`);
    assert.match(output, /"msg":"stopped"/, 'the server drained and logged its last line');
    await assert.rejects(httpRequest(baseUrl, 'GET', '/healthz'), /ECONNREFUSED/, 'the port is free');
  });
});
