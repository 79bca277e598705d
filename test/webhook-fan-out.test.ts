// Webhook deliveries are made from the feed, per endpoint, a batch at a time (docs/api.md,
// "Webhooks"; src/webhooks/webhook-fan-out.ts), never one row per event and endpoint in the
// transaction that numbers every account's events: a burst into many endpoints stores one
// batch per endpoint, and the endpoint still gets every event it takes, in order, once; the
// events made while it was disabled are skipped, the ones before are not.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { forEachBackend, useTestApp, startTestApp, type SuiteApp, type TestApp } from './helpers/harness.ts';
import { useReceivers, createEndpoint, Receiver, sleep, WEBHOOK_CONFIG } from './helpers/webhook-receiver.ts';
import { Scrape } from './helpers/prometheus.ts';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { httpRequest, issueTokenWithCli, spawnServers, type ServerProcess } from './helpers/processes.ts';

const ADMIN = ['read', 'write', 'admin'] as const;

async function upsert(t: Pick<SuiteApp, 'request'>, token: string, ids: string[]): Promise<void> {
  const res = await t.request('POST', '/api/users/upsert', { token, body: { user_groups: ids.map((user_group_id) => ({ user_group_id })) } });
  assert.equal(res.status, 200, res.text);
}

/** Waits until the account's feed holds `count` events of `type`. */
async function untilInFeed(t: Pick<SuiteApp, 'request'>, token: string, type: string, count: number): Promise<void> {
  let seen = 0;
  let after: string | undefined;
  for (const deadline = Date.now() + 30_000; seen < count; ) {
    const page = await t.request('GET', '/api/events', { token, query: { types: type, limit: '500', ...(after ? { after } : {}) } });
    assert.equal(page.status, 200, page.text);
    seen += page.body.events.length;
    after = page.body.next_cursor;
    if (seen < count) {
      assert.ok(Date.now() < deadline, `${seen} of ${count} ${type} events in the feed`);
      if (page.body.events.length === 0) await sleep(20);
    }
  }
}

const createdIds = (r: Receiver) => r.received.map((request) => JSON.parse(request.body)).filter((event) => event.type === 'user_group.created');

forEachBackend('webhook fan-out', (backend) => {
  // A failed attempt waits a minute: the first batch stays where it is while the test looks.
  const t = useTestApp(backend, { config: { ...WEBHOOK_CONFIG, webhookRetryScheduleMs: [60_000] } });
  const receiver = useReceivers();

  it('webhooks fan-out: a 1,000-item upsert into an account with 16 failing endpoints stores one batch of deliveries per endpoint, not one row per event and endpoint', async () => {
    const { token } = await t.issueToken({ account: 'wh-burst', scopes: [...ADMIN] });
    const r = await receiver();
    r.answer = () => 503;
    const endpoints = [];
    for (let i = 0; i < 16; i++) endpoints.push(await createEndpoint(t, token, { url: `${r.url}?endpoint=${i}`, types: ['user_group.created'] }));
    await upsert(
      t,
      token,
      Array.from({ length: 1000 }, (_, i) => `burst-${i}`),
    );
    await untilInFeed(t, token, 'user_group.created', 1000);
    // Each endpoint's first attempt failed: its head waits a minute, and the rest wait behind it.
    await r.until((all) => all.length >= 16, 30_000);
    for (const endpoint of endpoints) {
      const listing = await t.request('GET', `/api/webhook_endpoints/${endpoint.id}/deliveries`, { token, query: { limit: '200' } });
      assert.equal(listing.status, 200, listing.text);
      assert.ok(listing.body.deliveries.length <= 100, `endpoint ${endpoint.id} has ${listing.body.deliveries.length} deliveries stored while its head waits`);
      assert.ok(listing.body.deliveries.length >= 1);
    }
    const rows = await t.handle.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<number | string>().as('rows'))
      .executeTakeFirstOrThrow();
    assert.ok(Number(rows.rows) <= 16 * 100, `${rows.rows} delivery rows for 16 endpoints`);
  });

  it('webhooks fan-out: an endpoint 250 events behind receives every one, in the order of the feed, once', async () => {
    const { token } = await t.issueToken({ account: 'wh-behind', scopes: [...ADMIN] });
    const r = await receiver();
    await createEndpoint(t, token, { url: r.url, types: ['user_group.created'] });
    const ids = Array.from({ length: 250 }, (_, i) => `behind-${i}`);
    await upsert(t, token, ids);
    await r.until((all) => all.length >= 250, 30_000);
    await sleep(300);
    const events = createdIds(r);
    assert.deepEqual(
      events.map((event) => event.data.user_group_id),
      ids,
      'every event, in order, once',
    );
    assert.deepEqual(
      events.map((event) => event.id),
      [...events.map((event) => event.id)].sort((a, b) => a - b),
    );
  });
});

