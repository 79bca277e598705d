// Hierarchy, tags and rename (docs/api.md, "Hierarchy"): parents and inherited values, the
// depth and cycle rules, level names, tags and their filter, renames, and deleting groups
// that have children. Races and several instances: test/hierarchy-races.test.ts.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp, type AnyAnswer, type HttpResult, createGroup } from './helpers/harness.ts';
import { findAccountBySlug } from '../src/accounts/accounts.repository.ts';
import { setAccountLevels } from '../src/user-groups/hierarchy/hierarchy.repository.ts';

forEachBackend('hierarchy of user groups', (backend) => {
  const t = useTestApp(backend);
  let n = 0;
  const uid = (label: string) => `h-${label}-${++n}`;

  const post = (body: Record<string, unknown>) => t.request('POST', '/api/user', { token: t.token, body });
  const put = (body: Record<string, unknown>) => t.request('PUT', '/api/user', { token: t.token, body });
  const get = (body: Record<string, unknown>) => t.request('GET', '/api/user', { token: t.token, body });
  const list = (query: Record<string, string>) => t.request('GET', '/api/users', { token: t.token, query: { limit: '500', ...query } });
  const remove = (body: Record<string, unknown>, query: Record<string, string> = {}) => t.request('DELETE', '/api/user', { token: t.token, body, query });
  const context = (token: string) => t.request('GET', '/api/embed/context', { headers: { authorization: `Bearer ${token}` } });

  const created = (body: Record<string, unknown>) => createGroup(t, body);

  function assertError(res: HttpResult<AnyAnswer>, status: number, code: string, field?: string) {
    assert.equal(res.status, status, res.text);
    assert.equal(res.body.error.code, code, res.text);
    if (field)
      assert.ok(
        res.body.error.details?.some((d) => d.field === field),
        `details name ${field}: ${res.text}`,
      );
  }

  /** A company and one of its users, the docs' worked example. */
  async function companyAndUser() {
    const company = await created({ user_group_id: uid('acme'), properties: { region: 'emea', plan: 'pro' }, mapping: { '40': 'acme-db' } });
    const user = await created({ user_group_id: uid('jane'), parent_user_group_id: company.provided_id, properties: { plan: 'trial', seat: 7 } });
    return { company, user };
  }

  it('parent: a child shows its parent id, its own properties, and computed values where the nearest wins key by key', async () => {
    const { company, user } = await companyAndUser();
    assert.equal(user.parent_user_group_id, company.provided_id);
    assert.deepEqual(user.properties, { plan: 'trial', seat: 7 });
    assert.equal(user.mapping, null);
    assert.deepEqual(user.computed_properties, { region: 'emea', plan: 'trial', seat: 7 });
    assert.deepEqual(user.computed_mapping, { '40': 'acme-db' });
    assert.equal(company.parent_user_group_id, null);
    assert.deepEqual(company.computed_properties, company.properties);
    for (const res of [await get({ user_group_id: user.provided_id }), await list({ parent_user_group_id: company.provided_id })]) {
      const shown = 'user_group' in res.body ? res.body.user_group : res.body.user_groups[0];
      assert.deepEqual(shown.computed_properties, { region: 'emea', plan: 'trial', seat: 7 });
      assert.equal(shown.parent_user_group_id, company.provided_id);
    }
  });

  it('parent: three levels merge from the root down, and a group without values of its own inherits all', async () => {
    const root = await created({ user_group_id: uid('league'), properties: { sport: 'hockey', season: 2026 } });
    const team = await created({ user_group_id: uid('team'), parent_user_group_id: root.provided_id, properties: { season: 2027, team: 'owls' } });
    const player = await created({ user_group_id: uid('player'), parent_user_group_id: team.provided_id });
    assert.equal(player.properties, null);
    assert.deepEqual(player.computed_properties, { sport: 'hockey', season: 2027, team: 'owls' });
  });

  it('parent: get-or-create creates a child under its parent and answers later calls with the computed values', async () => {
    const { company } = await companyAndUser();
    const id = uid('goc-child');
    const first = await get({ user_group_id: id, parent_user_group_id: company.provided_id });
    assert.equal(first.status, 201, first.text);
    assert.equal(first.body.user_group.parent_user_group_id, company.provided_id);
    const again = await t.request('GET', '/api/user', { token: t.token, query: { user_group_id: id } });
    assert.equal(again.status, 200);
    assert.deepEqual(again.body.user_group.computed_properties, { region: 'emea', plan: 'pro' });
  });

  it('parent: update attaches, moves and (with null) detaches a group', async () => {
    const { company, user } = await companyAndUser();
    const other = await created({ user_group_id: uid('globex'), properties: { region: 'apac' } });
    const moved = await put({ user_group_id: user.provided_id, parent_user_group_id: other.provided_id });
    assert.equal(moved.status, 200, moved.text);
    assert.equal(moved.body.user_group.parent_user_group_id, other.provided_id);
    assert.deepEqual(moved.body.user_group.computed_properties, { region: 'apac', plan: 'trial', seat: 7 });
    const detached = await put({ user_group_id: user.provided_id, parent_user_group_id: null });
    assert.equal(detached.body.user_group.parent_user_group_id, null);
    assert.deepEqual(detached.body.user_group.computed_properties, { plan: 'trial', seat: 7 });
    assert.equal(detached.body.user_group.token, user.token, 'the token stays');
    assert.equal((await list({ parent_user_group_id: company.provided_id })).body.user_groups.length, 0);
  });

  it("parent: a change to a parent's properties shows in its child's next read and embed variables", async () => {
    const { company, user } = await companyAndUser();
    assert.equal((await put({ user_group_id: company.provided_id, properties: { region: 'apac', tier: 'gold' } })).status, 200);
    const read = await get({ user_group_id: user.provided_id });
    assert.deepEqual(read.body.user_group.computed_properties, { region: 'apac', tier: 'gold', plan: 'trial', seat: 7 });
    const ctx = await context(user.token);
    assert.equal(ctx.status, 200, ctx.text);
    assert.deepEqual(ctx.body.variables, {
      user_group_id: user.provided_id,
      user_group_name: user.name,
      region: 'apac',
      tier: 'gold',
      plan: 'trial',
      seat: 7,
    });
    assert.deepEqual(ctx.body.user_group.computed_mapping, { '40': 'acme-db' });
    assert.equal(ctx.body.user_group.parent_user_group_id, company.provided_id);
  });

  it('parent_not_found: an unknown parent, or one in the other environment, is 400 and creates or changes nothing', async () => {
    const testing = await created({ user_group_id: uid('testing-parent'), api_environment_tag: 'Testing' });
    for (const parent of ['no-such-group', testing.provided_id]) {
      const id = uid('orphan');
      assertError(await post({ user_group_id: id, parent_user_group_id: parent }), 400, 'parent_not_found', 'parent_user_group_id');
      assertError(await get({ user_group_id: id, parent_user_group_id: parent }), 400, 'parent_not_found');
      assert.equal((await list({ q: id })).body.user_groups.length, 0, 'nothing created');
    }
    const { user, company } = await companyAndUser();
    assertError(await put({ user_group_id: user.provided_id, parent_user_group_id: testing.provided_id, name: 'Changed' }), 400, 'parent_not_found');
    const after = (await get({ user_group_id: user.provided_id })).body.user_group;
    assert.equal(after.parent_user_group_id, company.provided_id, 'parent unchanged');
    assert.equal(after.name, user.name, 'nothing else changed either');
  });

  it('parent: an integer is read as its decimal string, as for ids; a fraction or a huge number is 400', async () => {
    const parent = await created({ user_group_id: 4207 });
    const child = await created({ user_group_id: uid('int-parent'), parent_user_group_id: 4207 });
    assert.equal(child.parent_user_group_id, parent.provided_id);
    for (const bad of [1.5, 1e300, true, {}, '']) {
      assertError(await post({ user_group_id: uid('bad-parent'), parent_user_group_id: bad }), 400, 'validation_failed');
    }
  });

  it('hierarchy_too_deep: at most 3 levels by default, counting the subtree a moved group brings', async () => {
    const a = await created({ user_group_id: uid('a') });
    const b = await created({ user_group_id: uid('b'), parent_user_group_id: a.provided_id });
    const c = await created({ user_group_id: uid('c'), parent_user_group_id: b.provided_id });
    assertError(await post({ user_group_id: uid('d'), parent_user_group_id: c.provided_id }), 400, 'hierarchy_too_deep', 'parent_user_group_id');
    // x with a child is two levels: under b (level 2) it would reach level 4.
    const x = await created({ user_group_id: uid('x') });
    await created({ user_group_id: uid('x-child'), parent_user_group_id: x.provided_id });
    assertError(await put({ user_group_id: x.provided_id, parent_user_group_id: b.provided_id }), 400, 'hierarchy_too_deep');
    assert.equal((await get({ user_group_id: x.provided_id })).body.user_group.parent_user_group_id, null, 'nothing changed');
    assert.equal((await put({ user_group_id: x.provided_id, parent_user_group_id: a.provided_id })).status, 200, 'under a root it fits');
  });

  it('hierarchy_cycle: a group under itself or under one of its descendants is 409 and changes nothing', async () => {
    const a = await created({ user_group_id: uid('cyc-a') });
    const b = await created({ user_group_id: uid('cyc-b'), parent_user_group_id: a.provided_id });
    const c = await created({ user_group_id: uid('cyc-c'), parent_user_group_id: b.provided_id });
    for (const under of [a, b, c]) {
      assertError(await put({ user_group_id: a.provided_id, parent_user_group_id: under.provided_id }), 409, 'hierarchy_cycle', 'parent_user_group_id');
    }
    assert.equal((await get({ user_group_id: a.provided_id })).body.user_group.parent_user_group_id, null);
  });

  it('hierarchy_level: free text until the account declares levels; then one of them and deeper than the parent, else 400', async () => {
    const free = await created({ user_group_id: uid('free'), hierarchy_level: 'Anything' });
    assert.equal(free.hierarchy_level, 'Anything');
    const account = await findAccountBySlug(t.handle.db, 'acme');
    await setAccountLevels(t.handle.db, account!.id, ['Customer', 'User']);
    try {
      const company = await created({ user_group_id: uid('lvl-co'), hierarchy_level: 'Customer' });
      const user = await created({ user_group_id: uid('lvl-user'), hierarchy_level: 'User', parent_user_group_id: company.provided_id });
      assertError(await post({ user_group_id: uid('lvl-x'), hierarchy_level: 'Team' }), 400, 'validation_failed', 'hierarchy_level');
      assertError(
        await post({ user_group_id: uid('lvl-y'), hierarchy_level: 'Customer', parent_user_group_id: company.provided_id }),
        400,
        'validation_failed',
      );
      // The parent cannot move below its children's level.
      assertError(await put({ user_group_id: company.provided_id, hierarchy_level: 'User' }), 400, 'validation_failed', 'hierarchy_level');
      assertError(await put({ user_group_id: user.provided_id, hierarchy_level: 'Customer' }), 400, 'validation_failed');
      assert.equal((await get({ user_group_id: company.provided_id })).body.user_group.hierarchy_level, 'Customer');
      const users = await list({ hierarchy_level: 'User' });
      assert.deepEqual(
        users.body.user_groups.map((g) => g.provided_id),
        [user.provided_id],
      );
      assertError(await post({ user_group_id: uid('lvl-long'), hierarchy_level: 'L'.repeat(65) }), 400, 'validation_failed');
    } finally {
      await setAccountLevels(t.handle.db, account!.id, null);
    }
  });

  it('group_tags: stored without duplicates in code-point order, replaced as a whole, and filtered on', async () => {
    const g = await created({ user_group_id: uid('tags'), group_tags: ['zeta', 'beta', 'zeta', 'Émile', 'alpha', '😀', 'ｗide'] });
    assert.deepEqual(g.group_tags, ['alpha', 'beta', 'zeta', 'Émile', 'ｗide', '😀']);
    const plain = await created({ user_group_id: uid('no-tags') });
    assert.deepEqual(plain.group_tags, []);
    const replaced = await put({ user_group_id: g.provided_id, group_tags: ['gamma'] });
    assert.deepEqual(replaced.body.user_group.group_tags, ['gamma']);
    assert.deepEqual(
      (await list({ tag: 'gamma' })).body.user_groups.map((x) => x.provided_id),
      [g.provided_id],
    );
    assert.deepEqual(
      (await list({ tag: 'beta' })).body.user_groups.map((x) => x.provided_id),
      [],
      'old tags are gone',
    );
    assert.equal((await put({ user_group_id: g.provided_id, group_tags: [] })).body.user_group.group_tags.length, 0);
    assert.equal((await list({ tag: 'gamma' })).body.user_groups.length, 0);
  });

  it('group_tags: a tag of 65 characters, 51 tags, a control character or a lone surrogate is 400 and changes nothing', async () => {
    const g = await created({ user_group_id: uid('bad-tags'), group_tags: ['keep'] });
    const bad = [['t'.repeat(65)], Array.from({ length: 51 }, (_, i) => `t${i}`), ['a\u0007b'], ['\ud800'], [''], 'not-a-list', [3]];
    for (const tags of bad) {
      assertError(await put({ user_group_id: g.provided_id, group_tags: tags, name: 'Changed' }), 400, 'validation_failed');
      assertError(await post({ user_group_id: uid('bad-tags-new'), group_tags: tags }), 400, 'validation_failed');
    }
    const after = (await get({ user_group_id: g.provided_id })).body.user_group;
    assert.deepEqual(after.group_tags, ['keep']);
    assert.equal(after.name, g.name);
    assert.equal((await created({ user_group_id: uid('fifty'), group_tags: Array.from({ length: 50 }, (_, i) => `t${i}`) })).group_tags.length, 50);
    assert.equal((await created({ user_group_id: uid('sixty-four'), group_tags: ['t'.repeat(64)] })).group_tags[0].length, 64);
  });

  it('list: parent, tag and level filters combine with each other, with q and with the cursor', async () => {
    const parent = await created({ user_group_id: uid('filters-parent') });
    const prefix = uid('filters-kid');
    const kids: { provided_id: string }[] = [];
    for (let i = 0; i < 7; i++) {
      kids.push(
        await created({
          user_group_id: `${prefix}-${i}`,
          parent_user_group_id: parent.provided_id,
          group_tags: i % 2 === 0 ? ['even'] : ['odd'],
          hierarchy_level: i < 4 ? 'low' : 'high',
        }),
      );
    }
    await created({ user_group_id: `${prefix}-stranger`, group_tags: ['even'] }); // same prefix and tag, another parent
    const walk = async (query: Record<string, string>) => {
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const res = await list({ ...query, limit: '2', ...(cursor ? { cursor } : {}) });
        assert.equal(res.status, 200, res.text);
        seen.push(...res.body.user_groups.map((g) => g.provided_id));
        cursor = res.body.next_cursor;
      } while (cursor);
      return seen;
    };
    const ids = (pick: (i: number) => boolean) => kids.filter((_, i) => pick(i)).map((k) => k.provided_id);
    assert.deepEqual(
      await walk({ parent_user_group_id: parent.provided_id }),
      ids(() => true),
    );
    assert.deepEqual(
      await walk({ parent_user_group_id: parent.provided_id, tag: 'even' }),
      ids((i) => i % 2 === 0),
    );
    assert.deepEqual(
      await walk({ tag: 'even', q: prefix, hierarchy_level: 'high' }),
      ids((i) => i % 2 === 0 && i >= 4),
    );
    assert.deepEqual(
      await walk({ q: prefix, parent_user_group_id: parent.provided_id, hierarchy_level: 'low' }),
      ids((i) => i < 4),
    );
    assert.deepEqual(
      await walk({ hierarchy_level: 'high', parent_user_group_id: parent.provided_id }),
      ids((i) => i >= 4),
    );
    assert.deepEqual(await walk({ tag: 'even', q: prefix }), [...ids((i) => i % 2 === 0), `${prefix}-stranger`]);
    assert.deepEqual((await list({ parent_user_group_id: 'no-such-parent' })).body.user_groups, [], 'an unknown parent has no children');
  });

  it('rename: new_user_group_id keeps the token, team_id, children and history; the old id is gone', async () => {
    const { company, user } = await companyAndUser();
    const newId = uid('acme-renamed');
    const res = await put({ user_group_id: company.provided_id, new_user_group_id: newId });
    assert.equal(res.status, 200, res.text);
    const renamed = res.body.user_group;
    assert.equal(renamed.provided_id, newId);
    assert.equal(renamed.token, company.token);
    assert.equal(renamed.team_id, company.team_id);
    assert.equal((await get({ user_group_id: user.provided_id })).body.user_group.parent_user_group_id, newId, "the child names its parent's new id");
    assert.deepEqual(
      (await list({ parent_user_group_id: newId })).body.user_groups.map((g) => g.provided_id),
      [user.provided_id],
    );
    assert.equal(
      (await t.request('GET', '/api/users', { token: t.token, query: { q: company.provided_id } })).body.user_groups.filter(
        (g) => g.provided_id === company.provided_id,
      ).length,
      0,
    );
    const history = await t.request('GET', '/api/user/history', { token: t.token, query: { user_group_id: newId } });
    assert.deepEqual(
      history.body.entries.map((e) => e.action),
      ['user_group.update', 'user_group.create'],
    );
    assert.deepEqual(history.body.entries[0].details, { user_group_id: { old: company.provided_id, new: newId } });
    assert.deepEqual(history.body.entries[0].changed_fields, ['user_group_id']);
    assert.equal((await context(company.token)).body.user_group.provided_id, newId, 'the embed side sees the new id');
  });

  it('rename: to a taken id is 409 user_group_exists, to the same id is 400, an integer is its decimal string; nothing changes', async () => {
    const a = await created({ user_group_id: uid('ren-a') });
    const b = await created({ user_group_id: uid('ren-b') });
    assertError(await put({ user_group_id: a.provided_id, new_user_group_id: b.provided_id, name: 'Changed' }), 409, 'user_group_exists');
    assertError(await put({ user_group_id: a.provided_id, new_user_group_id: a.provided_id }), 400, 'validation_failed', 'new_user_group_id');
    assert.equal((await get({ user_group_id: a.provided_id })).body.user_group.name, a.name);
    const numeric = await put({ user_group_id: a.provided_id, new_user_group_id: 90210 + n });
    assert.equal(numeric.body.user_group.provided_id, String(90210 + n));
    assertError(await put({ user_group_id: b.provided_id, new_user_group_id: ' ' }), 400, 'validation_failed');
  });

  it('user_group_has_children: deleting a parent is 409 and deletes nothing; cascade=true deletes the subtree, with a history entry each', async () => {
    const root = await created({ user_group_id: uid('del-root') });
    const mid = await created({ user_group_id: uid('del-mid'), parent_user_group_id: root.provided_id });
    const leaf = await created({ user_group_id: uid('del-leaf'), parent_user_group_id: mid.provided_id });
    const sibling = await created({ user_group_id: uid('del-sibling'), parent_user_group_id: root.provided_id });
    assertError(await remove({ user_group_id: root.provided_id }), 409, 'user_group_has_children');
    assertError(await remove({ user_group_id: mid.provided_id }), 409, 'user_group_has_children');
    assert.equal((await context(leaf.token)).status, 200, 'nothing deleted');
    const res = await remove({ user_group_id: mid.provided_id }, { cascade: 'true' });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.deleted_count, 2);
    assert.equal(res.body.user_group.provided_id, mid.provided_id);
    for (const gone of [mid, leaf]) {
      assert.equal((await context(gone.token)).status, 401, "the children's tokens die with them");
      const history = await t.request('GET', '/api/user/history', { token: t.token, query: { user_group_id: gone.provided_id } });
      assert.equal(history.body.entries[0].action, 'user_group.delete');
    }
    assert.equal((await context(sibling.token)).status, 200, 'the rest of the tree stays');
    const all = await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: root.provided_id, cascade: true } });
    assert.equal(all.body.deleted_count, 2);
    assertError(await remove({ user_group_id: root.provided_id }, { cascade: 'maybe' }), 400, 'validation_failed');
  });

  it('history: parent changes, tag changes and renames are recorded with old and new values, never a token', async () => {
    const { company, user } = await companyAndUser();
    const other = await created({ user_group_id: uid('hist-other') });
    await put({ user_group_id: user.provided_id, parent_user_group_id: other.provided_id, group_tags: ['b', 'a'] });
    await put({ user_group_id: user.provided_id, parent_user_group_id: null });
    const res = await t.request('GET', '/api/user/history', { token: t.token, query: { user_group_id: user.provided_id } });
    const [detach, move, create] = res.body.entries;
    assert.deepEqual(detach.details, { parent_user_group_id: { old: other.provided_id, new: null } });
    assert.deepEqual(move.details, {
      parent_user_group_id: { old: company.provided_id, new: other.provided_id },
      group_tags: { old: [], new: ['a', 'b'] },
    });
    assert.deepEqual([...move.changed_fields!].sort(), ['group_tags', 'parent_user_group_id']);
    assert.deepEqual(create.details, { parent_user_group_id: { old: null, new: company.provided_id } });
    assert.ok(!res.text.includes('ugs_grp_'), 'no token in history');
  });
});

