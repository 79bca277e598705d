// Several processes may share one SQLite file, and only one writes at a time. While another
// process holds the write lock, a write here waits for it without blocking the event loop:
// reads (from the WAL) and /healthz keep being answered, and a write that waits too long
// answers 503 unavailable with Retry-After and changes nothing. The other process is real,
// holding BEGIN IMMEDIATE on the file.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { ROOT, httpRequest, reapOnExit, spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';

/** Another process that takes the file's write lock and keeps it until release(). */
async function holdWriteLock(file: string): Promise<{ release(): Promise<void> }> {
  const script = `
    const db = new (require('better-sqlite3'))(process.argv[1]);
    db.exec('begin immediate');
    console.log('locked');
    process.stdin.once('data', () => { db.exec('commit'); db.close(); process.exit(0); });`;
  const child: ChildProcess = reapOnExit(spawn(process.execPath, ['-e', script, file], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] }));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk) => String(chunk).includes('locked') && resolve());
    child.on('exit', (code) => reject(new Error(`the lock holder exited with ${code}`)));
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    async release() {
      child.stdin!.write('release\n');
      await exited;
    },
  };
}

describe('[sqlite] a write lock held by another process', () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let token: string;
  let file: string;

  before(async () => {
    database = await createTestDatabase('sqlite');
    file = database.url.slice('sqlite:'.length);
    const issued = await issueTokenWithCli({ DATABASE_URL: database.url });
    token = issued.token;
    server = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') });
    assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'readable' } })).status, 201);
  });
  after(async () => {
    await server?.stop('SIGKILL');
    await database?.drop();
  });

  it('sqlite lock: while the write waits, reads and /healthz are answered; the write completes once the lock is released', async () => {
    const lock = await holdWriteLock(file);
    let settled = false;
    const write = httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'waited' } }).finally(() => (settled = true));
    for (let i = 0; i < 20; i++) {
      assert.equal((await httpRequest(server.baseUrl, 'GET', '/healthz')).status, 200);
      const read = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=readable', { token });
      assert.equal(read.status, 200, 'a read is served from the WAL');
    }
    assert.equal(settled, false, 'the write is still waiting for the lock, and everything else was answered meanwhile');
    await lock.release();
    const written = await write;
    assert.equal(written.status, 201, JSON.stringify(written.body));
  });

  it('sqlite lock: a write that cannot get the lock within its bound answers 503 unavailable with Retry-After and changes nothing', async () => {
    const lock = await holdWriteLock(file);
    try {
      const refused = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'too-late' } });
      assert.equal(refused.status, 503, JSON.stringify(refused.body));
      assert.equal(refused.body.error.code, 'unavailable');
      assert.ok(Number(refused.headers['retry-after']) > 0);
      assert.equal((await httpRequest(server.baseUrl, 'GET', '/healthz')).status, 200);
    } finally {
      await lock.release();
    }
    const listed = await httpRequest(server.baseUrl, 'GET', '/api/users?q=too-late', { token });
    assert.deepEqual(listed.body.user_groups, [], 'nothing was created');
  });
});

describe('[sqlite] instances starting together on a new file', () => {
  let database: TestDatabase;
  let server: ServerProcess | undefined;
  before(async () => {
    database = await createTestDatabase('sqlite');
  });
  after(async () => {
    await server?.stop('SIGKILL');
    await database?.drop();
  });

  // Two instances started at once on a new file: one writes the file's first page while the
  // other switches it to WAL, and SQLite answers that switch BUSY at once, whatever the busy
  // timeout (CI saw "failed to start: database is locked"). Here the other instance is a
  // process holding the new file's write lock for a second.
  it("sqlite lock: a server starting while another process holds a new file's write lock waits for it, then starts", async () => {
    const file = database.url.slice('sqlite:'.length);
    const lock = await holdWriteLock(file);
    const starting = spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') });
    const released = new Promise((resolve) => setTimeout(resolve, 1000)).then(() => lock.release());
    server = await starting;
    await released;
    assert.equal((await httpRequest(server.baseUrl, 'GET', '/healthz')).status, 200);
    assert.match(server.output(), /database ready/);
  });
});
