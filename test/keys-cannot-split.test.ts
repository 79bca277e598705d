// Keys that cannot split (docs/security.md, "Secret keys"). As a new user met it: a clone where
// the SQLite walk-through left data/secret.key, and `ugs import` run against the server's
// database without UGS_SECRET_KEY. The tool sealed the new group's token under that stray key,
// the server answered that group with 500 and then refused to restart. Now every process whose
// first key is not the database's sealing key refuses to write, in one line naming the key the
// database expects, and writes nothing; the server restarts and serves every group. Real
// processes: `ugs` (bin/ugs.js) and the server, on SQLite and PostgreSQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { httpRequest, issueTokenWithCli, runNode, runUgs, SERVER_ENTRY, spawnServer, type CommandResult, type ServerProcess } from './helpers/processes.ts';
import { Keyring } from '../src/crypto/keyring.ts';
import { openDatabase } from '../src/db/database.ts';

const newKey = () => crypto.randomBytes(32).toString('base64');
const keyId = (key: string) => new Keyring([Buffer.from(key, 'base64')]).currentKeyId;

/** One line on stderr that names the key the database expects and how to pass one; nothing on stdout. */
function assertRefusedToWrite(run: CommandResult, expected: string, what: string): void {
  assert.equal(run.code, 1, `${what}: ${run.stdout}${run.stderr}`);
  assert.equal(run.stdout, '', `${what} printed nothing`);
  assert.equal(run.stderr.trimEnd().split('\n').length, 1, `${what}: one line\n${run.stderr}`);
  assert.match(run.stderr, /^ugs: refusing to write: /, what);
  assert.match(run.stderr, new RegExp(`\\b${expected}\\b`), `${what} names the key the database expects`);
  assert.match(run.stderr, /UGS_SECRET_KEY/, `${what} says how to pass the key`);
}

