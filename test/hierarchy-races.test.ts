// The hierarchy's rules under concurrency, with two real server processes on one database
// (two PostgreSQL instances; two processes on one SQLite file): two moves that would together
// form a cycle never both succeed, two renames to one id give one winner, and a parent's change
// shows in its child's computed values on the other instance at once (docs/api.md, "Hierarchy").
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend } from './helpers/harness.ts';
import { httpRequest, useServerProcesses } from './helpers/processes.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { declareAccountLevels } from '../src/user-groups/hierarchy/account-levels.service.ts';

const ROUNDS = 15;

forEachBackend('hierarchy races across two server processes', (backend) => {
  const two = useServerProcesses(backend);

  const { on } = two;
  const put = (i: number, body: Record<string, unknown>) => httpRequest(on(i), 'PUT', '/api/user', { token: two.token, body });
  const create = async (i: number, body: Record<string, unknown>) => {
    const res = await httpRequest(on(i), 'POST', '/api/user', { token: two.token, body });
    assert.equal(res.status, 201, res.text);
    return res.body.user_group;
  };
  const parentOf = async (i: number, id: string) =>
    (await httpRequest(on(i), 'GET', '/api/user', { token: two.token, body: { user_group_id: id } })).body.user_group.parent_user_group_id;

  it(`hierarchy_cycle under races: A under B and B under A at once, on two instances, never both succeed (${ROUNDS} rounds)`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const [a, b] = [`race-a-${round}`, `race-b-${round}`];
      await create(0, { user_group_id: a });
      await create(1, { user_group_id: b });
      const [first, second] = await Promise.all([put(0, { user_group_id: a, parent_user_group_id: b }), put(1, { user_group_id: b, parent_user_group_id: a })]);
      const statuses = [first.status, second.status].sort();
      assert.deepEqual(statuses, [200, 409], `round ${round}: ${first.text} / ${second.text}`);
      const loser = first.status === 409 ? first : second;
      assert.equal(loser.body.error.code, 'hierarchy_cycle');
      const parents = [await parentOf(1, a), await parentOf(0, b)];
      assert.equal(parents.filter((p) => p !== null).length, 1, `round ${round}: exactly one of them has a parent (${parents})`);
    }
  });

  it('hierarchy_cycle under races: a three-group ring closed from both instances at once is refused once', async () => {
    for (let round = 0; round < 5; round++) {
      const [a, b, c] = ['a', 'b', 'c'].map((x) => `ring-${x}-${round}`);
      for (const id of [a, b, c]) await create(round, { user_group_id: id });
      await put(0, { user_group_id: b, parent_user_group_id: a }); // a <- b
      const results = await Promise.all([put(0, { user_group_id: c, parent_user_group_id: b }), put(1, { user_group_id: a, parent_user_group_id: c })]);
      assert.deepEqual(results.map((r) => r.status).sort(), [200, 409], results.map((r) => r.text).join(' / '));
    }
  });

  it('hierarchy_too_deep under races: two moves that are each legal but together make four levels never both succeed', async () => {
    for (let round = 0; round < 8; round++) {
      const [a, b, e, f] = ['a', 'b', 'e', 'f'].map((x) => `depth-${x}-${round}`);
      await create(0, { user_group_id: a });
      await create(0, { user_group_id: b, parent_user_group_id: a }); // a <- b
      await create(1, { user_group_id: e });
      await create(1, { user_group_id: f });
      // e under b alone: a <- b <- e, three levels. f under e alone: e <- f, two. Both: a <- b <- e <- f, four.
      const racing = await Promise.all([put(0, { user_group_id: f, parent_user_group_id: e }), put(1, { user_group_id: e, parent_user_group_id: b })]);
      assert.deepEqual(racing.map((r) => r.status).sort(), [200, 400], racing.map((r) => r.text).join(' / '));
      assert.equal(racing.find((r) => r.status === 400)!.body.error.code, 'hierarchy_too_deep');
    }
  });

  it('rename under races: two groups renamed to one new id at once, on two instances, give one 200 and one 409', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const [a, b, target] = [`ren-a-${round}`, `ren-b-${round}`, `ren-target-${round}`];
      await create(0, { user_group_id: a });
      await create(1, { user_group_id: b });
      const results = await Promise.all([put(0, { user_group_id: a, new_user_group_id: target }), put(1, { user_group_id: b, new_user_group_id: target })]);
      assert.deepEqual(results.map((r) => r.status).sort(), [200, 409], results.map((r) => r.text).join(' / '));
      assert.equal(results.find((r) => r.status === 409)!.body.error.code, 'user_group_exists');
      const list = await httpRequest(on(round), 'GET', `/api/users?q=ren-&limit=500`, { token: two.token });
      assert.equal(list.body.user_groups.filter((g) => g.provided_id === target).length, 1);
    }
  });

  it("a parent's change shows in its child's computed values and embed variables on the other instance at once", async () => {
    const parent = await create(0, { user_group_id: 'live-parent', properties: { region: 'emea' } });
    const child = await create(1, { user_group_id: 'live-child', parent_user_group_id: parent.provided_id, properties: { seat: 1 } });
    for (let version = 1; version <= 10; version++) {
      const writer = version % 2;
      const changed = await put(writer, { user_group_id: parent.provided_id, properties: { region: 'emea', version } });
      assert.equal(changed.status, 200, changed.text);
      const reader = 1 - writer;
      const read = await httpRequest(on(reader), 'GET', '/api/user', { token: two.token, body: { user_group_id: child.provided_id } });
      assert.deepEqual(read.body.user_group.computed_properties, { region: 'emea', version, seat: 1 }, `version ${version} on instance ${reader}`);
      const ctx = await httpRequest(on(reader), 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${child.token}` } });
      assert.equal(ctx.body.variables.version, version);
    }
  });

  it(`ugs account levels under races: dropping a level while a create or a PUT sets it on two instances never leaves a group at an undeclared level (${ROUNDS} rounds)`, async () => {
    // What the CLI runs (its service), in this process on a connection of its own: a third process beside the two servers.
    const { handle } = await openMigratedDatabase({ databaseUrl: two.database.url });
    try {
      const declare = (levels: string[]) => declareAccountLevels(handle, 'acme', levels);
      for (let round = 0; round < ROUNDS; round++) {
        assert.equal((await declare(['L1', 'L2', 'X'])).outcome, 'declared');
        const [created, existing] = [`lv-new-${round}`, `lv-put-${round}`];
        await create(round, { user_group_id: existing, hierarchy_level: 'L1' });
        const [post, change, drop] = await Promise.all([
          httpRequest(on(round), 'POST', '/api/user', { token: two.token, body: { user_group_id: created, hierarchy_level: 'X' } }),
          put(round + 1, { user_group_id: existing, hierarchy_level: 'X' }),
          declare(['L1', 'L2']),
        ]);
        const atX = (await httpRequest(on(round), 'GET', '/api/users?hierarchy_level=X&limit=500', { token: two.token })).body.user_groups.map(
          (g) => g.provided_id,
        );
        const why = `round ${round}: POST ${post.status}, PUT ${change.status}, levels ${drop.outcome}; groups at X: ${atX}`;
        if (drop.outcome === 'declared') {
          // The declaration won: every write that set X either ran before it (and then the drop would have been refused) or was refused after it.
          assert.deepEqual(atX, [], why);
          assert.equal(post.status, 400, why);
          assert.equal(change.status, 400, why);
        } else {
          assert.equal(drop.outcome, 'in_use', why);
          assert.ok(atX.length > 0, why);
        }
        for (const id of [created, existing]) await httpRequest(on(round), 'DELETE', `/api/user?user_group_id=${id}`, { token: two.token });
      }
    } finally {
      await handle.close();
    }
  });
});
