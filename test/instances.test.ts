// The instance registry (docs/operations.md, "Upgrades, migrations and rollback"): each server
// process records itself with its release and a heartbeat; `ugs instances` lists them; the
// contract step refuses while one whose code does not know a pending contract change is alive;
// instances that disagree on a setting they must share say so.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createTestDatabase } from './helpers/backends.ts';
import { forEachBackend } from './helpers/harness.ts';
import { runUgs, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { openDatabase } from '../src/db/database.ts';
import { SchemaRefused, expandChanges, migrateToLatest } from '../src/db/migrate.ts';
import { refuseContractWhileOlderAlive } from '../src/process/instance-registry.ts';
import { SERVICE_VERSION } from '../src/foundations/version.ts';

forEachBackend('instances', (backend) => {
  it('ugs instances lists every serving process with its release; one that stops leaves the list', async () => {
    const database = await createTestDatabase(backend);
    const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    const servers: ServerProcess[] = [];
    try {
      servers.push(await spawnServer(env), await spawnServer(env));
      const listed = await runUgs(['instances', '--json'], env);
      assert.equal(listed.code, 0, listed.stderr);
      const rows = JSON.parse(listed.stdout).instances as { pid: number; version: string; schema: string; settings: Record<string, unknown> }[];
      assert.deepEqual(rows.map((row) => row.pid).sort(), servers.map((server) => server.child.pid).sort());
      for (const row of rows) {
        assert.equal(row.version, SERVICE_VERSION);
        assert.equal(row.schema, expandChanges(backend).at(-1)!.name);
        assert.deepEqual(row.settings, { UGS_WEBHOOK_ALLOW_PRIVATE: false });
      }
      await servers[0].stop();
      const after = JSON.parse((await runUgs(['instances', '--json'], env)).stdout).instances as { pid: number }[];
      assert.deepEqual(
        after.map((row) => row.pid),
        [servers[1].child.pid],
      );
    } finally {
      await Promise.all(servers.map((server) => server.stop()));
      await database.drop();
    }
  });

  it('the contract step refuses while an instance whose code does not know the change is alive, naming it, and runs once it is gone', async () => {
    const database = await createTestDatabase(backend);
    const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    const server = await spawnServer(env);
    const handle = openDatabase(database.url);
    let ran = 0;
    const changes = {
      expand: expandChanges(handle.dialect),
      contract: [{ name: '0099-drop-something', kind: 'contract' as const, migration: { up: async () => void ran++ } }],
    };
    try {
      // With no contract change pending, the command says so while instances serve.
      const upToDate = await runUgs(['migrate', '--contract'], env);
      assert.equal(upToDate.code, 0, upToDate.stderr);
      assert.match(upToDate.stdout, /database is up to date/);

      const refused = await migrateToLatest(handle, { contract: true, beforeContract: refuseContractWhileOlderAlive, changes }).then(
        () => assert.fail('contracted while an older instance serves'),
        (err: Error) => err,
      );
      assert.ok(refused instanceof SchemaRefused);
      assert.match(
        refused.message,
        new RegExp(`not contracting \\(0099-drop-something\\): 1 live instance\\(s\\) .*:${server.child.pid} \\(${SERVICE_VERSION}\\)`),
      );
      assert.equal(ran, 0, 'nothing of it ran');

      await server.stop();
      const outcome = await migrateToLatest(handle, { contract: true, beforeContract: refuseContractWhileOlderAlive, changes });
      assert.deepEqual(outcome.applied, ['0099-drop-something']);
      assert.equal(ran, 1);
    } finally {
      await server.stop();
      await handle.close();
      await database.drop();
    }
  });

  it('instances that disagree on UGS_WEBHOOK_ALLOW_PRIVATE each log a warning naming the other', async () => {
    const database = await createTestDatabase(backend);
    const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    const servers: ServerProcess[] = [];
    try {
      servers.push(await spawnServer({ ...env, UGS_WEBHOOK_ALLOW_PRIVATE: 'false' }));
      servers.push(await spawnServer({ ...env, UGS_WEBHOOK_ALLOW_PRIVATE: 'true' }));
      const [strict, open] = servers;
      const said = (server: ServerProcess, mine: boolean, other: ServerProcess, theirs: boolean) =>
        server.waitForOutput(
          new RegExp(
            `"level":40.*instances on this database disagree on UGS_WEBHOOK_ALLOW_PRIVATE: this one has ${mine}, [^"]*:${other.child.pid} \\(${SERVICE_VERSION.replaceAll('.', '\\.')}\\) has ${theirs}; an instance set to false takes the others' deliveries`,
          ),
          20_000,
        );
      await said(open, true, strict, false); // at its start
      await said(strict, false, open, true); // at its next heartbeat (every 10 s)
    } finally {
      await Promise.all(servers.map((server) => server.stop()));
      await database.drop();
    }
  });
});
