// Change events (docs/api.md, "Change events"): every committed change has one event, written
// in the change's transaction (a refused change has none); the feed gives an account's
// events in order, to its own tokens only, and only the environment a token is restricted
// to; a cursor older than retention is 410.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp, createGroup, type SuiteApp } from './helpers/harness.ts';
import type { ChangeEventJson } from '../src/events/events.schemas.ts';
import { rotateSigningKey } from '../src/embed/signing-keys.ts';
import { GENEROUS_WAIT_MS, eventually } from './helpers/wait.ts';

const GROUP_EVENTS = 'user_group.created,user_group.updated,user_group.token_rotated,user_group.deleted';

/** The feed (user groups' events unless `query` says otherwise), waiting (generously) until it holds at least `count` events. */
export async function feedUntil(t: Pick<SuiteApp, 'request'>, token: string, count: number, query: Record<string, string> = {}): Promise<ChangeEventJson[]> {
  const deadline = Date.now() + GENEROUS_WAIT_MS;
  for (;;) {
    const res = await t.request('GET', '/api/events', { token, query: { limit: '500', types: GROUP_EVENTS, ...query } });
    assert.equal(res.status, 200, res.text);
    if (res.body.events.length >= count || Date.now() > deadline) return res.body.events;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

forEachBackend('change events: the feed', (backend) => {
  const t = useTestApp(backend);

  it('events: four changes to a group arrive as four events in order, with its identity, generation and what changed; never a token', async () => {
    const { token: own } = await t.issueToken({ account: 'four' });
    const group = await createGroup(t, { user_group_id: 'g4', name: 'Four', properties: { plan: 'a' } }, own);
    const updated = await t.request('PUT', '/api/user', { token: own, body: { user_group_id: 'g4', properties: { plan: 'b' } } });
    assert.equal(updated.status, 200);
    const rotated = await t.request('POST', '/api/user', { token: own, body: { current_token: group.token, grace_period_seconds: 60 } });
    assert.equal(rotated.status, 200);
    assert.equal((await t.request('DELETE', '/api/user', { token: own, query: { user_group_id: 'g4' } })).status, 200);

    const events = await feedUntil(t, own, 4);
    assert.deepEqual(
      events.map((event) => event.type),
      ['user_group.created', 'user_group.updated', 'user_group.token_rotated', 'user_group.deleted'],
    );
    const ids = events.map((event) => event.id);
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => a - b),
      'ids ascend',
    );
    for (const event of events) {
      assert.equal(event.account, 'four');
      assert.equal(event.data.team_id, group.team_id);
      assert.equal(event.data.user_group_id, 'g4');
      assert.equal(event.data.api_environment_tag, 'Customer');
    }
    assert.deepEqual(events[1].data.changed_fields, ['properties']);
    assert.equal(events[1].data.generation, events[0].data.generation);
    assert.equal(events[2].data.generation, Number(events[0].data.generation) + 1, 'the new generation');
    assert.ok(typeof events[2].data.grace_period_ends_at === 'string', 'the end of the grace period');
    const text = JSON.stringify(events);
    assert.ok(!text.includes(group.token) && !text.includes(rotated.body.user_group.token) && !/ugs_(grp|api)_/.test(text), 'no token');
  });

  it('events: a refused or failed change produces none', async () => {
    const { token: own } = await t.issueToken({ account: 'refused' });
    await createGroup(t, { user_group_id: 'r1' }, own);
    await feedUntil(t, own, 1);
    assert.equal((await t.request('POST', '/api/user', { token: own, body: { user_group_id: 'r1' } })).status, 409);
    assert.equal((await t.request('PUT', '/api/user', { token: own, body: { user_group_id: 'r1', name: '' } })).status, 400);
    assert.equal((await t.request('PUT', '/api/user', { token: own, body: { user_group_id: 'r1', parent_user_group_id: 'nope' } })).status, 400);
    assert.equal((await t.request('DELETE', '/api/user', { token: own, query: { user_group_id: 'nope' } })).status, 404);
    await createGroup(t, { user_group_id: 'r2' }, own); // a marker: once it is in the feed, anything before it is too
    const events = await feedUntil(t, own, 2);
    assert.deepEqual(
      events.map((event) => `${event.type} ${event.data.user_group_id}`),
      ['user_group.created r1', 'user_group.created r2'],
    );
  });

  it('events: a cascade delete gives one user_group.deleted per group; a rename and a move are updates naming old and new', async () => {
    const { token: own } = await t.issueToken({ account: 'tree' });
    await createGroup(t, { user_group_id: 'root' }, own);
    await createGroup(t, { user_group_id: 'other' }, own);
    await createGroup(t, { user_group_id: 'child', parent_user_group_id: 'root' }, own);
    await createGroup(t, { user_group_id: 'leaf', parent_user_group_id: 'child' }, own);
    const moved = await t.request('PUT', '/api/user', {
      token: own,
      body: { user_group_id: 'leaf', new_user_group_id: 'leaf2', parent_user_group_id: 'other' },
    });
    assert.equal(moved.status, 200, moved.text);
    assert.equal((await t.request('DELETE', '/api/user', { token: own, query: { user_group_id: 'root', cascade: 'true' } })).status, 200);
    const events = await feedUntil(t, own, 7);
    const update = events.find((event) => event.type === 'user_group.updated')!;
    assert.deepEqual(update.data.changes, { user_group_id: { old: 'leaf', new: 'leaf2' }, parent_user_group_id: { old: 'child', new: 'other' } });
    assert.deepEqual(
      events
        .filter((event) => event.type === 'user_group.deleted')
        .map((event) => event.data.user_group_id)
        .sort(),
      ['child', 'root'],
    );
  });

  it('events: API tokens created and revoked', async () => {
    const { token: admin } = await t.issueToken({ account: 'tokens', scopes: ['read', 'write', 'admin'] });
    const created = await t.request('POST', '/api/api_tokens', { token: admin, body: { scopes: ['read'], allowed_environment: 'Testing' } });
    assert.equal(created.status, 201);
    assert.equal((await t.request('DELETE', `/api/api_tokens/${created.body.api_token.id}`, { token: admin })).status, 200);
    const events = (await feedUntil(t, admin, 3, { types: 'api_token.created,api_token.revoked' })).slice(1); // the first: the admin token itself
    assert.deepEqual(
      events.map((event) => [event.type, event.data.api_token_id, event.data.allowed_environment]),
      [
        ['api_token.created', created.body.api_token.id, 'Testing'],
        ['api_token.revoked', created.body.api_token.id, 'Testing'],
      ],
    );
    assert.ok(!JSON.stringify(events).includes(created.body.token));
  });

  it("events: an account reads only its own; a token restricted to an environment only that environment's", async () => {
    const { token: a } = await t.issueToken({ account: 'iso-a' });
    const { token: b } = await t.issueToken({ account: 'iso-b' });
    const { token: testingOnly } = await t.issueToken({ account: 'iso-a', env: 'Testing' });
    await createGroup(t, { user_group_id: 'same', api_environment_tag: 'Customer' }, a);
    await createGroup(t, { user_group_id: 'same', api_environment_tag: 'Testing' }, a);
    await createGroup(t, { user_group_id: 'same' }, b);
    const ofA = await feedUntil(t, a, 2);
    assert.deepEqual(
      ofA.map((event) => [event.account, event.data.api_environment_tag]),
      [
        ['iso-a', 'Customer'],
        ['iso-a', 'Testing'],
      ],
    );
    const ofB = await feedUntil(t, b, 1);
    const allOfB = await feedUntil(t, b, 2, { types: `${GROUP_EVENTS},api_token.created` });
    assert.deepEqual(
      allOfB.map((event) => [event.type, event.account]),
      [
        ['api_token.created', 'iso-b'],
        ['user_group.created', 'iso-b'],
      ],
    );
    assert.ok(allOfB[0].id < allOfB[1].id, 'in order');
    assert.equal(ofB.length, 1);
    const testing = await feedUntil(t, testingOnly, 1);
    assert.deepEqual(
      testing.map((event) => event.data.api_environment_tag),
      ['Testing'],
    );
  });

  it('events: pages with after and next_cursor, filters by types, and refuses an unknown type or a malformed cursor', async () => {
    const { token: own } = await t.issueToken({ account: 'pages' });
    for (let i = 0; i < 5; i++) await createGroup(t, { user_group_id: `p${i}` }, own);
    await t.request('PUT', '/api/user', { token: own, body: { user_group_id: 'p0', name: 'renamed' } });
    await feedUntil(t, own, 6);
    // The API token's creation first; then five creates and an update.
    const all = (await t.request('GET', '/api/events', { token: own })).body.events.map((event) => event.id);
    assert.equal(all.length, 7);
    const first = await t.request('GET', '/api/events', { token: own, query: { limit: '2' } });
    assert.deepEqual(
      first.body.events.map((event) => event.id),
      all.slice(0, 2),
    );
    assert.equal(first.body.next_cursor, String(all[1]));
    const rest = await t.request('GET', '/api/events', { token: own, query: { after: first.body.next_cursor } });
    assert.deepEqual(
      rest.body.events.map((event) => event.id),
      all.slice(2),
    );
    assert.equal(rest.body.next_cursor, String(all[6]));
    const updates = await t.request('GET', '/api/events', { token: own, query: { types: 'user_group.updated' } });
    assert.deepEqual(
      updates.body.events.map((event) => event.id),
      [all[6]],
    );
    const none = await t.request('GET', '/api/events', { token: own, query: { types: 'user_group.deleted' } });
    assert.deepEqual(none.body.events, []);
    assert.equal(none.body.next_cursor, String(all[6]), 'a read that kept nothing still moves the cursor on');
    const empty = await t.request('GET', '/api/events', { token: own, query: { after: String(all[6]) } });
    assert.deepEqual([empty.body.events, empty.body.next_cursor], [[], String(all[6])]);

    const unknown = await t.request('GET', '/api/events', { token: own, query: { types: 'user_group.exploded' } });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.error.code, 'validation_failed');
    for (const after of ['-1', '1e2', 'abc', '01']) {
      const res = await t.request('GET', '/api/events', { token: own, query: { after } });
      assert.equal(res.status, 400, `after=${after}`);
    }
    const ahead = await t.request('GET', '/api/events', { token: own, query: { after: String(all[6] + 1) } });
    assert.equal(ahead.status, 410);
    assert.equal(ahead.body.error.code, 'cursor_expired');
  });

  it("events: an embed signing key added and retired reaches every account's feed, with its kid and never the key; not a token restricted to one environment", async () => {
    const { token: one } = await t.issueToken({ account: 'keys-one' });
    const { token: two } = await t.issueToken({ account: 'keys-two' });
    const { token: testingOnly } = await t.issueToken({ account: 'keys-one', env: 'Testing' });
    const first = await rotateSigningKey(t.handle, t.keyring, new Date(), 0, 'ES256');
    const rotation = await rotateSigningKey(t.handle, t.keyring, new Date(), 0, 'ES256');
    const types = 'embed_key.added,embed_key.retired';
    for (const token of [one, two]) {
      const events = await feedUntil(t, token, 3, { types });
      const added = events.find((event) => event.type === 'embed_key.added' && event.data.kid === rotation.kid);
      assert.ok(added, JSON.stringify(events));
      assert.equal(added.data.algorithm, 'ES256');
      assert.ok(events.some((event) => event.type === 'embed_key.retired' && event.data.kid === first.kid));
      assert.doesNotMatch(JSON.stringify(events), /"d"|private|BEGIN/);
    }
    const restricted = await t.request('GET', '/api/events', { token: testingOnly, query: { types } });
    assert.deepEqual(restricted.body.events, []);
  });

  it('events: after the feed loses its tail (a restore), new events never reuse an id given out before; a cursor from the lost tail is 410 while beyond the head, then reads every new event', async () => {
    const { token: own } = await t.issueToken({ account: 'lost-tail' });
    const account = await t.handle.db.selectFrom('accounts').select('id').where('slug', '=', 'lost-tail').executeTakeFirstOrThrow();
    for (const id of ['kept-1', 'kept-2']) await createGroup(t, { user_group_id: id }, own);
    const kept = await feedUntil(t, own, 2);
    const backupHead = kept[1].id;
    for (const id of ['lost-1', 'lost-2', 'lost-3']) await createGroup(t, { user_group_id: id }, own);
    const lost = (await feedUntil(t, own, 5)).slice(2);
    const lostCursor = String(lost[2].id);

    // What a restore of a copy taken at backupHead leaves: the feed and its head as they were then.
    await t.handle.db.deleteFrom('events').where('account_id', '=', account.id).where('seq', '>', backupHead).execute();
    await t.handle.db.updateTable('event_heads').set({ last_seq: backupHead }).where('account_id', '=', account.id).execute();

    const beyond = await t.request('GET', '/api/events', { token: own, query: { after: lostCursor } });
    assert.equal(beyond.status, 410, 'a cursor beyond the restored head is not in the feed');
    assert.equal(beyond.body.error.code, 'cursor_expired');

    await new Promise((resolve) => setTimeout(resolve, 5)); // a restore takes longer than this
    for (const id of ['new-1', 'new-2', 'new-3', 'new-4']) await createGroup(t, { user_group_id: id }, own);
    const after = await feedUntil(t, own, 6);
    const fresh = after.slice(2);
    assert.deepEqual(
      fresh.map((event) => event.data.user_group_id),
      ['new-1', 'new-2', 'new-3', 'new-4'],
    );
    const given = new Set([...kept, ...lost].map((event) => event.id));
    assert.deepEqual(
      fresh.filter((event) => given.has(event.id)),
      [],
      'no id given out before the loss is given again',
    );
    assert.ok(fresh[0].id > lost[2].id, 'new ids start above every id given out before');
    for (const event of after) assert.ok(Number.isSafeInteger(event.id), `${event.id} is exact in JSON`);

    const fromLostTail = await t.request('GET', '/api/events', { token: own, query: { after: lostCursor, types: GROUP_EVENTS } });
    assert.equal(fromLostTail.status, 200, fromLostTail.text);
    assert.deepEqual(
      fromLostTail.body.events.map((event) => event.data.user_group_id),
      ['new-1', 'new-2', 'new-3', 'new-4'],
      'a consumer of the lost tail misses none of the new events',
    );
    const fromBackup = await t.request('GET', '/api/events', { token: own, query: { after: String(backupHead), types: GROUP_EVENTS } });
    assert.deepEqual(
      fromBackup.body.events.map((event) => event.data.user_group_id),
      ['new-1', 'new-2', 'new-3', 'new-4'],
    );
  });

  it('events: a token without read scope is refused', async () => {
    const { token: adminOnly } = await t.issueToken({ account: 'scopes', scopes: ['admin'] });
    const res = await t.request('GET', '/api/events', { token: adminOnly });
    assert.equal(res.status, 403);
  });
});