for (const backend of BACKENDS) {
  describe(`[${backend}] keys that cannot split`, () => {
    // A clone where the SQLite walk-through ran: its data/ holds a key file of its own.
    const clone = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-clone-'));
    const strayKey = newKey();
    const serverKey = newKey();
    let database: TestDatabase;
    let env: Record<string, string>;
    let apiToken: string;
    let server: ServerProcess | undefined;
    const groupTokens = new Map<string, string>();

    /** `ugs` run in the clone, with the environment a new user had: DATABASE_URL, and no UGS_SECRET_KEY unless given. */
    const ugsInClone = (args: string[], keys: Record<string, string> = {}) =>
      runUgs(args, { ...env, UGS_SECRET_KEY: '', UGS_KEY_FILE: '', ...keys }, { cwd: clone });

    /** What the database holds, read by the server: every group with its token, the webhook endpoints, the published signing keys. */
    async function served(): Promise<{ groups: string[]; endpoints: number; kids: string[] }> {
      const base = server!.baseUrl;
      const listed = await httpRequest(base, 'GET', '/api/users?limit=500', { token: apiToken });
      assert.equal(listed.status, 200, listed.text);
      for (const [id, token] of groupTokens) {
        const got = await httpRequest(base, 'GET', `/api/user/lookup?user_group_id=${id}`, { token: apiToken });
        assert.equal(got.status, 200, `group ${id}: ${got.text}`);
        assert.equal(got.body.user_group.token, token, `group ${id} keeps its token`);
        const embed = await httpRequest(base, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${token}` } });
        assert.equal(embed.status, 200, `the token of ${id} works on the embed side: ${embed.text}`);
      }
      const endpoints = await httpRequest(base, 'GET', '/api/webhook_endpoints', { token: apiToken });
      assert.equal(endpoints.status, 200, endpoints.text);
      const jwks = await httpRequest(base, 'GET', '/.well-known/jwks.json');
      return {
        groups: listed.body.user_groups.map((g: { provided_id: string }) => g.provided_id).sort(),
        endpoints: endpoints.body.webhook_endpoints.length,
        kids: jwks.body.keys.map((k: { kid: string }) => k.kid).sort(),
      };
    }

    before(async () => {
      fs.mkdirSync(path.join(clone, 'data'), { mode: 0o700 });
      fs.writeFileSync(path.join(clone, 'data', 'secret.key'), `${strayKey}\n`, { mode: 0o600 });
      fs.writeFileSync(path.join(clone, 'groups.ndjson'), `${JSON.stringify({ user_group_id: 'imported-1' })}\n`);
      // SQLite: the walk-through's own layout, the database beside the stray key; PostgreSQL: a database of its own.
      database =
        backend === 'sqlite' ? { url: `sqlite:${path.join(clone, 'data', 'ugs.sqlite')}`, drop: async () => undefined } : await createTestDatabase(backend);
      env = { DATABASE_URL: database.url };
      apiToken = (await issueTokenWithCli({ ...env, UGS_SECRET_KEY: '' }, ['--account', 'acme', '--scopes', 'read,write,admin'])).token;
      server = await spawnServer({ ...env, UGS_SECRET_KEY: serverKey });
      for (const id of ['g1', 'g2']) {
        const created = await httpRequest(server.baseUrl, 'POST', '/api/user', { token: apiToken, body: { user_group_id: id } });
        assert.equal(created.status, 201, created.text);
        groupTokens.set(id, created.body.user_group.token);
      }
      const embed = await httpRequest(server.baseUrl, 'POST', '/api/embed_token', { token: apiToken, body: { user_group_id: 'g1' } });
      assert.equal(embed.status, 200, embed.text);
    });

    after(async () => {
      await server?.stop();
      await database?.drop();
      fs.rmSync(clone, { recursive: true, force: true });
    });

    /** The commands that seal something, each of which must refuse. */
    const writes: [string, string[]][] = [
      ['import', ['import', 'groups.ndjson', '--account', 'acme', '--env', 'Customer']],
      ['webhooks create', ['webhooks', 'create', '--account', 'acme', '--url', 'https://example.com/hook']],
      ['keys embed rotate', ['keys', 'embed', 'rotate', '--activate-in', '0s']],
      ['keys reencrypt', ['keys', 'reencrypt']],
    ];

    it('keys: ugs without UGS_SECRET_KEY, in a clone with a stray data/secret.key, refuses every write in one line naming the database key, and writes nothing', async () => {
      const before = await served();
      for (const [what, args] of writes) assertRefusedToWrite(await ugsInClone(args), keyId(serverKey), what);
      assert.deepEqual(await served(), before, 'nothing was written');
      const lookup = await httpRequest(server!.baseUrl, 'GET', '/api/user/lookup?user_group_id=imported-1', { token: apiToken });
      assert.equal(lookup.status, 404, 'the import created no group');
    });

    it('keys: ugs with a wrong UGS_SECRET_KEY, or with a new key first that the database was never introduced to, refuses in one line and writes nothing', async () => {
      const before = await served();
      const wrongKey = newKey();
      for (const [what, args] of writes) assertRefusedToWrite(await ugsInClone(args, { UGS_SECRET_KEY: wrongKey }), keyId(serverKey), `${what} (a wrong key)`);
      for (const [what, args] of writes) {
        const run = await ugsInClone(args, { UGS_SECRET_KEY: `${wrongKey},${serverKey}` });
        assertRefusedToWrite(run, keyId(serverKey), `${what} (a new key first)`);
        assert.match(run.stderr, new RegExp(`key ${keyId(wrongKey)}, the first of the configured keys .* has never been introduced to it`));
        assert.match(run.stderr, /npx ugs keys introduce/);
      }
      assert.deepEqual(await served(), before, 'nothing was written');
    });

    it('keys: the server itself refuses to start with the stray key (or without a key on PostgreSQL), in one line naming the database key', async () => {
      const run = await runNode([SERVER_ENTRY], { ...env, PORT: '0', HOST: '127.0.0.1', UGS_BOOTSTRAP: 'false', UGS_SECRET_KEY: '', UGS_KEY_FILE: '' }, clone);
      assert.equal(run.code, 1, run.stdout + run.stderr);
      assert.doesNotMatch(run.stdout + run.stderr, /Server listening/);
      assert.equal(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
      assert.match(run.stderr, new RegExp(`^refusing to start: .*\\b${keyId(serverKey)}\\b.*UGS_SECRET_KEY`));
      if (backend === 'postgres') assert.match(run.stderr, /on PostgreSQL no key file is read unless UGS_KEY_FILE names one/);
      else assert.match(run.stderr, new RegExp(`${keyId(strayKey)}, from the key file .*secret\\.key`));
    });

    it('keys: after all that, the server restarts with its key and serves every group with its token', async () => {
      const before = await served();
      assert.deepEqual((await server!.stop()).code, 0);
      server = await spawnServer({ ...env, UGS_SECRET_KEY: serverKey });
      assert.deepEqual(await served(), before);
      assert.deepEqual(before.groups, ['g1', 'g2']);
    });

    it('keys: with the database key, the same import runs; the new group is sealed under it and served', async () => {
      const run = await ugsInClone(writes[0][1], { UGS_SECRET_KEY: serverKey });
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /imported 1 rows: 1 created/);
      const got = await httpRequest(server!.baseUrl, 'GET', '/api/user/lookup?user_group_id=imported-1', { token: apiToken });
      assert.equal(got.status, 200, got.text);
      groupTokens.set('imported-1', got.body.user_group.token);
      await served();
    });
  });

  describe(`[${backend}] the first key of a database`, () => {
    const databases: TestDatabase[] = [];
    after(async () => {
      for (const database of databases) await database.drop();
    });

    it('keys: two servers starting at once on an empty database with different keys: one introduces its key and serves, the other refuses naming it', async () => {
      const database = await createTestDatabase(backend);
      databases.push(database);
      const keys = [newKey(), newKey()];
      const starts = await Promise.allSettled(keys.map((key) => spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: key })));
      const served = starts.flatMap((start, i) => (start.status === 'fulfilled' ? [{ server: start.value, key: keys[i] }] : []));
      try {
        assert.equal(
          served.length,
          1,
          `exactly one of the two serves: ${starts.map((s) => (s.status === 'rejected' ? String(s.reason) : 'started')).join('\n')}`,
        );
        const refused = starts.find((start) => start.status === 'rejected') as PromiseRejectedResult;
        assert.match(String(refused.reason), new RegExp(`refusing to start: this database seals its secrets under key ${keyId(served[0].key)}`));
      } finally {
        for (const { server } of served) await server.stop();
      }
    });

    it('keys: when the sealing key itself is lost for good, ugs keys reissue with a new key makes that key the sealing key; the server then starts with it', async () => {
      const database = await createTestDatabase(backend);
      databases.push(database);
      const [lost, replacement] = [newKey(), newKey()];
      const env = { DATABASE_URL: database.url };
      const { token } = await issueTokenWithCli({ ...env, UGS_SECRET_KEY: '' });
      let server = await spawnServer({ ...env, UGS_SECRET_KEY: lost });
      const created = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'r1' } });
      assert.equal(created.status, 201);
      await server.stop();

      assertRefusedToWrite(await runUgs(['keys', 'reencrypt'], { ...env, UGS_SECRET_KEY: replacement }), keyId(lost), 'a new key before the reissue');
      const reissued = await runUgs(['keys', 'reissue', keyId(lost), '--json'], { ...env, UGS_SECRET_KEY: replacement });
      assert.equal(reissued.code, 0, reissued.stderr);
      assert.equal(JSON.parse(reissued.stdout).keys[0].reissued, 1);
      server = await spawnServer({ ...env, UGS_SECRET_KEY: replacement });
      try {
        const got = await httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=r1', { token });
        assert.equal(got.status, 200, got.text);
        assert.notEqual(got.body.user_group.token, created.body.user_group.token, 'a new token, under the new key');
      } finally {
        await server.stop();
      }
    });

    it('keys: a database an earlier version wrote (no sealing key recorded) is introduced to the key its secrets are sealed under; a stray key is refused', async () => {
      const database = await createTestDatabase(backend);
      databases.push(database);
      const key = newKey();
      const env = { DATABASE_URL: database.url };
      const { token } = await issueTokenWithCli({ ...env, UGS_SECRET_KEY: '' });
      let server = await spawnServer({ ...env, UGS_SECRET_KEY: key });
      assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'old-1' } })).status, 201);
      await server.stop();
      // As the previous release leaves it: secrets sealed, and no record of the key.
      const handle = openDatabase(database.url);
      await handle.db.deleteFrom('secret_keys').execute();
      await handle.close();

      const file = path.join(os.tmpdir(), `ugs-empty-${process.pid}.ndjson`);
      fs.writeFileSync(file, '');
      const stray = await runUgs(['import', file, '--account', 'acme', '--env', 'Customer'], { ...env, UGS_SECRET_KEY: newKey() });
      fs.rmSync(file);
      assertRefusedToWrite(stray, keyId(key), 'a stray key on an unrecorded database');
      server = await spawnServer({ ...env, UGS_SECRET_KEY: key });
      try {
        const got = await httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=old-1', { token });
        assert.equal(got.status, 200, got.text);
      } finally {
        await server.stop();
      }
      const status = await runUgs(['keys', 'status', '--json'], { ...env, UGS_SECRET_KEY: key });
      assert.equal(status.code, 0, status.stderr);
      assert.equal(JSON.parse(status.stdout).database_sealing_key_id, keyId(key), 'the start recorded the key the secrets are sealed under');
    });
  });
}
