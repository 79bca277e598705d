// A start with secret keys that cannot open the stored user group tokens is refused, with a
// message that names the key the database expects (or the missing keys) and the ways out; it
// never serves 500s for them. As a user meets it: the server started as a process, restarted
// with another key, without its key file, with a new key before and after `ugs keys
// introduce`, and without the old key before `ugs keys reencrypt` moved everything.
import { describe, it, before, after } from 'node:test';
import { decodeProtectedHeader } from 'jose';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { httpRequest, issueTokenWithCli, runNode, runUgs, SERVER_ENTRY, spawnServer } from './helpers/processes.ts';
import { Keyring } from '../src/crypto/keyring.ts';

const newKey = () => crypto.randomBytes(32).toString('base64');
const keyId = (key: string) => new Keyring([Buffer.from(key, 'base64')]).currentKeyId;

for (const backend of BACKENDS) {
  describe(`[${backend}] secret keys at start`, () => {
    let database: TestDatabase;
    let dir: string;
    let apiToken: string;
    const keyA = newKey();
    const keyB = newKey();
    const groupTokens: string[] = [];
    let signingKid: string;

    /** A start that is expected to end by itself: how it ended and what it printed. */
    const startExpectingRefusal = (env: Record<string, string>) =>
      runNode([SERVER_ENTRY], { PORT: '0', HOST: '127.0.0.1', UGS_BOOTSTRAP: 'false', UGS_SECRET_KEY: '', DATABASE_URL: database.url, ...env });

    before(async () => {
      database = await createTestDatabase(backend);
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-keys-'));
      const issued = await issueTokenWithCli({ DATABASE_URL: database.url });
      apiToken = issued.token;
      const server = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: keyA });
      try {
        for (const id of ['k1', 'k2', 'k3']) {
          const created = await httpRequest(server.baseUrl, 'POST', '/api/user', { token: apiToken, body: { user_group_id: id } });
          assert.equal(created.status, 201);
          groupTokens.push(created.body.user_group.token);
        }
        const embed = await httpRequest(server.baseUrl, 'POST', '/api/embed_token', { token: apiToken, body: { user_group_id: 'k1' } });
        assert.equal(embed.status, 200);
        signingKid = decodeProtectedHeader(embed.body.embed_token).kid!;
      } finally {
        assert.equal((await server.stop()).code, 0);
      }
    });

    after(async () => {
      await database?.drop();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    /** Refused in one line, before listening, naming the key the database expects; no key printed. */
    const assertRefusedInOneLine = (run: { code: number | null; stdout: string; stderr: string }, expected: RegExp) => {
      assert.equal(run.code, 1, run.stdout + run.stderr);
      assert.doesNotMatch(run.stdout + run.stderr, /Server listening/);
      assert.equal(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
      assert.match(run.stderr.trimEnd(), expected);
      assert.ok(!run.stderr.includes(keyA) && !run.stderr.includes(keyB), 'no key is printed');
    };

    it('keys at start: another key is refused in one line naming the key the database seals under and how to pass it', async () => {
      const run = await startExpectingRefusal({ UGS_SECRET_KEY: keyB });
      assertRefusedInOneLine(
        run,
        new RegExp(
          `^refusing to start: this database seals its secrets under key ${keyId(keyA)}, which the configured keys \\(${keyId(keyB)}, from UGS_SECRET_KEY\\) do not include: pass it with UGS_SECRET_KEY="<key>" or UGS_KEY_FILE=<a file holding it> \\(if that key is lost for good: npx ugs keys reissue ${keyId(keyA)}\\)$`,
        ),
      );
    });

    it('keys at start: without its key file it is refused naming the key, and no key file is made', async () => {
      const keyFile = path.join(dir, 'secret.key');
      const run = await startExpectingRefusal({ UGS_KEY_FILE: keyFile });
      assertRefusedInOneLine(
        run,
        new RegExp(
          `no secret key is configured \\(UGS_SECRET_KEY is unset, and there is no key file .*secret\\.key\\); this database seals its secrets under key ${keyId(keyA)}`,
        ),
      );
      assert.equal(fs.existsSync(keyFile), false, 'no new key file');
    });

    it('keys at start: a new key first is refused until ugs keys introduce makes it the sealing key; then "new,old" serves every group, and "old,new" is refused', async () => {
      const before = await startExpectingRefusal({ UGS_SECRET_KEY: `${keyB},${keyA}` });
      assertRefusedInOneLine(
        before,
        new RegExp(`key ${keyId(keyB)}, the first of the configured keys .* has never been introduced to it .*npx ugs keys introduce`),
      );

      const refused = await runUgs(['keys', 'introduce'], { DATABASE_URL: database.url, UGS_SECRET_KEY: keyB });
      assert.equal(refused.code, 2, 'a new key alone cannot be introduced: it would not open what is stored');
      assert.match(refused.stderr, new RegExp(`the keys after it must open what this database holds, sealed under key ${keyId(keyA)}`));
      const introduced = await runUgs(['keys', 'introduce', '--json'], { DATABASE_URL: database.url, UGS_SECRET_KEY: `${keyB},${keyA}` });
      assert.equal(introduced.code, 0, introduced.stderr);
      assert.deepEqual(JSON.parse(introduced.stdout), { sealing_key_id: keyId(keyB), previous_sealing_key_id: keyId(keyA) });

      const server = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: `${keyB},${keyA}` });
      try {
        const got = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=k1', { token: apiToken });
        assert.equal(got.status, 200);
        assert.equal(got.body.user_group.token, groupTokens[0]);
      } finally {
        assert.equal((await server.stop()).code, 0);
      }
      const older = await startExpectingRefusal({ UGS_SECRET_KEY: `${keyA},${keyB}` });
      assertRefusedInOneLine(
        older,
        new RegExp(`key ${keyId(keyA)}, the first of the configured keys .* is one it sealed under before: put ${keyId(keyB)} first`),
      );
    });

    it('keys at start: without the old key before ugs keys reencrypt, the refusal names what each missing key sealed and the ways out', async () => {
      const run = await startExpectingRefusal({ UGS_SECRET_KEY: keyB });
      assert.equal(run.code, 1, run.stdout + run.stderr);
      assert.match(run.stderr, /refusing to start: 3 stored user group tokens and 1 embed signing key are sealed under secret keys that are not configured/);
      assert.match(run.stderr, new RegExp(`key id ${keyId(keyA)}: 3 tokens, embed signing key ${signingKid}`));
      assert.match(run.stderr, new RegExp(`The configured keys \\(from UGS_SECRET_KEY\\): ${keyId(keyB)}\\.`));
      assert.match(run.stderr, new RegExp(`UGS_SECRET_KEY="<key ${keyId(keyB)}>,<that key>"`));
      assert.match(run.stderr, new RegExp(`npx ugs keys reissue ${keyId(keyA)}`));
      assert.ok(!run.stderr.includes(keyA) && !run.stderr.includes(keyB), 'no key is printed');
    });

    it('keys at start: after ugs keys reissue of a lost key the groups get new tokens and the server starts', async () => {
      const reissued = await runUgs(['keys', 'reissue', keyId(keyA), '--json'], { DATABASE_URL: database.url, UGS_SECRET_KEY: keyB });
      assert.equal(reissued.code, 0, reissued.stderr);
      assert.deepEqual(JSON.parse(reissued.stdout).keys, [{ key_id: keyId(keyA), reissued: 3, replaced_signing_keys: [signingKid] }]);
      const server = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: keyB });
      try {
        // The lost key's embed signing key no longer signs, but stays published while its tokens live.
        const signed = await httpRequest(server.baseUrl, 'POST', '/api/embed_token', { token: apiToken, body: { user_group_id: 'k3' } });
        assert.equal(signed.status, 200);
        const newKid = decodeProtectedHeader(signed.body.embed_token).kid;
        assert.notEqual(newKid, signingKid);
        const jwks = await httpRequest(server.baseUrl, 'GET', '/.well-known/jwks.json');
        assert.deepEqual(jwks.body.keys.map((key: { kid: string }) => key.kid).sort(), [signingKid, newKid].sort());
        const old = await httpRequest(server.baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${groupTokens[1]}` } });
        assert.equal(old.status, 401, 'the old token no longer works');
        const got = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=k2', { token: apiToken });
        assert.equal(got.status, 200);
        assert.notEqual(got.body.user_group.token, groupTokens[1]);
        const fresh = await httpRequest(server.baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${got.body.user_group.token}` } });
        assert.equal(fresh.status, 200);
        const history = await httpRequest(server.baseUrl, 'GET', '/api/user/history?user_group_id=k2', { token: apiToken });
        assert.equal(history.body.entries[0].action, 'user_group.rotate');
        assert.equal(history.body.entries[0].actor_token_id, null, 'the command-line tool acted');
      } finally {
        assert.equal((await server.stop()).code, 0);
      }
    });

    it('keys at start: ugs keys reissue refuses a key that is configured (usage error, nothing changed)', async () => {
      const run = await runUgs(['keys', 'reissue', keyId(keyB)], { DATABASE_URL: database.url, UGS_SECRET_KEY: keyB });
      assert.equal(run.code, 2);
      assert.match(run.stderr, /is configured, so its tokens can be read/);
    });
  });
}
