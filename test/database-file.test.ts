// The SQLite database file deleted or replaced while the service runs (docs/operations.md,
// "The database file was deleted or replaced"): the process would go on writing into a file
// nobody will open again, answer 201, and say it is ready; the next start would find an
// empty database. Instead writes answer 503 storage_unavailable at once, /readyz turns 503,
// and one log line says what happened and where the process still holds what it wrote.
// And whatever the order of a write and the deletion, a 503 changed nothing and a committed
// write is acknowledged: what the process holds open has exactly the writes answered 201.
// On a real server process, as `npm start` runs it, and in this process where the deletion
// must fall at one chosen statement. SQLite only: PostgreSQL has no such file.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { httpRequest, issueTokenWithCli, runUgs, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { buildTestApp, issueTestToken, openTestDatabase } from './helpers/harness.ts';
import type { DatabaseHandle } from '../src/db/database.ts';
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

/** The user_group_ids in a copy of the files a process holds open (the way back docs/operations.md gives). */
function idsInCopy(dir: string, open: { database?: string; wal?: string }): string[] {
  const copy = path.join(dir, `recovered-${crypto.randomUUID()}.sqlite`);
  fs.copyFileSync(String(open.database), copy);
  if (open.wal) fs.copyFileSync(open.wal, `${copy}-wal`);
  const recovered = new SQLite(copy, { readonly: true });
  try {
    return (recovered.prepare('select provided_id from user_groups order by provided_id').all() as { provided_id: string }[]).map((r) => r.provided_id);
  } finally {
    recovered.close();
  }
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
    assert.deepEqual(
      idsInCopy(d.dir, { database: String(line.open_database), wal: String(line.open_wal) }),
      acknowledged,
      'every acknowledged write, and not the refused one',
    );

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

describe('[sqlite] a write and the deletion of its file, in either order: a 503 changed nothing, a committed write is acknowledged', () => {
  it('data/ deleted under 60 concurrent creates: what the process holds open has exactly the creates answered 201, none of those answered 503', async () => {
    const d = await deploy();
    try {
      const answers = new Map<string, number>();
      const ids = Array.from({ length: 60 }, (_, i) => `load-${String(i).padStart(2, '0')}`);
      // Eight at a time; data/ goes when 20 are answered, with eight writes in flight.
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let id = ids.shift(); id !== undefined; id = ids.shift()) {
            answers.set(id, (await create(d, id)).status);
            if (answers.size === 20) fs.rmSync(path.dirname(d.file), { recursive: true });
          }
        }),
      );
      assert.ok(
        [...answers.values()].every((status) => status === 201 || status === 503),
        JSON.stringify([...answers]),
      );
      const line = await logLine(d, /was deleted while the service ran/);
      const acknowledged = [...answers].filter(([, status]) => status === 201).map(([id]) => id);
      assert.deepEqual(idsInCopy(d.dir, { database: String(line.open_database), wal: line.open_wal as string | undefined }), acknowledged.sort());
    } finally {
      await d.server.stop();
      fs.rmSync(d.dir, { recursive: true, force: true });
    }
  });

  /**
   * An app in this process whose database deletes its own file when, once armed, the
   * statement `at` runs after a statement `after` (or is it): the deletion falls exactly
   * there, which no timing of a real `rm` can promise.
   */
  async function deletedAt(after: RegExp, at: RegExp) {
    let armed = false;
    let seen = false;
    let file = '';
    const database = await openTestDatabase('sqlite', {
      onQuery: (event) => {
        if (!armed) return;
        seen ||= after.test(event.query.sql);
        if (!seen || !at.test(event.query.sql)) return;
        armed = false;
        fs.rmSync(file);
      },
    });
    file = database.url.slice('sqlite:'.length);
    const { app, request } = await buildTestApp(database);
    const { token } = await issueTestToken(database.handle, { account: 'file-order' });
    return {
      handle: database.handle as DatabaseHandle,
      create: (id: string) => request('POST', '/api/user', { token, body: { user_group_id: id } }),
      arm: () => {
        armed = true;
      },
      async close() {
        await app.close();
        await database.close();
      },
    };
  }

  it("the file deleted inside a create's transaction, after its insert and before its commit: 503 storage_unavailable, and the create is not in what the process holds open", async () => {
    const t = await deletedAt(/^insert into "user_groups"/, /^insert into "user_groups"/);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-dbfile-order-'));
    try {
      assert.equal((await t.create('before')).status, 201);
      t.arm();
      const refused = await t.create('mid-transaction');
      assert.equal(refused.status, 503, refused.text);
      assert.equal(refused.body.error.code, 'storage_unavailable');
      const open = t.handle.fileProblem?.()?.openCopies;
      assert.ok(open?.database, 'the process still holds the deleted file');
      assert.deepEqual(idsInCopy(dir, open), ['before'], 'the 503 changed nothing');
    } finally {
      await t.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the file deleted just after a create commits: the create is acknowledged (201) and is in what the process holds open; the next write is refused', async () => {
    const t = await deletedAt(/^insert into "user_groups"/, /^commit/i);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-dbfile-order-'));
    try {
      assert.equal((await t.create('before')).status, 201);
      t.arm();
      const committed = await t.create('committed');
      assert.equal(committed.status, 201, committed.text);
      const refused = await t.create('after');
      assert.equal(refused.status, 503, refused.text);
      assert.deepEqual(idsInCopy(dir, t.handle.fileProblem?.()?.openCopies ?? {}), ['before', 'committed']);
    } finally {
      await t.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
