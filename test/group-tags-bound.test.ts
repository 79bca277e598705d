// The bound of an environment's tag set (docs/api.md, "Tags"): at most
// UGS_MAX_TAGS_PER_ENVIRONMENT tags. Every write that would add one past it is refused with
// 409 tag_limit_reached and changes nothing (in the bulk upsert and `ugs import`, that item
// fails and the others go on); the tags the environment has stay usable; a rename counts its
// new name in the old one's place. The bound is per account and environment, holds across
// server processes, and a set over it (the setting lowered) keeps every read.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildTestApp, forEachBackend, useTestApp, type AnyAnswer, type HttpResult } from './helpers/harness.ts';
import { httpRequest, issueTokenWithCli, runUgs, useServerProcesses } from './helpers/processes.ts';

const BOUND = 5;
const tags = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}${i + 1}`);

forEachBackend('tags: the bound of an environment', (backend) => {
  const t = useTestApp(backend, { config: { maxTagsPerEnvironment: BOUND } });
  let accounts = 0;
  /** Each test in an account of its own, so that its tags are its own. */
  const freshToken = async (env: 'Customer' | 'Testing' | null = null) =>
    (await t.issueToken({ account: `bound-${++accounts}`, scopes: ['read', 'write'], env })).token;

  async function listed(token: string, env = 'Customer'): Promise<[string, number][]> {
    const res = await t.request('GET', '/api/group_tags', { token, query: { limit: '500', api_environment_tag: env } });
    assert.equal(res.status, 200, res.text);
    return res.body.group_tags.map((tag): [string, number] => [tag.name, tag.user_group_count]);
  }
  /** What a refused write must leave as it was: the set, the groups and the history, in both environments. */
  async function state(token: string): Promise<string> {
    const parts: unknown[] = [];
    for (const env of ['Customer', 'Testing']) {
      const groups = await t.request('GET', '/api/users', { token, query: { limit: '500', api_environment_tag: env } });
      parts.push(await listed(token, env), groups.text);
    }
    const history = await t.handle.db
      .selectFrom('audit_log')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirst();
    return JSON.stringify([...parts, Number(history?.n)]);
  }
  function assertLimitReached(res: HttpResult<AnyAnswer>, what: string): void {
    assert.equal(res.status, 409, `${what}: ${res.text}`);
    assert.equal(res.body.error.code, 'tag_limit_reached', what);
    assert.match(res.body.error.message, /Customer has 5 tags, the most an environment may have/, what);
  }
  const create = async (token: string, body: Record<string, unknown>) => {
    const res = await t.request('POST', '/api/user', { token, body });
    assert.equal(res.status, 201, res.text);
  };

  it('tags: at UGS_MAX_TAGS_PER_ENVIRONMENT, a create, get-or-create, PUT or POST /api/group_tags that would add a tag is 409 tag_limit_reached and changes nothing; the tags it has stay usable', async () => {
    const token = await freshToken();
    await create(token, { user_group_id: 'full', group_tags: tags('t', BOUND) });
    const before = await state(token);
    const refusals: [string, HttpResult<AnyAnswer>][] = [
      ['create', await t.request('POST', '/api/user', { token, body: { user_group_id: 'new', group_tags: ['t1', 'one-more'] } })],
      ['get-or-create', await t.request('GET', '/api/user', { token, body: { user_group_id: 'new', group_tags: ['one-more'] } })],
      ['PUT', await t.request('PUT', '/api/user', { token, body: { user_group_id: 'full', name: 'renamed', group_tags: ['t1', 'one-more'] } })],
      ['POST /api/group_tags', await t.request('POST', '/api/group_tags', { token, body: { name: 'one-more' } })],
    ];
    for (const [what, res] of refusals) assertLimitReached(res, what);
    assert.equal(await state(token), before, 'a refused write changed something');
    // The tags it has: given to new groups and taken off old ones as before.
    await create(token, { user_group_id: 'reuse', group_tags: ['t2', 't3'] });
    const put = await t.request('PUT', '/api/user', { token, body: { user_group_id: 'full', group_tags: ['t1'] } });
    assert.equal(put.status, 200, put.text);
    assert.deepEqual(await listed(token), [
      ['t1', 1],
      ['t2', 1],
      ['t3', 1],
      ['t4', 0],
      ['t5', 0],
    ]);
    // A tag deleted makes room for one more.
    assert.equal((await t.request('DELETE', '/api/group_tags', { token, query: { name: 't5' } })).status, 200);
    const room = await t.request('PUT', '/api/user', { token, body: { user_group_id: 'full', group_tags: ['one-more'] } });
    assert.equal(room.status, 200, room.text);
    assertLimitReached(await t.request('POST', '/api/group_tags', { token, body: { name: 'and-another' } }), 'after the room was taken');
  });

  it('tags: the bound is per account and environment: one environment at its bound leaves the other, and other accounts, adding tags', async () => {
    const full = await freshToken();
    const other = await freshToken();
    await create(full, { user_group_id: 'full', group_tags: tags('t', BOUND) });
    assertLimitReached(await t.request('POST', '/api/group_tags', { token: full, body: { name: 'x' } }), 'the full environment');
    const testing = await t.request('POST', '/api/user', {
      token: full,
      body: { user_group_id: 'full', api_environment_tag: 'Testing', group_tags: tags('t', BOUND) },
    });
    assert.equal(testing.status, 201, testing.text);
    const otherAccount = await t.request('POST', '/api/user', { token: other, body: { user_group_id: 'full', group_tags: tags('u', BOUND) } });
    assert.equal(otherAccount.status, 201, otherAccount.text);
    assert.equal((await listed(full, 'Testing')).length, BOUND);
    assert.equal((await listed(other)).length, BOUND);
  });

  it("tags: at the bound, a rename onto a new name is allowed (it takes the old name's place), and so is a merge; a rename never passes the bound", async () => {
    const token = await freshToken();
    await create(token, { user_group_id: 'a', group_tags: tags('t', BOUND) });
    await create(token, { user_group_id: 'b', group_tags: ['t1'] });
    const renamed = await t.request('POST', '/api/group_tags/rename', { token, body: { name: 't1', new_name: 'renamed' } });
    assert.equal(renamed.status, 200, renamed.text);
    assert.deepEqual(renamed.body.group_tag, { name: 'renamed', user_group_count: 2 });
    // Still at the bound: the renamed tag took the old one's place.
    assertLimitReached(await t.request('POST', '/api/group_tags', { token, body: { name: 'one-more' } }), 'after the rename');
    const merged = await t.request('POST', '/api/group_tags/rename', { token, body: { name: 't2', new_name: 'renamed' } });
    assert.equal(merged.status, 200, merged.text);
    assert.equal(merged.body.merged, true);
    // The merge made room for one.
    assert.equal((await t.request('POST', '/api/group_tags', { token, body: { name: 'one-more' } })).status, 201);
    assertLimitReached(await t.request('POST', '/api/group_tags', { token, body: { name: 'and-another' } }), 'after the merge');
    assert.deepEqual(
      (await listed(token)).map(([name]) => name),
      ['one-more', 'renamed', 't3', 't4', 't5'],
    );
  });

  it('bulk upsert: an item that would add a tag past the bound fails alone with tag_limit_reached; the items around it are written, and one call may fill the set up to the bound', async () => {
    const token = await freshToken();
    await create(token, { user_group_id: 'seed', group_tags: tags('t', 3) });
    const res = await t.request('POST', '/api/users/upsert', {
      token,
      body: {
        user_groups: [
          { user_group_id: 'n1', group_tags: ['t1', 'new-4'] }, // the 4th tag
          { user_group_id: 'n2', group_tags: ['new-5'] }, // the 5th
          { user_group_id: 'n3', group_tags: ['new-6'] }, // one too many
          { user_group_id: 'n4', group_tags: ['t2'] }, // a tag it has
          { user_group_id: 'seed', group_tags: ['t1', 'new-7'] }, // an existing group, one too many
          { user_group_id: 'n5' }, // no tag
          { user_group_id: 'n6', api_environment_tag: 'Testing', group_tags: ['new-6'] }, // another environment
        ],
      },
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.results.map((r) => [r.user_group_id, r.status, r.error?.code ?? null]),
      [
        ['n1', 'created', null],
        ['n2', 'created', null],
        ['n3', 'failed', 'tag_limit_reached'],
        ['n4', 'created', null],
        ['seed', 'failed', 'tag_limit_reached'],
        ['n5', 'created', null],
        ['n6', 'created', null],
      ],
    );
    assert.deepEqual(await listed(token), [
      ['new-4', 1],
      ['new-5', 1],
      ['t1', 2],
      ['t2', 2],
      ['t3', 1],
    ]);
    const seed = await t.request('GET', '/api/user/lookup', { token, query: { user_group_id: 'seed' } });
    assert.deepEqual(seed.body.user_group.group_tags, ['t1', 't2', 't3'], 'the failed item left the group as it was');
    const n3 = await t.request('GET', '/api/user/lookup', { token, query: { user_group_id: 'n3' } });
    assert.equal(n3.status, 404, 'the failed item created nothing');
  });

  it('tags: a set over the bound (UGS_MAX_TAGS_PER_ENVIRONMENT lowered) still lists and reads, and takes every write that adds no tag', async () => {
    const token = await freshToken();
    await create(token, { user_group_id: 'over', group_tags: tags('t', BOUND) });
    const lowered = await buildTestApp({ handle: t.handle }, { keys: [Buffer.from(t.secretKey, 'base64')], config: { maxTagsPerEnvironment: 2 } });
    try {
      const list = await lowered.request('GET', '/api/group_tags', { token });
      assert.equal(list.status, 200, list.text);
      assert.equal(list.body.group_tags.length, BOUND);
      const filtered = await lowered.request('GET', '/api/users', { token, query: { tag: 't3' } });
      assert.deepEqual(
        filtered.body.user_groups.map((g) => g.provided_id),
        ['over'],
      );
      for (const body of [
        { user_group_id: 'over', name: 'renamed' },
        { user_group_id: 'over', group_tags: ['t1', 't2'] },
      ]) {
        const res = await lowered.request('PUT', '/api/user', { token, body });
        assert.equal(res.status, 200, res.text);
      }
      const rename = await lowered.request('POST', '/api/group_tags/rename', { token, body: { name: 't1', new_name: 'fresh' } });
      assert.equal(rename.status, 409, rename.text);
      assert.equal(rename.body.error.code, 'tag_limit_reached');
      const added = await lowered.request('POST', '/api/group_tags', { token, body: { name: 'one-more' } });
      assert.equal(added.status, 409, added.text);
      assert.match(added.body.error.message, /Customer has 2 tags, the most an environment may have \(UGS_MAX_TAGS_PER_ENVIRONMENT=2\)/);
    } finally {
      await lowered.app.close();
    }
  });
});

forEachBackend('tags: the bound across two server processes and ugs import', (backend) => {
  const PROCESS_BOUND = 12;
  const two = useServerProcesses(backend, { env: { UGS_MAX_TAGS_PER_ENVIRONMENT: String(PROCESS_BOUND) }, issueToken: false });
  let dir: string;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-tag-bound-'));
  });

  after(async () => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('tags: 60 concurrent writes on two processes, each adding a new tag (creates, PUTs, POST /api/group_tags): exactly the bound succeed, the others 409 tag_limit_reached, and the set lists what the groups carry', async () => {
    const { token } = await issueTokenWithCli(two.env, ['--account', 'racing']);
    const seeded = await httpRequest(two.servers[0].baseUrl, 'POST', '/api/users/upsert', {
      token,
      body: { user_groups: Array.from({ length: 10 }, (_, i) => ({ user_group_id: `put-${i}` })) },
    });
    assert.equal(seeded.status, 200, seeded.text);
    const writes = Array.from({ length: 60 }, (_, i) => {
      const base = two.servers[i % 2].baseUrl;
      const tag = `race-${i}`;
      if (i % 4 < 2) return httpRequest(base, 'POST', '/api/group_tags', { token, body: { name: tag } });
      if (i % 4 === 2) return httpRequest(base, 'PUT', '/api/user', { token, body: { user_group_id: `put-${i % 10}`, group_tags: [tag] } });
      return httpRequest(base, 'POST', '/api/user', { token, body: { user_group_id: `new-${i}`, group_tags: [tag] } });
    });
    const answers = await Promise.all(writes);
    for (const answer of answers) assert.ok([200, 201, 409].includes(answer.status), answer.text);
    const refused = answers.filter((answer) => answer.status === 409);
    for (const answer of refused) assert.equal(answer.body.error.code, 'tag_limit_reached', answer.text);
    assert.equal(answers.length - refused.length, PROCESS_BOUND, 'writes that succeeded');

    const list = await httpRequest(two.servers[1].baseUrl, 'GET', '/api/group_tags?limit=500', { token });
    assert.equal(list.status, 200, list.text);
    assert.equal(list.body.group_tags.length, PROCESS_BOUND);
    const groups = await httpRequest(two.servers[0].baseUrl, 'GET', '/api/users?limit=500', { token });
    const carried = new Map<string, number>();
    for (const group of groups.body.user_groups) for (const tag of group.group_tags) carried.set(tag, (carried.get(tag) ?? 0) + 1);
    for (const { name, user_group_count } of list.body.group_tags) assert.equal(user_group_count, carried.get(name) ?? 0, name);
    assert.ok(
      [...carried.keys()].every((tag) => list.body.group_tags.some((listed) => listed.name === tag)),
      'a carried tag is not in the set',
    );
  });

  it('ugs import: the rows whose tags would pass the bound fail with tag_limit_reached (in the errors file); the others are imported', async () => {
    assert.equal((await runUgs(['account', 'create', 'importer'], two.env)).code, 0);
    // Every row brings a tag of its own, every third one too many: rows past the bound fail, rows reusing a tag go on.
    const rows = Array.from({ length: 20 }, (_, i) => ({ user_group_id: `row-${i}`, group_tags: i % 3 === 2 ? ['tag-0'] : [`tag-${i}`] }));
    const input = path.join(dir, 'tags.ndjson');
    fs.writeFileSync(input, `${rows.map((row) => JSON.stringify(row)).join('\n')}\n`);
    const errors = path.join(dir, 'tags.errors.ndjson');
    const imported = await runUgs(['import', input, '--account', 'importer', '--env', 'Customer', '--errors', errors, '--json'], two.env);
    assert.equal(imported.code, 1, imported.stderr);
    const distinct = rows.filter((_, i) => i % 3 !== 2).map((row) => row.group_tags[0]);
    const failed = distinct.slice(PROCESS_BOUND).map((tag) => Number(tag.slice('tag-'.length)));
    assert.deepEqual(JSON.parse(imported.stdout), {
      rows: 20,
      created: 20 - failed.length,
      updated: 0,
      unchanged: 0,
      failed: failed.length,
      errors_file: errors,
    });
    assert.deepEqual(
      fs
        .readFileSync(errors, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => [JSON.parse(line).row, JSON.parse(line).error.code]),
      failed.map((i) => [i + 1, 'tag_limit_reached']),
    );
  });
});
