// The files the service creates hold secrets (sealed tokens, token hashes, the secret key):
// they and their directories are created readable by their owner only, and a key file that
// others can read is reported at start.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { httpRequest, issueTokenWithCli, spawnServer } from './helpers/processes.ts';

const modeOf = (file: string) => fs.statSync(file).mode & 0o777;

describe('files the service creates', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-files-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  it('files: the SQLite file, its WAL files, the key file and their new directories are readable by their owner only', async () => {
    const dataDir = path.join(root, 'new', 'data');
    const keyDir = path.join(root, 'new', 'keys');
    const databaseFile = path.join(dataDir, 'ugs.sqlite');
    const keyFile = path.join(keyDir, 'secret.key');
    const issued = await issueTokenWithCli({ DATABASE_URL: `sqlite:${databaseFile}` });
    const server = await spawnServer({ DATABASE_URL: `sqlite:${databaseFile}`, UGS_KEY_FILE: keyFile, UGS_SECRET_KEY: '' });
    try {
      const token = issued.token;
      assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'on-disk' } })).status, 201);
      for (const dir of [path.join(root, 'new'), dataDir, keyDir]) assert.equal(modeOf(dir), 0o700, dir);
      for (const file of [databaseFile, `${databaseFile}-wal`, `${databaseFile}-shm`, keyFile]) assert.equal(modeOf(file), 0o600, file);
      assert.doesNotMatch(server.output(), /can be read by other users/);
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
  });

  it('files: a key file that other users can read is reported at start', async () => {
    const keyFile = path.join(root, 'exposed.key');
    fs.writeFileSync(keyFile, crypto.randomBytes(32).toString('base64') + '\n', { mode: 0o644 });
    fs.chmodSync(keyFile, 0o644);
    const server = await spawnServer({ DATABASE_URL: `sqlite:${path.join(root, 'exposed', 'ugs.sqlite')}`, UGS_KEY_FILE: keyFile, UGS_SECRET_KEY: '' });
    try {
      assert.match(
        server.output(),
        new RegExp(`the key file ${keyFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} can be read by other users \\(mode 0644\\): chmod 600 it`),
      );
    } finally {
      await server.stop();
    }
  });
});
