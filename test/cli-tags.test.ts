// `ugs tags list|rename|delete` (docs/cli.md, "Tags"), run as real processes on the database of a
// real server, which then serves what they did; and groups with tags through `ugs export` and
// `ugs import`, which know nothing of the tag set and still round-trip.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { forEachBackend } from './helpers/harness.ts';
import { httpRequest, issueTokenWithCli, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { runUgsHere } from './helpers/ugs-in-process.ts';

forEachBackend('ugs tags', (backend) => {
  let database: TestDatabase;
  let env: Record<string, string>;
  let server: ServerProcess;
  let token: string;
  let dir: string;
  // The commands run in this process (helpers/ugs-in-process.ts); the token is issued by the binary.
  const ugs = (...args: string[]) => runUgsHere(args, env);
  const upsert = async (user_groups: Record<string, unknown>[], apiToken = token) => {
    const res = await httpRequest(server.baseUrl, 'POST', '/api/users/upsert', { token: apiToken, body: { user_groups } });
    assert.equal(res.status, 200, res.text);
  };
  const listed = async (account: string, environment = 'Customer') => {
    const r = await ugs('tags', 'list', '--account', account, '--env', environment, '--json');
    assert.equal(r.code, 0, r.stderr);
    return (JSON.parse(r.stdout) as { name: string; user_group_count: number }[]).map((tag) => [tag.name, tag.user_group_count]);
  };

  before(async () => {
    database = await createTestDatabase(backend);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-tags-'));
    env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    server = await spawnServer(env);
    token = (await issueTokenWithCli(env, ['--account', 'tagged'])).token;
  });
  after(async () => {
    await server?.stop('SIGTERM');
    await database?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('ugs tags list prints every tag with its count in code-point order; rename and delete change every group, in the history as the command-line tool', async () => {
    await upsert([
      { user_group_id: 'g1', group_tags: ['beta', 'Zeta'] },
      { user_group_id: 'g2', group_tags: ['beta'] },
      { user_group_id: 't1', group_tags: ['beta'], api_environment_tag: 'Testing' },
    ]);
    const text = await ugs('tags', 'list', '--account', 'tagged');
    assert.equal(text.code, 0, text.stderr);
    assert.equal(text.stdout, 'tag\tgroups\nZeta\t1\nbeta\t2\n');
    assert.deepEqual(await listed('tagged', 'Testing'), [['beta', 1]]);

    const renamed = await ugs('tags', 'rename', 'beta', 'gamma', '--account', 'tagged');
    assert.equal(renamed.code, 0, renamed.stderr);
    assert.equal(renamed.stdout, 'renamed tag "beta" to "gamma" on 2 groups\n');
    const merged = await ugs('tags', 'rename', 'Zeta', 'gamma', '--account', 'tagged', '--json');
    assert.deepEqual(JSON.parse(merged.stdout), { name: 'gamma', user_group_count: 2, merged: true, user_groups_changed: 1 });
    const g1 = await httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=g1', { token });
    assert.deepEqual(g1.body.user_group.group_tags, ['gamma']);
    assert.deepEqual(await listed('tagged', 'Testing'), [['beta', 1]], 'the other environment is left alone');

    const deleted = await ugs('tags', 'delete', 'gamma', '--account', 'tagged');
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.equal(deleted.stdout, 'deleted tag "gamma" from 2 groups\n');
    assert.deepEqual(await listed('tagged'), []);
    const history = await httpRequest(server.baseUrl, 'GET', '/api/user/history?user_group_id=g1', { token });
    const [removed] = history.body.entries;
    assert.deepEqual(removed.details, { group_tags: { old: ['gamma'], new: [] } });
    assert.equal(removed.actor_token_id, null, 'the command-line tool acted');
  });

  it('ugs tags: an unknown tag, a bad name, an unknown account are usage errors (exit 2) that change nothing', async () => {
    await upsert([{ user_group_id: 'kept', group_tags: ['kept'] }]);
    for (const [args, message] of [
      [['rename', 'nope', 'other', '--account', 'tagged'], /no tag "nope" in Customer/],
      [['delete', 'nope', '--account', 'tagged'], /no tag "nope" in Customer/],
      [['rename', 'kept', 'x'.repeat(65), '--account', 'tagged'], /new_name/],
      [['rename', 'kept', 'kept', '--account', 'tagged'], /new_name is the current name/],
      [['list', '--account', 'nobody'], /no account "nobody"/],
      [['list', '--account', 'tagged', '--env', 'Staging'], /Staging/],
    ] as const) {
      const r = await ugs('tags', ...args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, message);
    }
    assert.deepEqual(await listed('tagged'), [['kept', 1]]);
  });

  it("import and export: groups with tags round-trip unchanged, and the imported tags join the copy's set with their counts", async () => {
    const { token: source } = await issueTokenWithCli(env, ['--account', 'tag-source']);
    await upsert([{ user_group_id: 'a', group_tags: ['z', 'y'] }, { user_group_id: 'b', group_tags: ['y'] }, { user_group_id: 'c' }], source);
    // A tag with no group is not a group's field: it is not exported.
    assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/group_tags', { token: source, body: { name: 'unused' } })).status, 201);
    const exported = await ugs('export', '--account', 'tag-source', '--env', 'Customer');
    assert.equal(exported.code, 0, exported.stderr);
    const lines = exported.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      lines.map((group) => [group.user_group_id, group.group_tags]),
      [
        ['a', ['y', 'z']],
        ['b', ['y']],
        ['c', []],
      ],
    );
    const file = path.join(dir, 'tags.ndjson');
    fs.writeFileSync(file, exported.stdout);
    assert.equal((await ugs('account', 'create', 'tag-copy')).code, 0);
    const imported = await ugs('import', file, '--account', 'tag-copy', '--env', 'Customer');
    assert.equal(imported.code, 0, imported.stderr);
    const again = await ugs('export', '--account', 'tag-copy', '--env', 'Customer');
    assert.equal(again.stdout, exported.stdout, 'the copy exports the same lines');
    assert.deepEqual(await listed('tag-copy'), [
      ['y', 2],
      ['z', 1],
    ]);
  });
});
