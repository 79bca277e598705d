// The text rules beyond "plain text" (docs/api.md, "Requests" and "Tags"): a tag shows what it
// says (no bidirectional control, never only invisible characters) and is one tag however
// "é" is spelled (NFC); a viewer's attribute values, signed into embed tokens and handed to
// data APIs as given, hold no control or bidirectional control character. Tags stored before
// these rules keep working, and names and ids keep right-to-left marks.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp, type HttpResult, type AnyAnswer } from './helpers/harness.ts';

const BIDI_CONTROLS = ['\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u2066', '\u2067', '\u2068', '\u2069', '\u200E', '\u200F', '\u061C'];
/** Tags that would list as a blank row: white space, zero-width and other default-ignorable characters, alone or together. */
const INVISIBLE = [
  '\u200B',
  '\u200B\u200B',
  '\uFEFF',
  '\u2060',
  '\u200C',
  '\u200D',
  '\u3164',
  '\u115F',
  '\u00AD',
  '\uFE0F',
  ' \u200B ',
  '\u3000\u00A0',
  '\u{E0020}',
];
const NFC_E = '\u00E9'; // é, one code point
const NFD_E = 'e\u0301'; // é, e and a combining acute accent

forEachBackend('text rules', (backend) => {
  const t = useTestApp(backend);
  let accounts = 0;
  /** Each test in an account of its own, so that its tags are its own. */
  const freshToken = async () => (await t.issueToken({ account: `text-${++accounts}`, scopes: ['read', 'write'] })).token;

  async function allTags(token: string, query: Record<string, string> = {}): Promise<[string, number][]> {
    const res = await t.request('GET', '/api/group_tags', { token, query: { limit: '500', ...query } });
    assert.equal(res.status, 200, res.text);
    return res.body.group_tags.map((tag): [string, number] => [tag.name, tag.user_group_count]);
  }
  const groupIds = async (token: string, query: Record<string, string>) => {
    const res = await t.request('GET', '/api/users', { token, query });
    assert.equal(res.status, 200, res.text);
    return res.body.user_groups.map((group) => group.provided_id).sort();
  };
  function assertRefused(res: HttpResult<AnyAnswer>, field: string, what: string): void {
    assert.equal(res.status, 400, `${what}: ${res.text}`);
    assert.equal(res.body.error.code, 'validation_failed', what);
    assert.deepEqual(
      res.body.error.details!.filter((detail) => detail.field === field),
      [{ field, issue: 'invalid_characters' }],
      `${what}: ${res.text}`,
    );
  }

  /** Gives `tag` every way a request can (create, get-or-create, PUT, an upsert item, POST /api/group_tags, a rename's new_name): each is refused. */
  async function assertTagRefusedEverywhere(token: string, tag: string): Promise<void> {
    const where = (what: string) => `${what} of ${JSON.stringify(tag)}`;
    assertRefused(await t.request('POST', '/api/user', { token, body: { user_group_id: 'new', group_tags: ['fine', tag] } }), 'group_tags.1', where('create'));
    assertRefused(await t.request('GET', '/api/user', { token, body: { user_group_id: 'new', group_tags: [tag] } }), 'group_tags.0', where('get-or-create'));
    assertRefused(await t.request('PUT', '/api/user', { token, body: { user_group_id: 'g', group_tags: [tag] } }), 'group_tags.0', where('PUT'));
    assertRefused(await t.request('POST', '/api/group_tags', { token, body: { name: tag } }), 'name', where('POST /api/group_tags'));
    assertRefused(await t.request('POST', '/api/group_tags/rename', { token, body: { name: 'fine', new_name: tag } }), 'new_name', where('rename'));
    const upsert = await t.request('POST', '/api/users/upsert', { token, body: { user_groups: [{ user_group_id: 'u', group_tags: [tag] }] } });
    assert.equal(upsert.status, 200, upsert.text);
    assert.deepEqual([upsert.body.results[0].status, upsert.body.results[0].error?.code], ['failed', 'validation_failed'], where('upsert'));
  }

  it('tags: a bidirectional control anywhere in a tag is 400 invalid_characters wherever a tag is given (create, get-or-create, PUT, upsert item, POST /api/group_tags, rename), and nothing is stored', async () => {
    const token = await freshToken();
    assert.equal((await t.request('POST', '/api/user', { token, body: { user_group_id: 'g', group_tags: ['fine'] } })).status, 201);
    for (const control of BIDI_CONTROLS) {
      for (const tag of [`${control}txt.exe`, `exe${control}`, control]) await assertTagRefusedEverywhere(token, tag);
    }
    const refused = await t.request('POST', '/api/group_tags', { token, body: { name: '\u202Etxt.exe' } });
    assert.match(refused.body.error.message, /bidirectional control/);
    assert.deepEqual(await allTags(token), [['fine', 1]]);
    assert.deepEqual(await groupIds(token, {}), ['g']);
  });

  it('tags: a tag of only white space and invisible characters (zero-width space, joiners, U+FEFF, U+2060, Hangul fillers…) is 400 invalid_characters; one with something visible among them is kept as given', async () => {
    const token = await freshToken();
    assert.equal((await t.request('POST', '/api/user', { token, body: { user_group_id: 'g', group_tags: ['fine'] } })).status, 201);
    for (const tag of INVISIBLE) await assertTagRefusedEverywhere(token, tag);
    const refused = await t.request('POST', '/api/group_tags', { token, body: { name: '\u200B' } });
    assert.match(refused.body.error.message, /something visible/);
    assert.deepEqual(await allTags(token), [['fine', 1]]);
    // Joiners inside a word or an emoji sequence are text: kept.
    const kept = ['👩\u200D👩\u200D👧', 'ab\u200Bc', ' x ', 'می\u200Cخواهم'];
    const res = await t.request('PUT', '/api/user', { token, body: { user_group_id: 'g', group_tags: kept } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual([...res.body.user_group.group_tags].sort(), [...kept].sort());
  });

  it('tags: NFC and NFD "é" are one tag: stored in NFC, listed once with every group counted, and found by either spelling by the filter, a rename and a delete', async () => {
    const token = await freshToken();
    const both = await t.request('POST', '/api/user', { token, body: { user_group_id: 'both', group_tags: [`caf${NFC_E}`, `caf${NFD_E}`] } });
    assert.equal(both.status, 201, both.text);
    assert.deepEqual(both.body.user_group.group_tags, [`caf${NFC_E}`]);
    assert.equal((await t.request('POST', '/api/user', { token, body: { user_group_id: 'nfd', group_tags: [`caf${NFD_E}`] } })).status, 201);
    assert.equal((await t.request('POST', '/api/user', { token, body: { user_group_id: 'nfc', group_tags: [`caf${NFC_E}`] } })).status, 201);
    assert.deepEqual(await allTags(token), [[`caf${NFC_E}`, 3]]);
    const exists = await t.request('POST', '/api/group_tags', { token, body: { name: `caf${NFD_E}` } });
    assert.equal(exists.status, 409, exists.text);
    assert.equal(exists.body.error.code, 'group_tag_exists');
    // Either spelling finds it.
    for (const spelling of [NFC_E, NFD_E]) {
      assert.deepEqual(await groupIds(token, { tag: `caf${spelling}` }), ['both', 'nfc', 'nfd'], spelling);
      assert.deepEqual(await allTags(token, { q: `caf${spelling}` }), [[`caf${NFC_E}`, 3]], spelling);
    }
    const same = await t.request('POST', '/api/group_tags/rename', { token, body: { name: `caf${NFD_E}`, new_name: `caf${NFC_E}` } });
    assert.equal(same.status, 400, same.text);
    assert.deepEqual(same.body.error.details, [{ field: 'new_name', issue: 'same_as_current' }]);
    const renamed = await t.request('POST', '/api/group_tags/rename', { token, body: { name: `caf${NFD_E}`, new_name: `${NFD_E}t${NFD_E}` } });
    assert.equal(renamed.status, 200, renamed.text);
    assert.deepEqual(renamed.body.group_tag, { name: `${NFC_E}t${NFC_E}`, user_group_count: 3 });
    assert.deepEqual(await allTags(token), [[`${NFC_E}t${NFC_E}`, 3]]);
    const deleted = await t.request('DELETE', '/api/group_tags', { token, query: { name: `${NFD_E}t${NFD_E}` } });
    assert.equal(deleted.status, 200, deleted.text);
    assert.deepEqual([deleted.body.name, deleted.body.user_groups_changed], [`${NFC_E}t${NFC_E}`, 3]);
    assert.deepEqual(await allTags(token), []);
  });

  it('tags: a tag stored before these rules (in NFD, or with a bidirectional control) still lists, filters, renames and deletes by its own spelling; renamed to its NFC form it merges', async () => {
    const token = await freshToken();
    assert.equal((await t.request('POST', '/api/user', { token, body: { user_group_id: 'old-nfd', group_tags: ['legacy-nfd'] } })).status, 201);
    assert.equal((await t.request('POST', '/api/user', { token, body: { user_group_id: 'old-bidi', group_tags: ['legacy-bidi'] } })).status, 201);
    assert.equal((await t.request('POST', '/api/user', { token, body: { user_group_id: 'new-nfc', group_tags: [`caf${NFC_E}`] } })).status, 201);
    // What the version before these rules wrote: the group's tags, its tag rows and the set, as given.
    for (const [from, to] of [
      ['legacy-nfd', `caf${NFD_E}`],
      ['legacy-bidi', '\u202Etxt.exe'],
    ]) {
      const group = await t.handle.db
        .selectFrom('user_groups')
        .select('team_id')
        .where('group_tags', '=', JSON.stringify([from]))
        .executeTakeFirstOrThrow();
      await t.handle.db
        .updateTable('user_groups')
        .set({ group_tags: JSON.stringify([to]) })
        .where('team_id', '=', group.team_id)
        .execute();
      await t.handle.db.updateTable('user_group_tags').set({ tag: to }).where('team_id', '=', group.team_id).execute();
      await t.handle.db.updateTable('group_tag_set').set({ name: to }).where('name', '=', from).execute();
    }
    assert.deepEqual(await allTags(token), [
      [`caf${NFD_E}`, 1],
      [`caf${NFC_E}`, 1],
      ['\u202Etxt.exe', 1],
    ]);
    assert.deepEqual(await groupIds(token, { tag: `caf${NFD_E}` }), ['old-nfd']);
    assert.deepEqual(await groupIds(token, { tag: `caf${NFC_E}` }), ['new-nfc']);
    assert.deepEqual(await groupIds(token, { tag: '\u202Etxt.exe' }), ['old-bidi']);
    // A group that keeps its old tag is read and changed as before.
    const renamedGroup = await t.request('PUT', '/api/user', { token, body: { user_group_id: 'old-bidi', name: 'still here' } });
    assert.equal(renamedGroup.status, 200, renamedGroup.text);
    assert.deepEqual(renamedGroup.body.user_group.group_tags, ['\u202Etxt.exe']);
    // Renamed to its NFC form, the old spelling merges into the new.
    const merged = await t.request('POST', '/api/group_tags/rename', { token, body: { name: `caf${NFD_E}`, new_name: `caf${NFC_E}` } });
    assert.equal(merged.status, 200, merged.text);
    assert.deepEqual([merged.body.group_tag, merged.body.merged], [{ name: `caf${NFC_E}`, user_group_count: 2 }, true]);
    const deleted = await t.request('DELETE', '/api/group_tags', { token, body: { name: '\u202Etxt.exe' } });
    assert.equal(deleted.status, 200, deleted.text);
    assert.deepEqual(await allTags(token), [[`caf${NFC_E}`, 2]]);
  });

  it('viewer attributes: a value holding NUL, another control character or a bidirectional control is 400 validation_failed naming viewer.attributes.<key>, and no token is issued', async () => {
    const token = await freshToken();
    assert.equal((await t.request('POST', '/api/user', { token, body: { user_group_id: 'viewed' } })).status, 201);
    for (const value of ['emea\u0000', '\u0000', 'a\nb', 'tab\there', '\u007F', '\u202Eaemea', 'x\u2066y\u2069', '\u200F', '\uD800']) {
      const res = await t.request('POST', '/api/embed_token', {
        token,
        body: { user_group_id: 'viewed', viewer: { id: 'ada', attributes: { region: value } } },
      });
      assertRefused(res, 'viewer.attributes.region', JSON.stringify(value));
      assert.ok(!res.text.includes('eyJ'), 'no token in the answer');
    }
    // Text of any script, numbers, booleans, and an empty string are values.
    const fine = { region: 'שלום עולם', city: 'Zürich', note: '', max: 3, on: true };
    const res = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: 'viewed', viewer: { id: 'ada', attributes: fine } } });
    assert.equal(res.status, 200, res.text);
  });

  it('names and user_group_ids keep right-to-left marks and joiners: a group so named is created, found and updated as before', async () => {
    const token = await freshToken();
    const id = 'שלום\u200F-1';
    const name = 'חברה בע"מ\u200F (Ltd.)';
    const created = await t.request('POST', '/api/user', { token, body: { user_group_id: id, name } });
    assert.equal(created.status, 201, created.text);
    const found = await t.request('GET', '/api/user', { token, query: { user_group_id: id, name } });
    assert.equal(found.status, 200, found.text);
    assert.equal(found.body.user_group.name, name);
    const updated = await t.request('PUT', '/api/user', { token, body: { user_group_id: id, name: `${name}\u2068x\u2069` } });
    assert.equal(updated.status, 200, updated.text);
  });
});
