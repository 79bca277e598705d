// POST /api/users/upsert (docs/api.md, "POST /api/users/upsert"): up to 1,000 groups in one
// call, each created when missing or else given the fields it names; a bad item fails alone
// and changes nothing; an item may name as parent a group created earlier in the call;
// history and events as for single changes.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp, createGroup } from './helpers/harness.ts';
import { GENEROUS_WAIT_MS } from './helpers/wait.ts';

forEachBackend('POST /api/users/upsert', (backend) => {
  const t = useTestApp(backend);
  const upsert = (user_groups: unknown[], token = t.token) => t.request('POST', '/api/users/upsert', { token, body: { user_groups } });

  it('upsert: creates the missing, updates the existing (absent fields stay), answers unchanged when nothing changes, one result per item in order', async () => {
    await createGroup(t, { user_group_id: 'up-existing', name: 'Old name', properties: { plan: 'a' }, group_tags: ['x'] });
    const res = await upsert([
      { user_group_id: 'up-new', name: 'New', properties: { plan: 'b' } },
      { user_group_id: 'up-existing', name: 'New name' },
      { user_group_id: 'up-existing', name: 'New name' },
      { user_group_id: 42 },
    ]);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.results.map((r) => [r.user_group_id, r.api_environment_tag, r.status]),
      [
        ['up-new', 'Customer', 'created'],
        ['up-existing', 'Customer', 'updated'],
        ['up-existing', 'Customer', 'unchanged'],
        ['42', 'Customer', 'created'],
      ],
    );
    assert.deepEqual(res.body.counts, { created: 2, updated: 1, unchanged: 1, failed: 0 });
    assert.match(res.body.results[0].token!, /^ugs_grp_/, 'a created group answers its token');
    assert.equal(res.body.results[1].token, undefined, 'an updated one does not');
    const existing = await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'up-existing' } });
    assert.equal(existing.body.user_group.name, 'New name');
    assert.deepEqual(existing.body.user_group.properties, { plan: 'a' }, 'absent fields stay');
    assert.deepEqual(existing.body.user_group.group_tags, ['x']);
    assert.equal(existing.body.user_group.team_id, res.body.results[1].team_id);
    const created = await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'up-new' } });
    assert.equal(created.body.user_group.token, res.body.results[0].token, 'the token answered is the stored one');
  });

  it('upsert: a failed item changes nothing and answers the code of a single call; the others go on', async () => {
    const res = await upsert([
      { user_group_id: 'f-ok-1' },
      { user_group_id: 'f-bad-parent', parent_user_group_id: 'no-such-group', name: 'never stored' },
      { user_group_id: 'f-bad-field', name: 'x'.repeat(300) },
      { user_group_id: 'f-unknown-field', colour: 'red' },
      { name: 'no id' },
      { user_group_id: 'f-ok-2', properties: { a: 1 } },
    ]);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.results.map((r) => [r.user_group_id, r.status, r.error?.code]),
      [
        ['f-ok-1', 'created', undefined],
        ['f-bad-parent', 'failed', 'parent_not_found'],
        ['f-bad-field', 'failed', 'validation_failed'],
        ['f-unknown-field', 'failed', 'validation_failed'],
        ['', 'failed', 'validation_failed'],
        ['f-ok-2', 'created', undefined],
      ],
    );
    assert.equal((await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'f-bad-parent' } })).status, 404);
    assert.equal((await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'f-ok-2' } })).status, 200);
    // An item that is not even an object: the request is malformed, refused whole.
    const malformed = await upsert([{ user_group_id: 'f-never' }, 'not an object']);
    assert.equal(malformed.status, 400);
    assert.equal((await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'f-never' } })).status, 404);
  });

  it('upsert: an item holding a number a double cannot hold (1e400, 1e-400, beyond 2^53) fails alone, with the code and message a single call gets; the others go on', async () => {
    const bad = [
      ['n-big', '"properties":{"a":1e400}'],
      ['n-tiny', '"properties":{"list":[1,-1e-400]}'],
      ['n-int', '"mapping":{"40":9007199254740993}'],
    ];
    const raw = `{"user_groups":[{"user_group_id":"n-ok-1"},${bad.map(([id, field]) => `{"user_group_id":"${id}",${field}}`).join(',')},{"user_group_id":"n-ok-2","properties":{"b":1.5e300}}]}`;
    const res = await t.request('POST', '/api/users/upsert', { token: t.token, rawBody: raw });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.results.map((r) => [r.user_group_id, r.status]),
      [
        ['n-ok-1', 'created'],
        ['n-big', 'failed'],
        ['n-tiny', 'failed'],
        ['n-int', 'failed'],
        ['n-ok-2', 'created'],
      ],
    );
    for (const [i, [id, field]] of bad.entries()) {
      const single = await t.request('POST', '/api/user', { token: t.token, rawBody: `{"user_group_id":"${id}",${field}}` });
      assert.equal(single.status, 400);
      assert.deepEqual(res.body.results[i + 1].error, { code: single.body.error.code, message: single.body.error.message }, id);
      assert.equal((await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: id } })).status, 404, `${id} is not stored`);
    }
    assert.match(res.body.results[1].error!.message, /^properties\.a /, 'named from the item, as a single call names it');
    // Outside the items, it is the call's own body: refused whole, as before.
    const outside = await t.request('POST', '/api/users/upsert', { token: t.token, rawBody: '{"user_groups":[{"user_group_id":"n-never"}],"x":1e400}' });
    assert.equal(outside.status, 400);
    assert.equal((await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'n-never' } })).status, 404);
  });

  it('upsert: an item may name as parent a group created earlier in the same call, and a hierarchy rule broken fails that item only', async () => {
    const res = await upsert([
      { user_group_id: 'h-root', hierarchy_level: null },
      { user_group_id: 'h-child', parent_user_group_id: 'h-root' },
      { user_group_id: 'h-leaf', parent_user_group_id: 'h-child' },
      { user_group_id: 'h-too-deep', parent_user_group_id: 'h-leaf' },
      { user_group_id: 'h-root', parent_user_group_id: 'h-leaf' },
    ]);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.results.map((r) => [r.user_group_id, r.status, r.error?.code]),
      [
        ['h-root', 'created', undefined],
        ['h-child', 'created', undefined],
        ['h-leaf', 'created', undefined],
        ['h-too-deep', 'failed', 'hierarchy_too_deep'],
        ['h-root', 'failed', 'hierarchy_cycle'],
      ],
    );
    const leaf = await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'h-leaf' } });
    assert.equal(leaf.body.user_group.parent_user_group_id, 'h-child');
  });

  it('upsert: more than 1,000 items, or none, is refused whole and changes nothing', async () => {
    const items = Array.from({ length: 1001 }, (_, i) => ({ user_group_id: `too-many-${i}` }));
    const res = await upsert(items);
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.equal((await t.request('GET', '/api/user/lookup', { token: t.token, query: { user_group_id: 'too-many-0' } })).status, 404);
    assert.equal((await upsert([])).status, 400);
    assert.equal((await t.request('POST', '/api/users/upsert', { token: t.token, body: { groups: [] } })).status, 400);
  });

  it('upsert: 1,000 realistic items fit the body limit', async () => {
    const items = Array.from({ length: 1000 }, (_, i) => ({
      user_group_id: `bulk-${String(i).padStart(4, '0')}`,
      name: `Customer ${i} of the bulk import, with a longer name`,
      properties: { region: 'emea', plan: 'enterprise', seats: i, owner: `owner-${i}@example.com`, features: ['sso', 'audit', 'export'] },
      mapping: { database: `tenant_${i}`, schema: 'analytics' },
      group_tags: ['imported', 'enterprise'],
    }));
    const res = await upsert(items);
    assert.equal(res.status, 200, res.text.slice(0, 300));
    assert.equal(res.body.counts.created, 1000);
    assert.ok(Buffer.byteLength(JSON.stringify({ user_groups: items })) > 256 * 1024, 'more than the 256 KiB of other routes');
    const again = await upsert(items);
    assert.equal(again.body.counts.unchanged, 1000, 'a second run changes nothing');
  });

  it('upsert: needs the write scope; a token restricted to Testing fails items of Customer with environment_forbidden', async () => {
    const { token: readOnly } = await t.issueToken({ scopes: ['read'] });
    const refused = await upsert([{ user_group_id: 'ro' }], readOnly);
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, 'insufficient_scope');
    const { token: testing } = await t.issueToken({ env: 'Testing' });
    const res = await upsert(
      [
        { user_group_id: 'env-1', api_environment_tag: 'Customer' },
        { user_group_id: 'env-2', api_environment_tag: 'Testing' },
      ],
      testing,
    );
    assert.deepEqual(
      res.body.results.map((r) => [r.user_group_id, r.api_environment_tag, r.status, r.error?.code]),
      [
        ['env-1', 'Customer', 'failed', 'environment_forbidden'],
        ['env-2', 'Testing', 'created', undefined],
      ],
    );
  });

  it('upsert: history entries and change events as for single changes', async () => {
    const { token: own } = await t.issueToken({ account: 'upsert-events' });
    await upsert([{ user_group_id: 'ev-1' }, { user_group_id: 'ev-1', name: 'renamed' }, { user_group_id: 'ev-2', parent_user_group_id: 'nope' }], own);
    const history = await t.request('GET', '/api/user/history', { token: own, query: { user_group_id: 'ev-1' } });
    assert.deepEqual(
      history.body.entries.map((e) => e.action),
      ['user_group.update', 'user_group.create'],
    );
    const deadline = Date.now() + GENEROUS_WAIT_MS;
    let events = (await t.request('GET', '/api/events', { token: own, query: { types: 'user_group.created,user_group.updated' } })).body.events;
    while (events.length < 2 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      events = (await t.request('GET', '/api/events', { token: own, query: { types: 'user_group.created,user_group.updated' } })).body.events;
    }
    assert.deepEqual(
      events.map((e) => [e.type, e.data.user_group_id]),
      [
        ['user_group.created', 'ev-1'],
        ['user_group.updated', 'ev-1'],
      ],
    );
  });
});
