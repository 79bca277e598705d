// GET /api/users: keyset-paginated listing (docs/api.md, "GET /api/users: list").
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp, type EndpointBody, type HttpResult } from './helpers/harness.ts';

forEachBackend('GET /api/users lists user groups', (backend) => {
  const t = useTestApp(backend);
  // Each test that needs a known set of groups works in its own account.
  let accounts = 0;
  async function freshAccount() {
    return (await t.issueToken({ account: `list-${++accounts}` })).token;
  }
  async function create(tok: string, body: Record<string, unknown>) {
    const res = await t.request('POST', '/api/user', { token: tok, body });
    assert.equal(res.status, 201);
    return res.body.user_group;
  }
  async function list(tok: string, query: Record<string, string> = {}) {
    const res = await t.request('GET', '/api/users', { token: tok, query });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  }
  /** Every page, following next_cursor, with the given page size. */
  async function walk(tok: string, limit: number, query: Record<string, string> = {}) {
    const ids: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await list(tok, { ...query, limit: String(limit), ...(cursor ? { cursor } : {}) });
      assert.ok(page.user_groups.length <= limit);
      ids.push(...page.user_groups.map((g) => g.provided_id));
      cursor = page.next_cursor;
      assert.ok(++pages < 1000);
    } while (cursor !== null);
    return { ids, pages };
  }

  it('list: an account without groups gets an empty page with next_cursor null', async () => {
    const tok = await freshAccount();
    const page = await list(tok);
    assert.equal(page.success, 1);
    assert.deepEqual(page.user_groups, []);
    assert.equal(page.next_cursor, null);
  });

  it('list: returns the groups in creation order, without tokens', async () => {
    const tok = await freshAccount();
    const made = [];
    for (const id of ['b', 'a', 'c']) made.push(await create(tok, { user_group_id: id, properties: { id } }));
    const page = await list(tok);
    assert.deepEqual(
      page.user_groups.map((g) => g.provided_id),
      ['b', 'a', 'c'],
    );
    assert.equal(page.next_cursor, null);
    for (const [i, g] of page.user_groups.entries()) {
      const { token: _t, ...publicPart } = made[i];
      assert.deepEqual(g, publicPart);
      assert.equal('token' in g, false);
    }
    assert.doesNotMatch(JSON.stringify(page), /ugs_grp_/);
  });

  it('list: limit pages through every group exactly once; next_cursor is null on the last page', async () => {
    const tok = await freshAccount();
    const expected = [];
    for (let i = 0; i < 7; i++) expected.push((await create(tok, { user_group_id: `g${i}` })).provided_id);
    const first = await list(tok, { limit: '3' });
    assert.equal(first.user_groups.length, 3);
    assert.equal(typeof first.next_cursor, 'string');
    for (const limit of [1, 2, 3, 7, 500]) {
      const { ids, pages } = await walk(tok, limit);
      assert.deepEqual(ids, expected, `limit ${limit}`);
      assert.equal(pages, Math.ceil(7 / limit), `pages at limit ${limit}`);
    }
  });

  it('list: next_cursor is null on a page that ends exactly at the last group (no empty trailing page)', async () => {
    const tok = await freshAccount();
    for (let i = 0; i < 4; i++) await create(tok, { user_group_id: `e${i}` });
    const first = await list(tok, { limit: '2' });
    assert.ok(first.next_cursor);
    const second = await list(tok, { limit: '2', cursor: first.next_cursor! });
    assert.deepEqual(
      second.user_groups.map((g) => g.provided_id),
      ['e2', 'e3'],
    );
    assert.equal(second.next_cursor, null, 'no empty trailing page');
  });

  it('list: the default limit is 100', async () => {
    const tok = await freshAccount();
    for (let i = 0; i < 101; i++) await create(tok, { user_group_id: `d${String(i).padStart(3, '0')}` });
    const page = await list(tok);
    assert.equal(page.user_groups.length, 100);
    assert.ok(page.next_cursor);
    const rest = await list(tok, { cursor: page.next_cursor! });
    assert.deepEqual(
      rest.user_groups.map((g) => g.provided_id),
      ['d100'],
    );
    assert.equal(rest.next_cursor, null);
  });

  it('list: a page of up to 500 holds every group up to its limit, in order, whatever the page size', async () => {
    const tok = await freshAccount();
    // Created in one bulk upsert; the listing is in creation order.
    const expected = Array.from({ length: 301 }, (_, i) => `big-${i}`);
    const upserted = await t.request('POST', '/api/users/upsert', { token: tok, body: { user_groups: expected.map((user_group_id) => ({ user_group_id })) } });
    assert.equal(upserted.status, 200, upserted.text);
    for (const limit of [128, 129, 256, 257, 300, 301, 500]) {
      const { ids, pages } = await walk(tok, limit);
      assert.deepEqual(ids, expected, `limit ${limit}`);
      assert.equal(pages, Math.ceil(301 / limit), `pages at limit ${limit}`);
    }
    const page = await list(tok, { limit: '300' });
    assert.equal(page.user_groups.length, 300);
    assert.deepEqual(
      (await list(tok, { limit: '300', cursor: page.next_cursor! })).user_groups.map((g) => g.provided_id),
      ['big-300'],
    );
  });

  it('list: pagination is stable when groups are inserted and deleted between pages', async () => {
    const tok = await freshAccount();
    for (let i = 0; i < 6; i++) await create(tok, { user_group_id: `s${i}` });
    const first = await list(tok, { limit: '3' });
    assert.deepEqual(
      first.user_groups.map((g) => g.provided_id),
      ['s0', 's1', 's2'],
    );
    // Between pages: new groups arrive and an already-seen one is deleted.
    await create(tok, { user_group_id: 'new-1' });
    await create(tok, { user_group_id: 'new-2' });
    assert.equal((await t.request('DELETE', '/api/user', { token: tok, body: { user_group_id: 's0' } })).status, 200);
    const second = await list(tok, { limit: '3', cursor: first.next_cursor! });
    assert.deepEqual(
      second.user_groups.map((g) => g.provided_id),
      ['s3', 's4', 's5'],
    );
    const third = await list(tok, { limit: '3', cursor: second.next_cursor! });
    assert.deepEqual(
      third.user_groups.map((g) => g.provided_id),
      ['new-1', 'new-2'],
    );
    assert.equal(third.next_cursor, null);
  });

  it('list: limit must be an integer from 1 to 500 (400 validation_failed naming limit)', async () => {
    const tok = await freshAccount();
    for (const limit of ['0', '501', '-1', '1.5', 'ten', '']) {
      const res = await t.request('GET', '/api/users', { token: tok, query: { limit } });
      assert.equal(res.status, 400, `limit ${JSON.stringify(limit)}`);
      assert.equal(res.body.error.code, 'validation_failed');
      assert.equal(res.body.error.details![0].field, 'limit');
    }
    assert.equal((await t.request('GET', '/api/users', { token: tok, query: { limit: '500' } })).status, 200);
    assert.equal((await t.request('GET', '/api/users', { token: tok, query: { limit: '1' } })).status, 200);
  });

  it('list: a cursor the service did not issue answers 400 validation_failed naming cursor', async () => {
    const tok = await freshAccount();
    const forged = [
      'garbage!!',
      Buffer.from('{"after":-1}').toString('base64url'),
      Buffer.from('{"after":"5"}').toString('base64url'),
      Buffer.from('[1,2]').toString('base64url'),
      Buffer.from('null').toString('base64url'),
      'x'.repeat(201),
    ];
    for (const cursor of forged) {
      const res = await t.request('GET', '/api/users', { token: tok, query: { cursor } });
      assert.equal(res.status, 400, `cursor ${cursor}`);
      assert.equal(res.body.error.code, 'validation_failed');
      assert.equal(res.body.error.details![0].field, 'cursor');
    }
  });

  it('list: q filters by prefix of user_group_id or of name, case-sensitively', async () => {
    const tok = await freshAccount();
    await create(tok, { user_group_id: 'alpha-1', name: 'First' });
    await create(tok, { user_group_id: 'alpha-2', name: 'Second' });
    await create(tok, { user_group_id: 'beta-1', name: 'alphabet soup' });
    await create(tok, { user_group_id: 'gamma', name: 'Gamma alpha' });
    await create(tok, { user_group_id: 'Alpha-upper', name: 'Upper' });
    const ids = async (q: string) => (await list(tok, { q })).user_groups.map((g) => g.provided_id);
    assert.deepEqual(await ids('alpha'), ['alpha-1', 'alpha-2', 'beta-1']);
    assert.deepEqual(await ids('Alpha'), ['Alpha-upper']);
    assert.deepEqual(await ids('Sec'), ['alpha-2']);
    assert.deepEqual(await ids('alpha-1'), ['alpha-1']);
    assert.deepEqual(await ids('zzz'), []);
  });

  it('list: q treats % and _ literally (no wildcards)', async () => {
    const tok = await freshAccount();
    await create(tok, { user_group_id: 'a_b' });
    await create(tok, { user_group_id: 'axb' });
    await create(tok, { user_group_id: '100%' });
    await create(tok, { user_group_id: '1000' });
    const ids = async (q: string) => (await list(tok, { q })).user_groups.map((g) => g.provided_id);
    assert.deepEqual(await ids('a_'), ['a_b']);
    assert.deepEqual(await ids('100%'), ['100%']);
    assert.deepEqual(await ids('%'), []);
  });

  it('list: q works with non-ASCII prefixes', async () => {
    const tok = await freshAccount();
    await create(tok, { user_group_id: 'zürich-1' });
    await create(tok, { user_group_id: '\u{1F600}-smile' });
    await create(tok, { user_group_id: 'zurich-2' });
    assert.deepEqual(
      (await list(tok, { q: 'zü' })).user_groups.map((g) => g.provided_id),
      ['zürich-1'],
    );
    assert.deepEqual(
      (await list(tok, { q: '\u{1F600}' })).user_groups.map((g) => g.provided_id),
      ['\u{1F600}-smile'],
    );
  });

  it('list: q lists a group that matches by id and by name once; prefixes at the edges of Unicode work', async () => {
    const tok = await freshAccount();
    await create(tok, { user_group_id: 'both-1', name: 'both one' });
    await create(tok, { user_group_id: 'edge-\u{10FFFF}', name: 'x' });
    await create(tok, { user_group_id: 'edge-\u{10FFFF}\u{10FFFF}z', name: 'y' });
    await create(tok, { user_group_id: 'edge-\uD7FF', name: 'z' });
    await create(tok, { user_group_id: 'edge-\uE000', name: 'w' });
    const ids = async (q: string) => (await list(tok, { q })).user_groups.map((g) => g.provided_id);
    assert.deepEqual(await ids('both'), ['both-1']);
    assert.deepEqual(await ids('edge-\u{10FFFF}'), ['edge-\u{10FFFF}', 'edge-\u{10FFFF}\u{10FFFF}z']);
    assert.deepEqual(await ids('edge-\u{10FFFF}\u{10FFFF}'), ['edge-\u{10FFFF}\u{10FFFF}z']);
    assert.deepEqual(await ids('edge-\uD7FF'), ['edge-\uD7FF']);
    assert.deepEqual(await ids('edge-\uE000'), ['edge-\uE000']);
  });

  it('list: q and limit combine; next_cursor keeps the filter across pages', async () => {
    const tok = await freshAccount();
    for (let i = 0; i < 5; i++) {
      await create(tok, { user_group_id: `keep-${i}` });
      await create(tok, { user_group_id: `skip-${i}` });
    }
    const { ids } = await walk(tok, 2, { q: 'keep' });
    assert.deepEqual(ids, ['keep-0', 'keep-1', 'keep-2', 'keep-3', 'keep-4']);
  });

  it('list: shows one environment at a time: the token default unless api_environment_tag says otherwise', async () => {
    const tok = await freshAccount();
    await create(tok, { user_group_id: 'same', name: 'customer copy' });
    await create(tok, { user_group_id: 'same', name: 'testing copy', api_environment_tag: 'Testing' });
    await create(tok, { user_group_id: 'only-testing', api_environment_tag: 'Testing' });
    const customer = await list(tok);
    assert.deepEqual(
      customer.user_groups.map((g) => [g.provided_id, g.name, g.api_environment_tag]),
      [['same', 'customer copy', 'Customer']],
    );
    const testing = await list(tok, { api_environment_tag: 'Testing' });
    assert.deepEqual(
      testing.user_groups.map((g) => [g.provided_id, g.api_environment_tag]),
      [
        ['same', 'Testing'],
        ['only-testing', 'Testing'],
      ],
    );
    const bad = await t.request('GET', '/api/users', { token: tok, query: { api_environment_tag: 'testing' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.details![0].field, 'api_environment_tag');
  });

  it('list: a token restricted to one environment lists it by default and gets 403 environment_forbidden for the other', async () => {
    const slug = `list-${++accounts}`;
    const full = (await t.issueToken({ account: slug })).token;
    const testingOnly = (await t.issueToken({ account: slug, env: 'Testing' })).token;
    await create(full, { user_group_id: 'c1' });
    await create(full, { user_group_id: 't1', api_environment_tag: 'Testing' });
    assert.deepEqual(
      (await list(testingOnly)).user_groups.map((g) => g.provided_id),
      ['t1'],
    );
    const res = await t.request('GET', '/api/users', { token: testingOnly, query: { api_environment_tag: 'Customer' } });
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'environment_forbidden');
  });

  it('list: a read-only token may list', async () => {
    const slug = `list-${++accounts}`;
    const full = (await t.issueToken({ account: slug })).token;
    const readOnly = (await t.issueToken({ account: slug, scopes: ['read'] })).token;
    await create(full, { user_group_id: 'visible' });
    assert.deepEqual(
      (await list(readOnly)).user_groups.map((g) => g.provided_id),
      ['visible'],
    );
  });

  it('list: an unknown query parameter answers 400 validation_failed naming it', async () => {
    const tok = await freshAccount();
    const res = await t.request('GET', '/api/users', { token: tok, query: { page: '2' } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.equal(res.body.error.details![0].field, 'page');
  });

  it("list: only the caller's account is listed, and another account's cursor reveals nothing of it", async () => {
    const a = await freshAccount();
    const b = await freshAccount();
    for (let i = 0; i < 3; i++) await create(a, { user_group_id: `mine-${i}` });
    await create(b, { user_group_id: 'theirs' });
    assert.deepEqual(
      (await list(b)).user_groups.map((g) => g.provided_id),
      ['theirs'],
    );
    assert.deepEqual((await list(b, { q: 'mine' })).user_groups, []);
    const aPage = await list(a, { limit: '1' });
    assert.ok(aPage.next_cursor);
    const bWithA = await list(b, { cursor: aPage.next_cursor! });
    assert.ok(bWithA.user_groups.every((g) => g.provided_id === 'theirs'));
  });

  it('list: every page is written as a lookup answers each of its groups, byte for byte: any text, any place in a hierarchy, every filter', async () => {
    // The database writes a page's objects (docs/api.md, "GET /api/users: list"); a lookup's
    // are written in JavaScript. Texts that need escaping, and children whose computed fields
    // come from their chains.
    const tok = await freshAccount();
    // Plain text (ids, names, tags, levels) takes no control characters; JSON values take any.
    const odd = 'quote " backslash \\ slash / é 漢字 😀 \u2028 \u2029 \ufffd';
    const control = `${odd} newline \n tab \t control \u0001\u001f del \u007f`;
    await create(tok, {
      user_group_id: `root ${odd}`,
      name: odd,
      mapping: { '40': control },
      properties: { [control]: control, plan: 'pro', nested: { a: [1, null, true, control] } },
      group_tags: ['t', odd],
    });
    await create(tok, { user_group_id: 'child', parent_user_group_id: `root ${odd}`, properties: { plan: 'free' }, hierarchy_level: odd, is_demo_group: true });
    await create(tok, { user_group_id: 'grandchild', parent_user_group_id: 'child', mapping: { '41': 'x' }, group_tags: ['t'] });
    await create(tok, { user_group_id: 'plain', name: 'Plain', properties: null, mapping: null });
    await create(tok, { user_group_id: 'second child', parent_user_group_id: `root ${odd}`, hierarchy_level: odd });
    const answered = new Map<string, unknown>();
    for (const id of [`root ${odd}`, 'child', 'grandchild', 'plain', 'second child']) {
      const res = await t.request('GET', '/api/user', { token: tok, body: { user_group_id: id } });
      assert.equal(res.status, 200);
      const { token: _token, ...group } = res.body.user_group;
      answered.set(id, group);
    }
    const queries: Record<string, string>[] = [
      {},
      { limit: '2' },
      { q: 'root' },
      { q: 'Plain' },
      { q: 'root', tag: 't' },
      { tag: 't' },
      { parent_user_group_id: `root ${odd}` },
      { parent_user_group_id: 'child' },
      { hierarchy_level: odd },
    ];
    for (const query of queries) {
      let cursor: string | null = null;
      do {
        const res: HttpResult<EndpointBody<'GET', '/api/users'>> = await t.request('GET', '/api/users', {
          token: tok,
          query: { ...query, ...(cursor ? { cursor } : {}) },
        });
        assert.equal(res.status, 200, res.text);
        const ids = (res.body.user_groups as { provided_id: string }[]).map((g) => g.provided_id);
        cursor = res.body.next_cursor;
        const expected = JSON.stringify({ success: 1, user_groups: ids.map((id) => answered.get(id)), next_cursor: cursor });
        assert.equal(res.text, expected, `the page of ${JSON.stringify(query)}`);
      } while (cursor !== null);
    }
  });
});
