// Many concurrent bulk upserts of one account's groups, in opposite orders, on two server
// processes sharing one database (docs/api.md, "POST /api/users/upsert", "Heavy operations"):
// they take turns in the account's heavy-operation slots (never more held than the limit, on
// both processes together) and each part's locks, waiting for them without holding a database
// connection, so every call answers 200.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend } from './helpers/harness.ts';
import { httpRequest, useServerProcesses } from './helpers/processes.ts';
import { retryingLockWaits } from './helpers/lock-waits.ts';
import { openDatabase, type DatabaseHandle } from '../src/db/database.ts';

const CALLS = 48;
const ITEMS = 200;

forEachBackend('many concurrent upserts of the same groups on two processes', (backend) => {
  const two = useServerProcesses(backend, { env: { UGS_RATE_LIMIT_MAX: '0' } });
  let observer: DatabaseHandle;

  before(async () => {
    observer = openDatabase(two.database.url);
  });

  after(async () => {
    await observer?.close();
  });

  it(`upsert: ${CALLS} concurrent ${ITEMS}-item calls on two processes, half in reverse order, all answer 200 and every group ends as one of them left it`, async () => {
    const ids = Array.from({ length: ITEMS }, (_, i) => `contention-${String(i).padStart(3, '0')}`);
    const seeded = await httpRequest(two.servers[0].baseUrl, 'POST', '/api/users/upsert', {
      token: two.token,
      body: { user_groups: ids.map((id) => ({ user_group_id: id })) },
    });
    assert.equal(seeded.status, 200, seeded.text);
    // Meanwhile, how many of the account's heavy-operation slots are held at once, on both processes together.
    let running = true;
    let mostHeld = 0;
    const watching = (async () => {
      while (running) {
        const held = await observer.db
          .selectFrom('heavy_operations')
          .select((eb) => eb.fn.countAll<number | string>().as('held'))
          .where('lease_until', '>', new Date().toISOString())
          .executeTakeFirstOrThrow();
        mostHeld = Math.max(mostHeld, Number(held.held));
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    const answers = await Promise.all(
      Array.from({ length: CALLS }, (_, call) => {
        const order = call % 2 === 0 ? ids : [...ids].reverse();
        const items = order.map((id) => ({ user_group_id: id, name: `call ${call}`, properties: { call } }));
        // A call that waited for a place past its bound is sent again (lock-waits.ts): on a loaded machine 46 calls queue behind 2 places.
        return retryingLockWaits(() =>
          httpRequest(two.servers[call % 2].baseUrl, 'POST', '/api/users/upsert', { token: two.token, body: { user_groups: items } }),
        ).then((res) => ({
          res,
          order,
        }));
      }),
    );
    running = false;
    await watching;
    assert.ok(mostHeld >= 1 && mostHeld <= 2, `the account held ${mostHeld} slots at once; it may hold 2 (UGS_HEAVY_OPERATIONS_PER_ACCOUNT)`);
    assert.deepEqual(
      answers.filter(({ res }) => res.status !== 200).map(({ res }) => `${res.status} ${res.text.slice(0, 200)}`),
      [],
      'every call answers 200',
    );
    for (const { res, order } of answers) {
      assert.deepEqual(
        res.body.results.map((r: { user_group_id: string }) => r.user_group_id),
        order,
        'one result per item, in the order of the request',
      );
      for (const result of res.body.results) assert.equal(result.status, 'updated', JSON.stringify(result));
    }
    // Each group's name and properties come from one and the same call: no call's write was torn.
    for (const id of ids.slice(0, 10)) {
      const group = await httpRequest(two.servers[1].baseUrl, 'GET', `/api/user/lookup?user_group_id=${id}`, { token: two.token });
      assert.equal(group.status, 200, group.text);
      assert.equal(group.body.user_group.name, `call ${group.body.user_group.properties?.call}`);
    }
  });
});
