// A database whose storage is full (docs/api.md, "Errors"): writes answer 503
// storage_unavailable with Retry-After and one throttled error line, never a 500 with a stack
// per request; reads keep answering; once there is room again, writes work without a restart.
// The storage is a real small tmpfs, mounted by the test (root only; skipped loudly
// otherwise): the SQLite file lives on it, and on PostgreSQL user_groups moves to a tablespace
// on it. A filler file takes part of it, and deleting the filler makes the room.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { onConnection } from '../scripts/scratch-database.ts';
import { forEachBackend } from './helpers/harness.ts';
import { httpRequest, issueTokenWithCli, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { eventually } from './helpers/wait.ts';

const SIZE = '4m';

function canMount(): string | false {
  if (process.getuid?.() !== 0) return 'storage faults need root to mount a small tmpfs: SKIPPED (CI runs as root)';
  const probe = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-mount-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe]);
    execFileSync('umount', [probe]);
    return false;
  } catch (err) {
    return `storage faults need to mount a tmpfs, which failed here (${(err as Error).message.split('\n')[0]}): SKIPPED`;
  } finally {
    fs.rmSync(probe, { recursive: true, force: true });
  }
}

const skip = canMount();
if (skip) console.warn(`\n*** ${skip} ***\n`);

forEachBackend('a full disk under the database', (backend) => {
  let mountPoint: string;
  let database: TestDatabase;
  let server: ServerProcess;
  let token: string;
  let tablespace: string | undefined;
  const filler = () => path.join(mountPoint, 'filler');

  before(async () => {
    if (skip) return;
    mountPoint = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-full-disk-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SIZE},mode=0700`, 'tmpfs', mountPoint]);
    const secretKey = crypto.randomBytes(32).toString('base64');
    if (backend === 'sqlite') {
      database = { url: `sqlite:${path.join(mountPoint, 'ugs.sqlite')}`, drop: async () => undefined };
    } else {
      database = await createTestDatabase('postgres');
      execFileSync('chown', ['postgres', mountPoint]);
      tablespace = `ugs_full_${crypto.randomBytes(4).toString('hex')}`;
      await onConnection(process.env.TEST_POSTGRES_URL!, `create tablespace ${tablespace} location '${mountPoint}'`);
    }
    token = (await issueTokenWithCli({ DATABASE_URL: database.url, UGS_SECRET_KEY: secretKey })).token;
    if (tablespace) await onConnection(database.url, `alter table user_groups set tablespace ${tablespace}`);
    fs.writeFileSync(filler(), crypto.randomBytes(1024 * 1024)); // the room that deleting it gives back
    server = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: secretKey });
  });

  after(async () => {
    if (skip) return;
    await server?.stop('SIGTERM');
    await database?.drop();
    if (tablespace) await onConnection(process.env.TEST_POSTGRES_URL!, `drop tablespace if exists ${tablespace}`);
    // A process that just ended may hold the mount a moment longer on a loaded machine (EBUSY):
    // waited for, until it is no longer mounted (or never was: before() failed early).
    const mounted = () =>
      fs
        .readFileSync('/proc/mounts', 'utf8')
        .split('\n')
        .some((line) => line.split(' ')[1] === mountPoint);
    await eventually(`${mountPoint} unmounted`, () => {
      if (!mounted()) return true;
      try {
        // Lazily: a handle still open in this process (the in-process ugs of before()) would
        // hold it busy; detached, the tmpfs goes once the last handle closes.
        execFileSync('umount', ['-l', mountPoint], { stdio: 'ignore' });
      } catch {
        // busy still: asked again
      }
      return !mounted();
    });
    fs.rmSync(mountPoint, { recursive: true, force: true });
  });

  it('writes answer 503 storage_unavailable with Retry-After and a throttled error line; reads answer; room again means writes work, without a restart', {
    skip,
  }, async () => {
    // Incompressible properties, ~48 KiB of text each, until the storage is full.
    const bulky = () => ({ blob: crypto.randomBytes(36 * 1024).toString('base64') });
    const created: string[] = [];
    let full: Awaited<ReturnType<typeof httpRequest>> | undefined;
    for (let i = 0; i < 400 && !full; i++) {
      const res = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: `fill-${i}`, properties: bulky() } });
      if (res.status === 201) created.push(`fill-${i}`);
      else full = res;
    }
    assert.ok(full, `the ${SIZE} storage never filled up`);
    assert.ok(created.length > 3, 'some writes succeeded before the storage filled up');
    assert.equal(full.status, 503, full.text);
    assert.equal(full.body.error.code, 'storage_unavailable');
    assert.equal(full.headers['retry-after'], '30');
    assert.doesNotMatch(full.text, /SQLITE|ENOSPC|pg_tblspc|at .*\.js:\d+/, 'no driver text or stack in the answer');

    // More writes on the full storage: each one that fails answers 503, and the log holds one
    // error line for all of them. A write may also find room: SQLite reuses the pages a failed
    // transaction left in its WAL file, and a write that replaces a value of the same size
    // needs hardly any new room (CI saw such a PUT answer 200). So: new bulky groups, until
    // five more have failed.
    let failed = 1;
    for (let i = 0; i < 50 && failed < 6; i++) {
      const again = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: `more-${i}`, properties: bulky() } });
      assert.ok(again.status === 201 || again.status === 503, again.text);
      if (again.status === 503) failed++;
    }
    assert.equal(failed, 6, 'five more writes failed on the full storage');
    // Reads keep answering: a get-or-create hit, the list, the embed context.
    const hit = await httpRequest(server.baseUrl, 'GET', `/api/user?user_group_id=${created[1]}`, { token });
    assert.equal(hit.status, 200, hit.text);
    const list = await httpRequest(server.baseUrl, 'GET', '/api/users?limit=5', { token });
    assert.equal(list.status, 200, list.text);
    const context = await httpRequest(server.baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${hit.body.user_group.token}` } });
    assert.equal(context.status, 200, context.text);

    await server.logsUpToNow(); // the log is written in batches
    const lines = server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; msg: string; stack?: string });
    const alarms = lines.filter((line) => /storage full or failing/.test(line.msg));
    assert.equal(alarms.length, 1, `one throttled error line for ${failed} failed writes:\n${alarms.map((l) => JSON.stringify(l)).join('\n')}`);
    assert.equal(alarms[0].level, 50, 'at level error');
    assert.equal(lines.filter((line) => line.msg === 'unexpected error').length, 0, 'no 500 and no stack');

    // Room again: the same server writes.
    fs.rmSync(filler());
    const after = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'after-room', properties: { small: true } } });
    assert.equal(after.status, 201, after.text);
  });
});