forEachBackend('webhook fan-out: filters', (backend) => {
  const t = useTestApp(backend, { config: WEBHOOK_CONFIG });
  const receiver = useReceivers();

  it('webhooks fan-out: an endpoint that takes one type gets only its events, past 2,000 it does not take, while its first one is retried', async () => {
    const { token } = await t.issueToken({ account: 'wh-walk', scopes: [...ADMIN] });
    const r = await receiver();
    let failed = false;
    r.answer = () => (failed ? 200 : ((failed = true), 500));
    await upsert(t, token, ['walk-a', 'walk-b']);
    await createEndpoint(t, token, { url: r.url, types: ['user_group.deleted'] });
    assert.equal((await t.request('DELETE', '/api/user', { token, query: { user_group_id: 'walk-a' } })).status, 200);
    await r.until((all) => all.length >= 1);
    for (let n = 0; n < 2; n++)
      await upsert(
        t,
        token,
        Array.from({ length: 1000 }, (_, i) => `walk-${n}-${i}`),
      );
    assert.equal((await t.request('DELETE', '/api/user', { token, query: { user_group_id: 'walk-b' } })).status, 200);
    const received = await r.until((all) => all.some((request) => request.body.includes('"walk-b"')), 90_000);
    assert.deepEqual(
      received.map((request) => JSON.parse(request.body).data.user_group_id),
      ['walk-a', 'walk-a', 'walk-b'],
      'the first retried, then the second: nothing it does not take',
    );
  });
});