forEachBackend('change events: retention', (backend) => {
  const t = useTestApp(backend, { config: { eventRetentionMs: 1000 } });

  it('events: a cursor older than the retention period is 410 cursor_expired; a read without after starts at the oldest kept', async () => {
    const { token: own } = await t.issueToken({ account: 'retention' });
    await createGroup(t, { user_group_id: 'old' }, own);
    assert.equal((await feedUntil(t, own, 1)).length, 1);
    const fromStart = () => t.request('GET', '/api/events', { token: own, query: { after: '0' } });
    // Events older than the retention are removed a few at a time: wait until the group's is too
    // (the API token's event, older, may go first, which already makes after=0 expired).
    await eventually('the event of "old" removed', async () => {
      const kept = await t.request('GET', '/api/events', { token: own, query: { limit: '500', types: GROUP_EVENTS } });
      return !kept.body.events.some((event) => event.data.user_group_id === 'old');
    });
    const res = await fromStart();
    assert.equal(res.status, 410);
    assert.equal(res.body.error.code, 'cursor_expired');
    await createGroup(t, { user_group_id: 'new' }, own);
    const kept = await feedUntil(t, own, 1);
    assert.deepEqual(
      kept.map((event) => event.data.user_group_id),
      ['new'],
    );
  });
});
