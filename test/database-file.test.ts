// The SQLite database file deleted or replaced while the service runs (docs/operations.md,
// "The database file was deleted or replaced"): the process would go on writing into a file
// nobody will open again, answer 201, and say it is ready; the next start would find an
// empty database. Instead writes answer 503 storage_unavailable at once, /readyz turns 503,
// and one log line says what happened and where the process still holds what it wrote.
// On a real server process, as `npm start` runs it. SQLite only: PostgreSQL has no such file.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { httpRequest, issueTokenWithCli, runUgs, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { eventually } from './helpers/wait.ts';

interface Deployment {
  dir: string;
  file: string;
  env: Record<string, string>;
  server: ServerProcess;
  token: string;
}

async function deploy(): Promise<Deployment> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-dbfile-'));
  const file = path.join(dir, 'data', 'ugs.sqlite');
  const env = { DATABASE_URL: `sqlite:${file}`, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
  const { token } = await issueTokenWithCli(env);
  const server = await spawnServer(env);
  return { dir, file, env, server, token };
}

const create = (d: Deployment, id: string) => httpRequest(d.server.baseUrl, 'POST', '/api/user', { token: d.token, body: { user_group_id: id } });

async function assertWritesRefused(d: Deployment, id: string): Promise<void> {
  const refused = await create(d, id);
  assert.equal(refused.status, 503, refused.text);
  assert.equal(refused.body.error.code, 'storage_unavailable');
  assert.match(refused.body.error.message, /database file was deleted or replaced while it ran; nothing was changed/);
  assert.equal(refused.headers['retry-after'], '30');
  const ready = await httpRequest(d.server.baseUrl, 'GET', '/readyz');
  assert.equal(ready.status, 503, ready.text);
  assert.equal(ready.body.error.code, 'storage_unavailable');
}

/** The JSON log line whose message matches `pattern`. */
async function logLine(d: Deployment, pattern: RegExp): Promise<Record<string, unknown>> {
  const [line] = await d.server.waitForOutput(new RegExp(`^\\{.*"msg":"[^"]*${pattern.source}[^"]*"\\}$`, 'm'));
  return JSON.parse(line);
}

describe('[sqlite] the database file deleted or replaced while the service runs', () => {
  const deployments: Deployment[] = [];
  const start = async () => {
    const d = await deploy();
    deployments.push(d);
    return d;
  };
  after(async () => {
    for (const d of deployments) {
      await d.server.stop();
      fs.rmSync(d.dir, { recursive: true, force: true });
    }
  });

  it('data/ deleted: the next write answers 503 storage_unavailable, /readyz 503, one error line names the file and the open copies, which hold every acknowledged write', async () => {
    const d = await start();
    const acknowledged = [];
    for (let i = 0; i < 5; i++) {
      const res = await create(d, `kept-${i}`);
      assert.equal(res.status, 201, res.text);
      acknowledged.push(`kept-${i}`);
    }
    fs.rmSync(path.dirname(d.file), { recursive: true });

    // At once, not at the next tick of a timer: nothing is acknowledged into the deleted file.
    await assertWritesRefused(d, 'after-delete');
    const lookup = await httpRequest(d.server.baseUrl, 'GET', '/api/user/lookup?user_group_id=kept-0', { token: d.token });
    assert.equal(lookup.status, 200, 'reads still answer from the open file');

    const line = await logLine(d, /was deleted while the service ran/);
    assert.equal(line.level, 50, 'an error line');
    assert.match(String(line.msg), new RegExp(`the SQLite database file ${d.file} was deleted while the service ran: writes answer 503`));
    assert.ok(!fs.existsSync(d.file), 'nothing made a new file at the path');

    // The way back the line gives: the files the process holds open.
    const copy = path.join(d.dir, 'recovered.sqlite');
    fs.copyFileSync(String(line.open_database), copy);
    fs.copyFileSync(String(line.open_wal), `${copy}-wal`);
    const recovered = new SQLite(copy, { readonly: true });
    const ids = (recovered.prepare('select provided_id from user_groups order by provided_id').all() as { provided_id: string }[]).map((r) => r.provided_id);
    recovered.close();
    assert.deepEqual(ids, acknowledged, 'every acknowledged write, and not the refused one');

    assert.deepEqual(await d.server.stop(), { code: 0, signal: null }, d.server.output());
  });

  it('the file replaced by another (a copy moved over it): writes refused and /readyz 503; the original put back: writes work again, without a restart', async () => {
    const d = await start();
    assert.equal((await create(d, 'before')).status, 201);
    const backup = path.join(d.dir, 'backup.sqlite');
    const backedUp = await runUgs(['backup', backup], d.env);
    assert.equal(backedUp.code, 0, backedUp.stderr);
    const aside = path.join(d.dir, 'aside.sqlite');
    fs.renameSync(d.file, aside);
    fs.renameSync(backup, d.file); // a restore while the service runs

    await assertWritesRefused(d, 'while-replaced');
    await logLine(d, /was replaced by another file while the service ran: writes answer 503/);

    fs.renameSync(aside, d.file);
    await eventually('/readyz ready again', async () => (await httpRequest(d.server.baseUrl, 'GET', '/readyz')).status === 200);
    assert.equal((await create(d, 'after')).status, 201);
    await logLine(d, /back where they were/);
  });

  it('the -wal file deleted: writes refused, and /readyz 503', async () => {
    const d = await start();
    assert.equal((await create(d, 'before')).status, 201);
    fs.rmSync(`${d.file}-wal`);
    await assertWritesRefused(d, 'after');
    await logLine(d, /write-ahead log \(-wal\) [^"]*-wal was deleted while the service ran: writes answer 503/);
  });
});