forEachBackend('hierarchy depth setting', (backend) => {
  const t = useTestApp(backend, { config: { maxHierarchyDepth: 5 } });

  it('UGS_MAX_HIERARCHY_DEPTH: a deeper limit allows that many levels, merges all of them, and refuses one more', async () => {
    let parent: string | null = null;
    let token = '';
    for (let level = 1; level <= 5; level++) {
      const body: Record<string, unknown> = {
        user_group_id: `deep-${level}`,
        parent_user_group_id: parent,
        properties: { [`l${level}`]: level, nearest: level },
      };
      const res = await t.request('POST', '/api/user', { token: t.token, body });
      assert.equal(res.status, 201, res.text);
      parent = `deep-${level}`;
      token = res.body.user_group.token;
    }
    const merged = { l1: 1, l2: 2, l3: 3, l4: 4, l5: 5, nearest: 5 };
    const read = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: 'deep-5' } });
    assert.deepEqual(read.body.user_group.computed_properties, merged, 'all five levels, past the three the hot read joins');
    const ctx = await t.request('GET', '/api/embed/context', { headers: { authorization: `Bearer ${token}` } });
    assert.deepEqual(ctx.body.variables, { user_group_id: 'deep-5', user_group_name: 'deep-5', ...merged });
    const res = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: 'deep-6', parent_user_group_id: parent } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'hierarchy_too_deep');
    assert.match(res.body.error.message, /at most 5 levels/);
  });
});
