// `ugs backup` (docs/operations.md, "Backup and restore"): an online copy of a SQLite database
// taken while a real server writes, which a second server started on it with the same key
// serves: every group whose create was acknowledged before the backup began is there, with a
// working token, and the events it makes from then on never reuse an id given out before (a
// receiver that deduplicates by webhook-id drops none of them). On PostgreSQL the command
// copies nothing and says how to back up instead.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { httpRequest, issueTokenWithCli, runUgs, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { eventually } from './helpers/wait.ts';

/**
 * A webhook receiver that deduplicates by webhook-id, as docs/api.md ("Webhooks") advises: the
 * first delivery of an id is applied, later ones are dropped as repeats. A repeat whose body
 * is another event than the one applied is an event lost to the receiver.
 */
class DeduplicatingReceiver {
  private readonly byWebhookId = new Map<string, string>();
  private readonly appliedGroups = new Set<string>();
  private readonly receivedGroups = new Set<string>();
  readonly lost: { webhookId: string; applied: string; dropped: string }[] = [];
  private server: http.Server | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        const webhookId = String(req.headers['webhook-id']);
        const group = String((JSON.parse(body) as { data: { user_group_id: string } }).data.user_group_id);
        this.receivedGroups.add(group);
        const applied = this.byWebhookId.get(webhookId);
        if (applied === undefined) {
          this.byWebhookId.set(webhookId, body);
          this.appliedGroups.add(group);
        } else if (applied !== body) this.lost.push({ webhookId, applied, dropped: body });
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }

  /** A delivery of this group's event came (applied or not). */
  hasGroup(id: string): boolean {
    return this.receivedGroups.has(id);
  }

  applied(id: string): boolean {
    return this.appliedGroups.has(id);
  }

  async until(done: () => boolean, ms = 30_000): Promise<void> {
    await eventually(() => `the receiver has ${this.receivedGroups.size} groups' events`, done, { timeoutMs: ms });
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

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
    await eventually('300 writes acknowledged', () => acknowledged.length >= 300);

    const copy = path.join(dir, 'copy.sqlite');
    const began = performance.now();
    const backup = await runUgs(['backup', copy], env);
    const afterBackup = acknowledged.length;
    await eventually('50 more writes acknowledged after the backup', () => acknowledged.length >= afterBackup + 50);
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

  it('backup and restore: events after the restore never reuse an id, a cursor or a webhook-id given out before; a receiver that deduplicates by webhook-id drops none of them; the copy holds no lease of the instance it was taken from', async () => {
    const feedDatabase = await createTestDatabase('sqlite');
    const receiver = await new DeduplicatingReceiver().start();
    try {
      const env = {
        DATABASE_URL: feedDatabase.url,
        UGS_SECRET_KEY: secretKey,
        UGS_WEBHOOK_ALLOW_PRIVATE: 'true',
        UGS_WEBHOOK_RETRY_SCHEDULE: Array(20).fill('1s').join(','),
      };
      const server = await spawnServer(env);
      servers.push(server);
      const { token } = await issueTokenWithCli(env, ['--account', 'feed', '--scopes', 'read,write,admin']);
      const endpoint = await httpRequest(server.baseUrl, 'POST', '/api/webhook_endpoints', {
        token,
        body: { url: receiver.url, types: ['user_group.created'] },
      });
      assert.equal(endpoint.status, 201, endpoint.text);

      // Creates and deliveries go on while the copy is taken, and after it (the tail the restore loses).
      const acknowledged: string[] = [];
      let stop = false;
      let next = 0;
      const writer = async () => {
        while (!stop) {
          const id = `before-${next++}`;
          const r = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id } });
          assert.equal(r.status, 201, r.text);
          acknowledged.push(id);
        }
      };
      const writers = Array.from({ length: 4 }, writer);
      await eventually('40 writes acknowledged', () => acknowledged.length >= 40);
      const copy = path.join(dir, 'feed-copy.sqlite');
      const backup = await runUgs(['backup', copy], env);
      assert.equal(backup.code, 0, backup.stderr);
      const afterBackup = acknowledged.length;
      await eventually('40 more writes acknowledged after the backup', () => acknowledged.length >= afterBackup + 40);
      stop = true;
      await Promise.all(writers);
      await receiver.until(() => acknowledged.every((id) => receiver.hasGroup(id)));
      const feed = await httpRequest(server.baseUrl, 'GET', '/api/events?limit=500&types=user_group.created', { token });
      const lostCursor = feed.body.next_cursor;
      await server.stop('SIGTERM');

      // The copy was taken while the first server delivered to the endpoint, under its lease:
      // the copy lets it go, so the server started on it delivers at once (not after the lease).
      const copied = new SQLite(copy, { readonly: true });
      try {
        assert.deepEqual(copied.prepare('select lease_owner, lease_until from webhook_endpoints').all(), [{ lease_owner: null, lease_until: null }]);
      } finally {
        copied.close();
      }

      const restored = await spawnServer({ ...env, DATABASE_URL: `sqlite:${copy}` });
      servers.push(restored);
      const created = Array.from({ length: 10 }, (_, i) => `after-${i}`);
      for (const id of created) {
        const r = await httpRequest(restored.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id } });
        assert.equal(r.status, 201, r.text);
      }
      await receiver.until(() => created.every((id) => receiver.hasGroup(id)));
      assert.deepEqual(receiver.lost, [], 'no webhook-id came again for another event');
      for (const id of created) assert.ok(receiver.applied(id), `${id} was applied by the deduplicating receiver`);

      // A feed consumer that read the lost tail goes on with every new event, none skipped.
      const onwards = await httpRequest(restored.baseUrl, 'GET', `/api/events?limit=500&types=user_group.created&after=${lostCursor}`, { token });
      assert.equal(onwards.status, 200, onwards.text);
      assert.deepEqual(
        onwards.body.events.map((event) => event.data.user_group_id),
        created,
      );
    } finally {
      await receiver.stop();
      await feedDatabase.drop();
    }
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
