// The tag set (docs/api.md, "Tags"): listed with counts in code-point order, created ahead of
// any group, renamed and deleted on every group at once, each changed group with its history
// entry and event; read scope to list, write to change; one set per environment.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp, type SuiteApp } from './helpers/harness.ts';
import { groupTagSet } from '../src/db/migrations/0014-group-tag-set.ts';
import { sql } from '../src/db/kysely.ts';

forEachBackend('tags as a managed set', (backend) => {
  const t = useTestApp(backend);
  let accounts = 0;
  /** Each test in an account of its own, so that its tags are its own. */
  const freshToken = async (scopes: ('read' | 'write')[] = ['read', 'write']) => (await t.issueToken({ account: `tags-${++accounts}`, scopes })).token;

  async function upsert(token: string, groups: Record<string, unknown>[]) {
    for (let start = 0; start < groups.length; start += 1000) {
      const res = await t.request('POST', '/api/users/upsert', { token, body: { user_groups: groups.slice(start, start + 1000) } });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.counts.failed, 0, res.text);
    }
  }
  const put = async (token: string, body: Record<string, unknown>) => {
    const res = await t.request('PUT', '/api/user', { token, body });
    assert.equal(res.status, 200, res.text);
    return res.body.user_group;
  };
  /** Every tag and its count, all pages. */
  async function allTags(token: string, query: Record<string, string> = {}): Promise<[string, number][]> {
    const seen: [string, number][] = [];
    let cursor: string | null = null;
    do {
      const pageQuery: Record<string, string | null> = { limit: '2', ...query, cursor };
      const res = await t.request('GET', '/api/group_tags', { token, query: pageQuery });
      assert.equal(res.status, 200, res.text);
      seen.push(...res.body.group_tags.map((tag): [string, number] => [tag.name, tag.user_group_count]));
      cursor = res.body.next_cursor;
    } while (cursor !== null);
    return seen;
  }
  /** Each group's tags, by user_group_id. */
  async function groupTags(token: string, env = 'Customer'): Promise<Record<string, string[]>> {
    const tags: Record<string, string[]> = {};
    let cursor: string | null = null;
    do {
      const pageQuery: Record<string, string | null> = { limit: '500', api_environment_tag: env, cursor };
      const res = await t.request('GET', '/api/users', { token, query: pageQuery });
      assert.equal(res.status, 200, res.text);
      for (const group of res.body.user_groups) tags[group.provided_id] = group.group_tags;
      cursor = res.body.next_cursor;
    } while (cursor !== null);
    return tags;
  }

  it('tags: the list counts the groups of each tag a group carries, in code-point order, and a PUT with a new tag adds it', async () => {
    const token = await freshToken();
    // Code-point order: upper case before lower, U+FFFF before U+10000 (UTF-16 order would put the emoji first).
    await upsert(token, [
      { user_group_id: 'a', group_tags: ['beta', 'Zeta', '\u{1F600}'] },
      { user_group_id: 'b', group_tags: ['beta', '\uFFFF'] },
      { user_group_id: 'c' },
    ]);
    assert.deepEqual(await allTags(token), [
      ['Zeta', 1],
      ['beta', 2],
      ['\uFFFF', 1],
      ['\u{1F600}', 1],
    ]);
    await put(token, { user_group_id: 'c', group_tags: ['gamma', 'beta'] });
    assert.deepEqual(await allTags(token), [
      ['Zeta', 1],
      ['beta', 3],
      ['gamma', 1],
      ['\uFFFF', 1],
      ['\u{1F600}', 1],
    ]);
  });

  it('tags: a tag whose last group drops it stays listed with 0 groups until it is deleted', async () => {
    const token = await freshToken();
    await upsert(token, [{ user_group_id: 'only', group_tags: ['fleeting', 'kept'] }]);
    await put(token, { user_group_id: 'only', group_tags: ['kept'] });
    assert.deepEqual(await allTags(token), [
      ['fleeting', 0],
      ['kept', 1],
    ]);
    // A deleted group's tags stay too.
    assert.equal((await t.request('DELETE', '/api/user', { token, query: { user_group_id: 'only' } })).status, 200);
    assert.deepEqual(await allTags(token), [
      ['fleeting', 0],
      ['kept', 0],
    ]);
    const deleted = await t.request('DELETE', '/api/group_tags', { token, query: { name: 'fleeting' } });
    assert.equal(deleted.status, 200, deleted.text);
    assert.deepEqual(deleted.body, { success: 1, name: 'fleeting', user_groups_changed: 0 });
    assert.deepEqual(await allTags(token), [['kept', 0]]);
  });

  it('tags: POST creates a tag no group carries, listed with 0 groups; a tag that exists, created or carried, is 409 group_tag_exists', async () => {
    const token = await freshToken();
    await upsert(token, [{ user_group_id: 'g', group_tags: ['carried'] }]);
    const created = await t.request('POST', '/api/group_tags', { token, body: { name: 'enterprise' } });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.body, { success: 1, group_tag: { name: 'enterprise', user_group_count: 0 } });
    for (const name of ['enterprise', 'carried']) {
      const again = await t.request('POST', '/api/group_tags', { token, body: { name } });
      assert.equal(again.status, 409, again.text);
      assert.equal(again.body.error.code, 'group_tag_exists');
    }
    assert.deepEqual(await allTags(token), [
      ['carried', 1],
      ['enterprise', 0],
    ]);
    // A group that takes the created tag counts for it.
    await put(token, { user_group_id: 'g', group_tags: ['carried', 'enterprise'] });
    assert.deepEqual(await allTags(token), [
      ['carried', 1],
      ['enterprise', 1],
    ]);
  });

  it('tags: a name breaks the rule of a group tag (empty, 65 characters, a control character, an unknown field): 400 naming the field, nothing created', async () => {
    const token = await freshToken();
    for (const [body, field] of [
      [{ name: '' }, 'name'],
      [{ name: 'x'.repeat(65) }, 'name'],
      [{ name: 'a\u0000b' }, 'name'],
      [{}, 'name'],
      [{ name: 'ok', colour: 'red' }, 'colour'],
    ] as const) {
      const res = await t.request('POST', '/api/group_tags', { token, body });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.body.error.code, 'validation_failed');
      assert.ok(
        res.body.error.details!.some((detail) => detail.field === field),
        res.text,
      );
    }
    assert.deepEqual(await allTags(token), []);
  });

  it('tags: the list pages with limit and next_cursor, and q keeps the tags that start with it, character by character', async () => {
    const token = await freshToken();
    const names = ['a%', 'a_b', 'ab', 'abc', 'b', 'b\u{10FFFF}', '\u{10FFFF}', '\u{10FFFF}x'];
    for (const name of names) assert.equal((await t.request('POST', '/api/group_tags', { token, body: { name } })).status, 201);
    assert.deepEqual(
      (await allTags(token)).map(([name]) => name),
      names,
    );
    const prefixed = async (q: string) => (await allTags(token, { q })).map(([name]) => name);
    assert.deepEqual(await prefixed('a'), ['a%', 'a_b', 'ab', 'abc']);
    assert.deepEqual(await prefixed('a%'), ['a%'], '% is a plain character');
    assert.deepEqual(await prefixed('a_'), ['a_b'], '_ is a plain character');
    assert.deepEqual(await prefixed('ab'), ['ab', 'abc']);
    assert.deepEqual(await prefixed('A'), [], 'case-sensitive');
    assert.deepEqual(await prefixed('\u{10FFFF}'), ['\u{10FFFF}', '\u{10FFFF}x'], 'a prefix at the top of code-point order');
    const first = await t.request('GET', '/api/group_tags', { token, query: { limit: '3' } });
    assert.equal(first.body.group_tags.length, 3);
    assert.ok(first.body.next_cursor);
    const bad = await t.request('GET', '/api/group_tags', { token, query: { cursor: 'not-a-cursor' } });
    assert.equal(bad.status, 400, bad.text);
    assert.deepEqual(bad.body.error.details, [{ field: 'cursor', issue: 'invalid' }]);
    for (const limit of ['0', '501', '1e2']) {
      const res = await t.request('GET', '/api/group_tags', { token, query: { limit } });
      assert.equal(res.status, 400, `limit ${limit}: ${res.text}`);
    }
  });

  it('tags: rename changes the tag on every group at once; a group that has both keeps one copy, and the answer says the tags merged', async () => {
    const token = await freshToken();
    await upsert(token, [
      { user_group_id: 'one', group_tags: ['beta', 'x'] },
      { user_group_id: 'both', group_tags: ['beta', 'early-access'] },
      { user_group_id: 'other', group_tags: ['early-access'] },
      { user_group_id: 'none', group_tags: ['x'] },
    ]);
    const renamed = await t.request('POST', '/api/group_tags/rename', { token, body: { name: 'beta', new_name: 'early-access' } });
    assert.equal(renamed.status, 200, renamed.text);
    assert.deepEqual(renamed.body, { success: 1, group_tag: { name: 'early-access', user_group_count: 3 }, merged: true, user_groups_changed: 2 });
    assert.deepEqual(await groupTags(token), { one: ['early-access', 'x'], both: ['early-access'], other: ['early-access'], none: ['x'] });
    assert.deepEqual(await allTags(token), [
      ['early-access', 3],
      ['x', 2],
    ]);
    // The tag filter of the list follows the rename: the tag rows moved with it.
    const filtered = await t.request('GET', '/api/users', { token, query: { tag: 'early-access' } });
    assert.deepEqual(filtered.body.user_groups.map((group) => group.provided_id).sort(), ['both', 'one', 'other']);
    assert.deepEqual((await t.request('GET', '/api/users', { token, query: { tag: 'beta' } })).body.user_groups, []);

    const fresh = await t.request('POST', '/api/group_tags/rename', { token, body: { name: 'x', new_name: 'y' } });
    assert.deepEqual(fresh.body, { success: 1, group_tag: { name: 'y', user_group_count: 2 }, merged: false, user_groups_changed: 2 });
    // A tag with no group renames too.
    assert.equal((await t.request('POST', '/api/group_tags', { token, body: { name: 'empty' } })).status, 201);
    const empty = await t.request('POST', '/api/group_tags/rename', { token, body: { name: 'empty', new_name: 'still-empty' } });
    assert.deepEqual(empty.body, { success: 1, group_tag: { name: 'still-empty', user_group_count: 0 }, merged: false, user_groups_changed: 0 });
    assert.deepEqual(await allTags(token), [
      ['early-access', 3],
      ['still-empty', 0],
      ['y', 2],
    ]);
  });

  it('tags: renaming an unknown tag is 404 group_tag_not_found, and onto its own name 400; neither changes anything', async () => {
    const token = await freshToken();
    await upsert(token, [{ user_group_id: 'g', group_tags: ['beta'] }]);
    const unknown = await t.request('POST', '/api/group_tags/rename', { token, body: { name: 'nope', new_name: 'beta2' } });
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(unknown.body.error.code, 'group_tag_not_found');
    const same = await t.request('POST', '/api/group_tags/rename', { token, body: { name: 'beta', new_name: 'beta' } });
    assert.equal(same.status, 400, same.text);
    assert.deepEqual(same.body.error.details, [{ field: 'new_name', issue: 'same_as_current' }]);
    assert.deepEqual(await allTags(token), [['beta', 1]]);
    const history = await t.request('GET', '/api/user/history', { token, query: { user_group_id: 'g' } });
    assert.deepEqual(
      history.body.entries.map((entry) => entry.action),
      ['user_group.create'],
    );
  });

  it('tags: delete, named by body or by ?name=, removes the tag from every group and from the set; unknown is 404; body and query both is 400', async () => {
    const token = await freshToken();
    await upsert(token, [
      { user_group_id: 'g1', group_tags: ['beta', 'x'] },
      { user_group_id: 'g2', group_tags: ['beta'] },
      { user_group_id: 'g3', group_tags: ['x'] },
    ]);
    const byQuery = await t.request('DELETE', '/api/group_tags', { token, query: { name: 'beta' } });
    assert.equal(byQuery.status, 200, byQuery.text);
    assert.deepEqual(byQuery.body, { success: 1, name: 'beta', user_groups_changed: 2 });
    assert.deepEqual(await groupTags(token), { g1: ['x'], g2: [], g3: ['x'] });
    const byBody = await t.request('DELETE', '/api/group_tags', { token, body: { name: 'x' } });
    assert.deepEqual(byBody.body, { success: 1, name: 'x', user_groups_changed: 2 });
    assert.deepEqual(await groupTags(token), { g1: [], g2: [], g3: [] });
    assert.deepEqual(await allTags(token), []);

    const again = await t.request('DELETE', '/api/group_tags', { token, query: { name: 'x' } });
    assert.equal(again.status, 404, again.text);
    assert.equal(again.body.error.code, 'group_tag_not_found');
    const both = await t.request('DELETE', '/api/group_tags', { token, query: { name: 'x' }, body: { name: 'y' } });
    assert.equal(both.status, 400, both.text);
    assert.equal(both.body.error.code, 'ambiguous_request');
    const none = await t.request('DELETE', '/api/group_tags', { token });
    assert.equal(none.status, 400, none.text);
    assert.deepEqual(none.body.error.details, [{ field: 'name', issue: 'required' }]);
  });

  it('tags: each group a rename or a delete changed has a history entry and a user_group.updated event with changes.group_tags; the others have none', async () => {
    const { token, id: tokenId } = await t.issueToken({ account: `tags-${++accounts}` });
    await upsert(token, [
      { user_group_id: 'carrier', group_tags: ['beta', 'x'] },
      { user_group_id: 'bystander', group_tags: ['x'] },
    ]);
    const renamed = await t.request('POST', '/api/group_tags/rename', {
      token,
      body: { name: 'beta', new_name: 'ga' },
      headers: { 'x-request-id': 'rename-1' },
    });
    assert.equal(renamed.status, 200, renamed.text);
    const deleted = await t.request('DELETE', '/api/group_tags', { token, query: { name: 'ga' }, headers: { 'x-request-id': 'delete-1' } });
    assert.equal(deleted.status, 200, deleted.text);

    const history = await t.request('GET', '/api/user/history', { token, query: { user_group_id: 'carrier' } });
    const [removed, moved] = history.body.entries;
    assert.equal(history.body.entries.length, 3);
    for (const [entry, old, now, requestId] of [
      [moved, ['beta', 'x'], ['ga', 'x'], 'rename-1'],
      [removed, ['ga', 'x'], ['x'], 'delete-1'],
    ] as const) {
      assert.equal(entry.action, 'user_group.update');
      assert.deepEqual(entry.changed_fields, ['group_tags']);
      assert.deepEqual(entry.details, { group_tags: { old, new: now } });
      assert.equal(entry.actor_token_id, tokenId);
      assert.equal(entry.request_id, requestId);
    }
    const bystander = await t.request('GET', '/api/user/history', { token, query: { user_group_id: 'bystander' } });
    assert.equal(bystander.body.entries.length, 1, 'a group without the tag is not touched');

    const events = await eventsUntil(t, token, 4);
    const updates = events.filter((event) => event.type === 'user_group.updated');
    assert.deepEqual(
      updates.map((event) => [event.data.user_group_id, event.data.changed_fields, event.data.changes]),
      [
        ['carrier', ['group_tags'], { group_tags: { old: ['beta', 'x'], new: ['ga', 'x'] } }],
        ['carrier', ['group_tags'], { group_tags: { old: ['ga', 'x'], new: ['x'] } }],
      ],
    );
    const carrier = await t.request('GET', '/api/user/lookup', { token, query: { user_group_id: 'carrier' } });
    assert.equal(carrier.body.user_group.updated_at, history.body.entries[0].created_at, 'updated_at moves with the change');
  });

  it('tags: a read token lists the tags; creating, renaming and deleting need write (403 insufficient_scope, nothing changed)', async () => {
    const writer = await freshToken();
    const { token: reader } = await t.issueToken({ account: `tags-${accounts}`, scopes: ['read'] });
    await upsert(writer, [{ user_group_id: 'g', group_tags: ['beta'] }]);
    assert.deepEqual(await allTags(reader), [['beta', 1]]);
    for (const [method, path, options] of [
      ['POST', '/api/group_tags', { body: { name: 'new' } }],
      ['POST', '/api/group_tags/rename', { body: { name: 'beta', new_name: 'gamma' } }],
      ['DELETE', '/api/group_tags', { query: { name: 'beta' } }],
    ] as const) {
      const res = await t.request(method, path, { token: reader, ...options });
      assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.error.code, 'insufficient_scope');
    }
    assert.deepEqual(await allTags(reader), [['beta', 1]]);
    assert.deepEqual(await groupTags(reader), { g: ['beta'] });
  });

  it('tags: each environment has its own set: a rename in Testing leaves the same tag in Customer alone, and a token restricted to Customer cannot reach Testing', async () => {
    const token = await freshToken();
    await upsert(token, [
      { user_group_id: 'c', group_tags: ['beta'], api_environment_tag: 'Customer' },
      { user_group_id: 't', group_tags: ['beta'], api_environment_tag: 'Testing' },
    ]);
    const renamed = await t.request('POST', '/api/group_tags/rename', { token, body: { name: 'beta', new_name: 'gamma', api_environment_tag: 'Testing' } });
    assert.equal(renamed.status, 200, renamed.text);
    assert.deepEqual(await allTags(token, { api_environment_tag: 'Testing' }), [['gamma', 1]]);
    assert.deepEqual(await allTags(token, { api_environment_tag: 'Customer' }), [['beta', 1]]);
    assert.deepEqual(await groupTags(token, 'Customer'), { c: ['beta'] });
    const { token: customerOnly } = await t.issueToken({ account: `tags-${accounts}`, env: 'Customer' });
    const refused = await t.request('GET', '/api/group_tags', { token: customerOnly, query: { api_environment_tag: 'Testing' } });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.error.code, 'environment_forbidden');
    const deleteRefused = await t.request('DELETE', '/api/group_tags', { token: customerOnly, query: { name: 'gamma', api_environment_tag: 'Testing' } });
    assert.equal(deleteRefused.status, 403, deleteRefused.text);
    assert.deepEqual(await allTags(token, { api_environment_tag: 'Testing' }), [['gamma', 1]]);
  });

  it('tags: a rename of a tag on 10,000 groups runs in batches of 500, each its own transaction: a PUT sent meanwhile commits between two of them, and every group is renamed', async () => {
    const token = await freshToken();
    const count = 10_000;
    await upsert(token, [
      ...Array.from({ length: count }, (_, i) => ({ user_group_id: `bulk-${i}`, group_tags: ['bulk'] })),
      { user_group_id: 'bystander', group_tags: ['other'] },
    ]);
    const renaming = t.request('POST', '/api/group_tags/rename', {
      token,
      body: { name: 'bulk', new_name: 'renamed' },
      headers: { 'x-request-id': 'big-rename' },
    });
    // Once its first batch has committed, a PUT that sets tags (and so waits for the same lock).
    for (let polls = 0; ; polls++) {
      const listed = await t.request('GET', '/api/group_tags', { token, query: { q: 'renamed' } });
      if ((listed.body.group_tags[0]?.user_group_count ?? 0) > 0) break;
      assert.ok(polls < 100_000, 'the first batch commits');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const during = await t.request('PUT', '/api/user', {
      token,
      body: { user_group_id: 'bystander', group_tags: ['other', 'during'] },
      headers: { 'x-request-id': 'during-put' },
    });
    assert.equal(during.status, 200, during.text);
    const renamed = await renaming;
    assert.equal(renamed.status, 200, renamed.text);
    assert.deepEqual(renamed.body, { success: 1, group_tag: { name: 'renamed', user_group_count: count }, merged: false, user_groups_changed: count });

    const entries = await t.handle.db.selectFrom('audit_log').select(['id', 'request_id']).where('request_id', 'in', ['big-rename', 'during-put']).execute();
    const renameIds = entries.filter((entry) => entry.request_id === 'big-rename').map((entry) => Number(entry.id));
    const putId = Number(entries.find((entry) => entry.request_id === 'during-put')!.id);
    assert.equal(renameIds.length, count, 'a history entry per group');
    assert.ok(Math.min(...renameIds) < putId && putId < Math.max(...renameIds), 'the PUT committed between two batches of the rename');
    assert.deepEqual(await allTags(token), [
      ['during', 1],
      ['other', 1],
      ['renamed', count],
    ]);
  });

  it("tags: a delete ends even on a tag row whose group's own tags no longer name it: the row goes, the group is left as it is, with no history entry", async () => {
    const token = await freshToken();
    await upsert(token, [{ user_group_id: 'stale', group_tags: ['ghost', 'kept'] }]);
    // A row of the filter's index that disagrees with its group (written by hand, say).
    await t.handle.db.updateTable('user_groups').set({ group_tags: '["kept"]' }).where('provided_id', '=', 'stale').execute();
    const deleted = await t.request('DELETE', '/api/group_tags', { token, query: { name: 'ghost' } });
    assert.deepEqual(deleted.body, { success: 1, name: 'ghost', user_groups_changed: 0 });
    assert.deepEqual(await allTags(token), [['kept', 1]]);
    assert.deepEqual((await t.request('GET', '/api/users', { token, query: { tag: 'ghost' } })).body.user_groups, []);
    const history = await t.request('GET', '/api/user/history', { token, query: { user_group_id: 'stale' } });
    assert.deepEqual(
      history.body.entries.map((entry) => entry.action),
      ['user_group.create'],
    );
  });

  it('tags: a tag that a version before the set gave a group (so not in the set) is brought in by POST /api/group_tags, answered with its count', async () => {
    const token = await freshToken();
    await upsert(token, [{ user_group_id: 'old-writer', group_tags: ['legacy'] }]);
    // What an instance of an older version leaves during a rolling upgrade: the group's tag, not the set's.
    await t.handle.db.deleteFrom('group_tag_set').where('name', '=', 'legacy').execute();
    assert.deepEqual(await allTags(token), []);
    const created = await t.request('POST', '/api/group_tags', { token, body: { name: 'legacy' } });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.body.group_tag, { name: 'legacy', user_group_count: 1 });
    assert.deepEqual(await allTags(token), [['legacy', 1]]);
  });

  it("tags: migration 0014 puts every tag the groups carry into their environment's set", async () => {
    const token = await freshToken();
    await upsert(token, [
      { user_group_id: 'g1', group_tags: ['beta', 'x'] },
      { user_group_id: 'g2', group_tags: ['beta'] },
      { user_group_id: 't1', group_tags: ['only-testing'], api_environment_tag: 'Testing' },
    ]);
    // The set as a database migrated before 0014 had it: none.
    await sql`drop table group_tag_set`.execute(t.handle.db);
    await groupTagSet(backend).up(t.handle.db);
    assert.deepEqual(await allTags(token), [
      ['beta', 2],
      ['x', 1],
    ]);
    assert.deepEqual(await allTags(token, { api_environment_tag: 'Testing' }), [['only-testing', 1]]);
  });
});

/** The account's user group events (not its API tokens'), waiting up to 5 s until there are at least `count`. */
async function eventsUntil(t: Pick<SuiteApp, 'request'>, token: string, count: number) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const res = await t.request('GET', '/api/events', {
      token,
      query: { limit: '500', types: 'user_group.created,user_group.updated,user_group.token_rotated,user_group.deleted' },
    });
    assert.equal(res.status, 200, res.text);
    if (res.body.events.length >= count || Date.now() > deadline) return res.body.events;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
