// `ugs backup` (docs/operations.md, "Backup and restore"): an online copy of a SQLite database
// taken while a real server writes, which a second server started on it with the same key
// serves: every group whose create was acknowledged before the backup began is there, with a
// working token. On PostgreSQL the command copies nothing and says how to back up instead.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { httpRequest, issueTokenWithCli, runUgs, spawnServer, type ServerProcess } from './helpers/processes.ts';

describe('[sqlite] ugs backup', () => {
  let database: TestDatabase;
  let dir: string;
  const servers: ServerProcess[] = [];
  const secretKey = crypto.randomBytes(32).toString('base64');

  before(async () => {
    database = await createTestDatabase('sqlite');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-backup-'));
  });
  after(async () => {
    for (const server of servers) await server.stop('SIGTERM');
    await database?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('backup under write load: a second server on the copy, with the same key, has every group acknowledged before the backup began, with working tokens', async () => {
    const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: secretKey };
    const server = await spawnServer(env);
    servers.push(server);
    const { token } = await issueTokenWithCli(env, ['--account', 'acme']);

    const acknowledged: { id: string; token: string; at: number }[] = [];
    let stop = false;
    let next = 0;
    const writer = async () => {
      while (!stop) {
        const id = `g-${next++}`;
        const r = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id, properties: { n: next } } });
        assert.equal(r.status, 201, r.text);
        acknowledged.push({ id, token: (r.body as { user_group: { token: string } }).user_group.token, at: performance.now() });
      }
    };
    const writers = Array.from({ length: 8 }, writer);
    while (acknowledged.length < 300) await new Promise((resolve) => setTimeout(resolve, 10));

    const copy = path.join(dir, 'copy.sqlite');
    const began = performance.now();
    const backup = await runUgs(['backup', copy], env);
    const afterBackup = acknowledged.length;
    while (acknowledged.length < afterBackup + 50) await new Promise((resolve) => setTimeout(resolve, 10));
    stop = true;
    await Promise.all(writers);

    assert.equal(backup.code, 0, backup.stderr);
    assert.match(backup.stdout, new RegExp(`backup written to ${copy.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\([\\d,]+ bytes; PRAGMA integrity_check: ok\\)`));
    assert.match(backup.stdout, /UGS_SECRET_KEY/, 'names the key the copy needs');
    assert.equal(fs.statSync(copy).mode & 0o777, 0o600, 'readable by its owner only');
    assert.deepEqual(
      fs.readdirSync(dir).filter((name) => name.includes('partial')),
      [],
      'no partial file left',
    );

    const before = acknowledged.filter((a) => a.at < began);
    assert.ok(before.length >= 300);
    const restored = await spawnServer({ DATABASE_URL: `sqlite:${copy}`, UGS_SECRET_KEY: secretKey });
    servers.push(restored);
    for (const group of before) {
      const found = await httpRequest(restored.baseUrl, 'GET', `/api/user/lookup?user_group_id=${group.id}`, { token });
      assert.equal(found.status, 200, `${group.id}: ${found.text}`);
      assert.equal((found.body as { user_group: { token: string } }).user_group.token, group.token);
      const embed = await httpRequest(restored.baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${group.token}` } });
      assert.equal(embed.status, 200, `${group.id}: ${embed.text}`);
    }
    const exported = await runUgs(['export', '--account', 'acme', '--env', 'Customer'], { DATABASE_URL: `sqlite:${copy}` });
    assert.equal(exported.code, 0, exported.stderr);
    const inCopy = exported.stdout.split('\n').filter(Boolean).length;
    assert.ok(inCopy >= before.length && inCopy <= acknowledged.length, `${inCopy} groups in the copy`);
    assert.ok(acknowledged.length > inCopy, 'the server went on writing after the copy was taken');

    const again = await runUgs(['backup', copy], env);
    assert.equal(again.code, 2, 'never overwrites');
    assert.match(again.stderr, /exists/);
  });

  it('backup names the key file when the keys come from it', async () => {
    const keyFile = path.join(dir, 'secret.key');
    fs.writeFileSync(keyFile, `${secretKey}\n`, { mode: 0o600 });
    const r = await runUgs(['backup', path.join(dir, 'second.sqlite'), '--json'], { DATABASE_URL: database.url, UGS_SECRET_KEY: '', UGS_KEY_FILE: keyFile });
    assert.equal(r.code, 0, r.stderr);
    const json = JSON.parse(r.stdout);
    assert.equal(json.key, keyFile);
    assert.equal(json.integrity_check, 'ok');
    assert.equal(json.bytes, fs.statSync(json.file).size);
  });
});

if (BACKENDS.includes('postgres')) {
  describe('[postgres] ugs backup', () => {
    let database: TestDatabase;
    before(async () => {
      database = await createTestDatabase('postgres');
    });
    after(() => database?.drop());

    it('backup on PostgreSQL copies nothing, explains pg_dump and base backups, and exits 2', async () => {
      const target = path.join(os.tmpdir(), `ugs-pg-backup-${process.pid}.sqlite`);
      const r = await runUgs(['backup', target], { DATABASE_URL: database.url });
      assert.equal(r.code, 2);
      assert.match(r.stderr, /pg_dump/);
      assert.match(r.stderr, /pg_basebackup/);
      assert.ok(!fs.existsSync(target));
    });
  });
}