forEachBackend('webhook fan-out: disabled spans', (backend) => {
  let app: TestApp;
  let offset = 0;
  before(async () => {
    app = await startTestApp(backend, { config: { ...WEBHOOK_CONFIG, webhookRetryScheduleMs: Array(20).fill(300) }, now: () => new Date(Date.now() + offset) });
  });
  after(() => app?.close());

  it('webhooks fan-out: enabled again, an endpoint gets the 150 events made before it was disabled, in order, and none made while it was', async () => {
    const { token } = await app.issueToken({ account: 'wh-span', scopes: [...ADMIN] });
    const r = await new Receiver().start();
    try {
      r.answer = () => 500;
      const endpoint = await createEndpoint(app, token, { url: r.url, types: ['user_group.created'] });
      const before = Array.from({ length: 150 }, (_, i) => `span-before-${i}`);
      await upsert(app, token, before);
      await r.until((all) => all.length >= 1);
      offset = 3 * 86_400_000 + 60_000;
      let status = 'enabled';
      for (const deadline = Date.now() + 10_000; status !== 'disabled' && Date.now() < deadline; await sleep(50))
        status = (await app.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints[0].status;
      assert.equal(status, 'disabled');
      await upsert(
        app,
        token,
        Array.from({ length: 30 }, (_, i) => `span-while-${i}`),
      );
      await untilInFeed(app, token, 'user_group.created', 180);

      r.answer = () => 200;
      assert.equal((await app.request('POST', `/api/webhook_endpoints/${endpoint.id}/enable`, { token })).status, 200);
      await upsert(app, token, ['span-after']);
      const received = await r.until((all) => all.some((request) => request.body.includes('"span-after"')), 60_000);
      const firsts = [...new Map(received.map((request) => [request.headers['webhook-id'], JSON.parse(request.body).data.user_group_id])).values()];
      assert.deepEqual(firsts, [...before, 'span-after'], 'before it was disabled, in order; nothing made while it was');
    } finally {
      await r.stop();
    }
  });
});

forEachBackend('webhook fan-out: the backlog gauge', (backend) => {
  let app: TestApp;
  let offset = 0;
  before(async () => {
    app = await startTestApp(backend, { config: WEBHOOK_CONFIG, now: () => new Date(Date.now() + offset) });
  });
  after(() => app?.close());

  const gauge = async () => {
    const scrape = new Scrape((await app.app.inject({ method: 'GET', url: '/metrics' })).body);
    return scrape.value('ugs_webhook_oldest_pending_delivery_age_seconds');
  };

  it('webhooks metrics: the oldest pending age counts from the event, also for events whose deliveries are not made yet (the instance holding the endpoint is stuck)', async () => {
    const { token } = await app.issueToken({ account: 'wh-gauge', scopes: [...ADMIN] });
    const endpoint = await createEndpoint(app, token, { url: 'http://127.0.0.1:9/hook', types: ['user_group.created'] });
    // Another instance holds the endpoint and does nothing with it: no delivery is made here.
    await app.handle.db
      .updateTable('webhook_endpoints')
      .set({ lease_owner: 'stuck-instance', lease_until: new Date(Date.now() + 3_600_000).toISOString() })
      .where('id', '=', endpoint.id)
      .execute();
    assert.equal(await gauge(), 0, 'nothing waits yet');
    await upsert(app, token, ['gauge-1', 'gauge-2']);
    await untilInFeed(app, token, 'user_group.created', 2);
    offset = 600_000; // ten minutes later
    const age = await gauge();
    assert.ok(age >= 590 && age < 700, `the gauge says ${age} s`);
    const listing = await app.request('GET', `/api/webhook_endpoints/${endpoint.id}/deliveries`, { token });
    assert.deepEqual(listing.body.deliveries, [], 'its deliveries are not made yet');
    assert.equal((await app.request('DELETE', `/api/webhook_endpoints/${endpoint.id}`, { token })).status, 200);
    assert.equal(await gauge(), 0, 'nothing waits once the endpoint is gone');
  });
});

forEachBackend('webhook fan-out: two instances', (backend) => {
  let database: TestDatabase;
  let servers: ServerProcess[] = [];
  before(async () => {
    database = await createTestDatabase(backend);
  });
  after(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    await database?.drop();
  });

  it("webhooks fan-out: two instances writing at once deliver an endpoint's 200 events in the order of the feed, none lost", async () => {
    const env = {
      DATABASE_URL: database.url,
      UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'),
      UGS_WEBHOOK_ALLOW_PRIVATE: 'true',
      UGS_WEBHOOK_RETRY_SCHEDULE: '1s',
    };
    const { token } = await issueTokenWithCli({ DATABASE_URL: database.url }, ['--account', 'two', '--scopes', 'read,write,admin']);
    servers = await spawnServers(2, env);
    const r = new Receiver();
    await r.start();
    try {
      const created = await httpRequest(servers[0].baseUrl, 'POST', '/api/webhook_endpoints', { token, body: { url: r.url, types: ['user_group.created'] } });
      assert.equal(created.status, 201, created.text);
      const ids = Array.from({ length: 200 }, (_, i) => `two-${i}`);
      // Both instances write, 10 at a time each, while both deliver.
      for (let start = 0; start < ids.length; start += 20) {
        const answers = await Promise.all(
          ids.slice(start, start + 20).map((id, i) => httpRequest(servers[i % 2].baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id } })),
        );
        for (const answer of answers) assert.equal(answer.status, 201, answer.text);
      }
      await r
        .until((all) => new Set(all.map((request) => request.headers['webhook-id'])).size >= 200, 60_000)
        .catch((err: Error) => {
          // What the instances logged beyond their requests tells a stall from slowness.
          const said = servers.flatMap((server) =>
            server
              .output()
              .split('\n')
              .filter((line) => /"level":[456]0/.test(line)),
          );
          throw new Error(`${err.message.split('\n')[0]}; the instances' warnings and errors:\n${said.join('\n')}`);
        });
      const firsts = [...new Map(r.received.map((request) => [request.headers['webhook-id'], JSON.parse(request.body)])).values()];
      assert.equal(firsts.length, 200, 'every event');
      assert.deepEqual(
        firsts.map((event) => event.id),
        [...firsts.map((event) => event.id)].sort((a, b) => a - b),
        'in the order of the feed',
      );
      assert.deepEqual(new Set(firsts.map((event) => event.data.user_group_id)), new Set(ids));
    } finally {
      await r.stop();
    }
  });
});
