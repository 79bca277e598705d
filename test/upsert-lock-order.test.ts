// Concurrent bulk upserts that name the same groups in different orders, on two server
// processes sharing one database: each takes its rows' locks in one canonical order
// (docs/api.md, "POST /api/users/upsert"), so none deadlocks, none answers 500, and every
// call answers 200 with one result per item in the order of its request.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend } from './helpers/harness.ts';
import { httpRequest, useServerProcesses } from './helpers/processes.ts';
import { retryingLockWaits } from './helpers/lock-waits.ts';

forEachBackend('concurrent upserts of the same groups in different orders', (backend) => {
  const two = useServerProcesses(backend);

  it('upsert: 4 concurrent calls on two processes with the same 250 ids, half reversed, all answer 200 with per-item results in request order', async () => {
    for (let round = 0; round < 3; round++) {
      const ids = Array.from({ length: 250 }, (_, i) => `lock-order-${round}-${String(i).padStart(3, '0')}`);
      // Some exist before the round (updated), the rest are new (created by whichever call comes first).
      const seeded = await httpRequest(two.servers[0].baseUrl, 'POST', '/api/users/upsert', {
        token: two.token,
        body: { user_groups: ids.filter((_, i) => i % 3 === 0).map((id) => ({ user_group_id: id })) },
      });
      assert.equal(seeded.status, 200, seeded.text);
      const calls = Array.from({ length: 4 }, (_, call) => {
        const order = call % 2 === 0 ? ids : [...ids].reverse();
        const items = order.map((id) => ({ user_group_id: id, name: `call ${call}`, properties: { call } }));
        return httpRequest(two.servers[call % 2].baseUrl, 'POST', '/api/users/upsert', { token: two.token, body: { user_groups: items } }).then((res) => ({
          res,
          order,
        }));
      });
      for (const { res, order } of await Promise.all(calls)) {
        assert.equal(res.status, 200, `round ${round}: ${res.status} ${res.text.slice(0, 300)}`);
        assert.deepEqual(
          res.body.results.map((r: { user_group_id: string }) => r.user_group_id),
          order,
          'one result per item, in the order of the request',
        );
        for (const result of res.body.results) assert.ok(['created', 'updated', 'unchanged'].includes(result.status), JSON.stringify(result));
      }
      // Exactly one call created each new group.
      const results = (await Promise.all(calls)).flatMap(({ res }) => res.body.results as { user_group_id: string; status: string }[]);
      for (const [i, id] of ids.entries()) {
        const creations = results.filter((r) => r.user_group_id === id && r.status === 'created').length;
        assert.equal(creations, i % 3 === 0 ? 0 : 1, `${id} created ${creations} times`);
      }
    }
  });

  it('single writes that lock two groups (a move under a parent, a create under one) beside upserts of both in either order: none answers 500', async () => {
    const parents = Array.from({ length: 6 }, (_, i) => `two-rows-parent-${i}`);
    const children = Array.from({ length: 30 }, (_, i) => `two-rows-child-${i}`);
    const seeded = await httpRequest(two.servers[0].baseUrl, 'POST', '/api/users/upsert', {
      token: two.token,
      body: { user_groups: [...parents, ...children].map((id) => ({ user_group_id: id })) },
    });
    assert.equal(seeded.status, 200, seeded.text);
    const named = [...parents, ...children];
    const calls: Promise<{ what: string; status: number; text: string }>[] = [];
    // A single write whose lock wait outlasted the lock timeout is sent again (lock-waits.ts):
    // on a loaded machine the upserts hold their rows that long. An upsert's first answer counts.
    const call = (what: string, i: number, method: string, path: string, body: unknown) => {
      const send = () => httpRequest(two.servers[i % 2].baseUrl, method, path, { token: two.token, body });
      calls.push((what.startsWith('upsert') ? send() : retryingLockWaits(send)).then((res) => ({ what, status: res.status, text: res.text })));
    };
    for (let round = 0; round < 3; round++) {
      for (const [i, order] of [named, [...named].reverse()].entries()) {
        call(`upsert ${round}/${i}`, i, 'POST', '/api/users/upsert', {
          user_groups: order.map((id) => ({ user_group_id: id, name: `round ${round} order ${i}` })),
        });
      }
      for (const [i, child] of children.entries()) {
        const parent = parents[(i + round) % parents.length];
        if (i % 2 === 0) call(`move ${child}`, i, 'PUT', '/api/user', { user_group_id: child, parent_user_group_id: parent });
        else call(`create under ${parent}`, i, 'POST', '/api/user', { user_group_id: `two-rows-new-${round}-${i}`, parent_user_group_id: parent });
      }
    }
    const answers = await Promise.all(calls);
    const failed = answers.filter((a) => a.status >= 500 || (a.what.startsWith('upsert') && a.status !== 200));
    assert.deepEqual(
      failed.map((a) => `${a.what}: ${a.status} ${a.text.slice(0, 200)}`),
      [],
    );
    for (const a of answers) assert.ok([200, 201].includes(a.status), `${a.what}: ${a.status} ${a.text.slice(0, 200)}`);
  });
});
