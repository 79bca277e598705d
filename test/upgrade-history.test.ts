// Upgrading a database that the previous release (release/previous.json, built from its commit)
// filled through its API (docs/operations.md, "Upgrades, migrations and rollback"): every answer
// that existed reads the same after the upgrade and after a rollback, and every token still
// works. On SQLite the upgrade opens in place the file the previous release wrote. Then a
// contract step: after it, the previous release and this code (which does not know it) each
// refuse to start with one line.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { spawnServer, runUgs } from './helpers/processes.ts';
import { PREVIOUS, runPreviousUgs, spawnPreviousServer } from './helpers/previous-release.ts';
import { PUBLIC_URL, answersOf, embedTokensVerify, fillThroughTheApi, recordedExpandChanges, type Answer, type Filled } from './helpers/historical-data.ts';
import { Receiver } from './helpers/webhook-receiver.ts';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest, expandChanges } from '../src/db/migrate.ts';
import { SERVICE_VERSION } from '../src/foundations/version.ts';

const expandNames = expandChanges('sqlite').map((change) => change.name);

for (const backend of BACKENDS) {
  describe(`[${backend}] upgrading from release ${PREVIOUS.version} a database it filled`, () => {
    let database: TestDatabase;
    let receiver: Receiver;
    let env: Record<string, string>;
    let filled: Filled;
    let before_: Record<string, Answer>;
    /** This code's answers once it has written too. */
    let upgraded: Record<string, Answer>;

    before(async () => {
      database = await createTestDatabase(backend);
      receiver = await new Receiver().start();
      env = {
        DATABASE_URL: database.url,
        UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'),
        UGS_PUBLIC_URL: PUBLIC_URL,
        UGS_WEBHOOK_ALLOW_PRIVATE: 'true',
      };
    });
    after(async () => {
      await receiver.stop();
      await database.drop();
    });

    it(`release ${PREVIOUS.version} fills it through its API: groups, hierarchy, tags, tokens, embed tokens, signing keys, webhooks, idempotency keys, history`, async () => {
      const old = await spawnPreviousServer(env);
      try {
        filled = await fillThroughTheApi(old.baseUrl, (args) => runPreviousUgs(args, env), receiver);
        before_ = await answersOf(old.baseUrl, filled.reads);
      } finally {
        await old.stop();
      }
      assert.equal(before_['the admin token'].status, 200);
      assert.equal(before_['the revoked token'].status, 401);
    });

    it(`after the upgrade (${backend === 'sqlite' ? 'the same file, opened in place' : 'the same database'}), every answer is the same and every token still works`, async () => {
      const server = await spawnServer(env);
      try {
        assert.deepEqual(await recordedExpandChanges(database.url), expandNames, 'this code expanded the database at start');
        const after_ = await answersOf(server.baseUrl, filled.reads);
        for (const what of Object.keys(before_)) assert.deepEqual(after_[what], before_[what], what);
        await embedTokensVerify(server.baseUrl, filled.embedTokens);
        // And it writes: a new group, read back by its own token.
        const admin = filled.reads.find((read) => read.what === 'the admin token')!.token!;
        const created = await (
          await fetch(`${server.baseUrl}/api/user`, {
            method: 'POST',
            headers: { authorization: `Token ${admin}`, 'content-type': 'application/json' },
            body: JSON.stringify({ user_group_id: 'after-upgrade', parent_user_group_id: 'globex', hierarchy_level: 'Team' }),
          })
        ).json();
        assert.equal(created.user_group.computed_properties.plan, 'pro');
        upgraded = await answersOf(server.baseUrl, filled.reads);
      } finally {
        await server.stop();
      }
    });

    it(`a rollback to release ${PREVIOUS.version} starts on the expanded database and gives this code's answers, what it wrote included`, async () => {
      const old = await spawnPreviousServer(env);
      try {
        const back = await answersOf(old.baseUrl, filled.reads);
        for (const what of Object.keys(upgraded)) assert.deepEqual(back[what], upgraded[what], what);
        await embedTokensVerify(old.baseUrl, filled.embedTokens);
      } finally {
        await old.stop();
      }
    });

    it(`after a contract step, release ${PREVIOUS.version} and a release that does not know it each refuse to start with one line`, async () => {
      // A contract change this code does not ship (it has none yet): what a later release's
      // `ugs migrate --contract` would record.
      const handle = openDatabase(database.url);
      try {
        const contract = [{ name: '0099-test-contract', kind: 'contract' as const, migration: { up: async () => undefined } }];
        const outcome = await migrateToLatest(handle, { contract: true, changes: { expand: expandChanges(handle.dialect), contract } });
        assert.deepEqual(outcome.applied, ['0099-test-contract']);
      } finally {
        await handle.close();
      }
      const old = await spawnPreviousServer(env).then(
        (server) => server.stop().then(() => assert.fail('the previous release started')),
        (err: Error) => err.message,
      );
      const oldLines = old.split('\n').filter((line) => line.includes('failed to start'));
      assert.equal(oldLines.length, 1, old);
      // 0.1.0 says it through Kysely's Migrator (a row it does not know); later releases in their own words.
      assert.match(
        oldLines[0],
        new RegExp(`contracted by (release )?${SERVICE_VERSION.replaceAll('.', '\\.')}\\b.*run ${SERVICE_VERSION.replaceAll('.', '\\.')} or later`),
      );

      const refused = await runUgs(['migrate'], env);
      assert.equal(refused.code, 1);
      assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr);
      assert.match(
        refused.stderr,
        /this database was contracted by release .+ \(0099-test-contract\), which .+ does not know: run .+ or later, or restore the backup/,
      );
      const current = await spawnServer(env).then(
        (server) => server.stop().then(() => assert.fail('this code started')),
        (err: Error) => err.message,
      );
      assert.match(current, /failed to start: this database was contracted by release/);
    });
  });
}
