// Webhooks (docs/api.md, "Webhooks"): change events POSTed to an account's endpoints as the
// Standard Webhooks specification says (verified here with the `standardwebhooks` package), in
// order, at least once with the same webhook-id, retried on a non-2xx answer, surviving
// kill -9; SSRF refused; the secret shown once and stored sealed; admin scope, own account.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { forEachBackend, useTestApp, createGroup, startTestApp, type TestApp } from './helpers/harness.ts';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { freePort, httpRequest, issueTokenWithCli, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { forbiddenAddressReason } from '../src/webhooks/webhook-address.ts';
import { GENEROUS_WAIT_MS, eventually } from './helpers/wait.ts';
import {
  useReceivers,
  createEndpoint,
  headersOf,
  Receiver,
  settledDeliveries,
  sleep,
  verified,
  WEBHOOK_CONFIG,
  type Received,
} from './helpers/webhook-receiver.ts';

const GROUP_TYPES = ['user_group.created', 'user_group.updated', 'user_group.token_rotated', 'user_group.deleted'];
const ADMIN = ['read', 'write', 'admin'] as const;

forEachBackend('webhooks', (backend) => {
  const t = useTestApp(backend, { config: WEBHOOK_CONFIG });
  const receiver = useReceivers();

  it('webhooks: four changes to a group arrive as four signed events in order', async () => {
    const { token } = await t.issueToken({ account: 'wh-four', scopes: [...ADMIN] });
    const r = await receiver();
    const endpoint = await createEndpoint(t, token, { url: r.url, types: GROUP_TYPES, description: 'four' });
    const group = await createGroup(t, { user_group_id: 'g4' }, token);
    assert.equal((await t.request('PUT', '/api/user', { token, body: { user_group_id: 'g4', name: 'Four' } })).status, 200);
    assert.equal((await t.request('POST', '/api/user', { token, body: { current_token: group.token } })).status, 200);
    assert.equal((await t.request('DELETE', '/api/user', { token, query: { user_group_id: 'g4' } })).status, 200);

    const received = await r.until((all) => all.length >= 4);
    await sleep(300);
    assert.equal(r.received.length, 4, 'each event once');
    const events = received.map((request) => verified(endpoint.secret, request));
    assert.deepEqual(
      events.map((event) => event.type),
      GROUP_TYPES,
    );
    const ids = events.map((event) => event.id);
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => a - b),
    );
    for (const [i, request] of received.entries()) {
      assert.match(String(request.headers['webhook-id']), /^evt_\d+_\d+$/);
      assert.ok(String(request.headers['webhook-id']).endsWith(`_${ids[i]}`));
      assert.equal(request.headers['content-type'], 'application/json');
      assert.equal(events[i].account, 'wh-four');
    }
    // The body is exactly the feed's event.
    const feed = await t.request('GET', '/api/events', { token, query: { types: GROUP_TYPES.join(',') } });
    assert.deepEqual(events, feed.body.events);
    assert.throws(
      () => new Webhook(`whsec_${crypto.randomBytes(32).toString('base64')}`).verify(received[0].body, headersOf(received[0])),
      'another secret fails',
    );
  });

  it('webhooks: a failing receiver (500, then 200) gets the same webhook-id again until it answers 2xx; the attempts are listed in deliveries', async () => {
    const { token } = await t.issueToken({ account: 'wh-retry', scopes: [...ADMIN] });
    const r = await receiver();
    r.answer = (_request, index) => (index < 2 ? 500 : 200);
    const endpoint = await createEndpoint(t, token, { url: r.url, types: ['user_group.created'] });
    await createGroup(t, { user_group_id: 'first' }, token);
    await createGroup(t, { user_group_id: 'second' }, token);
    const received = await r.until((all) => all.length >= 4);
    const ids = received.map((request) => String(request.headers['webhook-id']));
    assert.equal(ids[0], ids[1]);
    assert.equal(ids[1], ids[2], 'retried with the same webhook-id until 2xx');
    assert.notEqual(ids[3], ids[2], 'then the next event');
    assert.deepEqual(
      received.map((request) => (verified(endpoint.secret, request).data as { user_group_id: string }).user_group_id),
      ['first', 'first', 'first', 'second'],
      'head of line: the second waits for the first',
    );

    const [second, first] = await settledDeliveries(t, token, endpoint.id);
    assert.equal(first.status, 'delivered');
    assert.equal(first.webhook_id, ids[0]);
    assert.equal(first.event_type, 'user_group.created');
    assert.deepEqual(
      first.attempts.map((attempt) => [attempt.status_code, attempt.error]),
      [
        [500, 'HTTP 500'],
        [500, 'HTTP 500'],
        [200, null],
      ],
    );
    for (const attempt of first.attempts) assert.ok(attempt.duration_ms >= 0 && Date.parse(attempt.attempted_at) > 0);
    assert.equal(second.status, 'delivered');
    assert.equal(second.attempts.length, 1);
    const [listed] = (await t.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints;
    assert.equal(listed.failing_since, null, 'no longer failing');
    assert.equal(listed.status, 'enabled');
  });

  it('webhooks: a delivery is given up after the retry schedule, and the next one goes', async () => {
    const { token } = await t.issueToken({ account: 'wh-giveup', scopes: [...ADMIN] });
    const r = await receiver();
    r.answer = (request) => (request.body.includes('"doomed"') ? 503 : 200);
    const endpoint = await createEndpoint(t, token, { url: r.url, types: ['user_group.created'] });
    await createGroup(t, { user_group_id: 'doomed' }, token);
    await createGroup(t, { user_group_id: 'after' }, token);
    await r.until((all) => all.some((request) => request.body.includes('"after"')));
    assert.equal(r.received.filter((request) => request.body.includes('"doomed"')).length, 1 + WEBHOOK_CONFIG.webhookRetryScheduleMs.length);
    assert.deepEqual(
      (await settledDeliveries(t, token, endpoint.id)).map((delivery) => delivery.status),
      ['delivered', 'failed'],
    );
  });

  it('webhooks: the secret is shown once, never in a listing, stored sealed; after rotate_secret both secrets sign for 24 h', async () => {
    const { token } = await t.issueToken({ account: 'wh-secret', scopes: [...ADMIN] });
    const r = await receiver();
    const endpoint = await createEndpoint(t, token, { url: r.url, types: ['user_group.created'] });
    assert.match(endpoint.secret, /^whsec_[A-Za-z0-9+/]{40,}={0,2}$/);
    assert.ok(Buffer.from(endpoint.secret.slice(6), 'base64').length >= 24);
    const listing = await t.request('GET', '/api/webhook_endpoints', { token });
    assert.equal(listing.status, 200);
    assert.ok(!listing.text.includes(endpoint.secret.slice(6)) && !listing.text.includes('secret"'), 'no secret in a listing');
    assert.deepEqual(
      Object.keys(listing.body.webhook_endpoints[0]).sort(),
      Object.keys(endpoint)
        .filter((key) => key !== 'secret')
        .sort(),
    );
    const rows = await t.handle.db.selectFrom('webhook_endpoints').selectAll().execute();
    assert.ok(!JSON.stringify(rows).includes(endpoint.secret.slice(6)), 'not stored in plaintext');
    assert.equal(t.keyring.open(rows.find((row) => Number(row.id) === endpoint.id)!.secret_sealed, 'webhook-secret'), endpoint.secret, 'sealed');

    const rotated = await t.request('POST', `/api/webhook_endpoints/${endpoint.id}/rotate_secret`, { token });
    assert.equal(rotated.status, 200, rotated.text);
    const secret = rotated.body.webhook_endpoint.secret;
    assert.notEqual(secret, endpoint.secret);
    const expires = Date.parse(rotated.body.webhook_endpoint.previous_secret_expires_at!);
    assert.ok(Math.abs(expires - Date.now() - 86_400_000) < 60_000, 'the old secret signs for 24 h');
    await createGroup(t, { user_group_id: 'after-rotation' }, token);
    const [request] = await r.until((all) => all.length >= 1);
    assert.equal(String(request.headers['webhook-signature']).split(' ').length, 2, 'two signatures, space-separated');
    assert.equal(verified(secret, request).type, 'user_group.created', 'the new secret verifies');
    assert.equal(verified(endpoint.secret, request).type, 'user_group.created', 'the old one too');
  });

  it("webhooks: another account's endpoint is 404 webhook_endpoint_not_found; a read/write token without admin is 403", async () => {
    const { token: owner } = await t.issueToken({ account: 'wh-owner', scopes: [...ADMIN] });
    const { token: other } = await t.issueToken({ account: 'wh-other', scopes: [...ADMIN] });
    const { token: readWrite } = await t.issueToken({ account: 'wh-owner', scopes: ['read', 'write'] });
    const r = await receiver();
    const endpoint = await createEndpoint(t, owner, { url: r.url, types: ['user_group.deleted'] });
    for (const [method, path] of [
      ['DELETE', `/api/webhook_endpoints/${endpoint.id}`],
      ['POST', `/api/webhook_endpoints/${endpoint.id}/rotate_secret`],
      ['GET', `/api/webhook_endpoints/${endpoint.id}/deliveries`],
      ['POST', `/api/webhook_endpoints/${endpoint.id}/test`],
    ] as const) {
      const res = await t.request(method, path, { token: other });
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.error.code, 'webhook_endpoint_not_found');
      const refused = await t.request(method, path, { token: readWrite });
      assert.equal(refused.status, 403, `${method} ${path}: ${refused.text}`);
      assert.equal(refused.body.error.code, 'insufficient_scope');
    }
    assert.deepEqual((await t.request('GET', '/api/webhook_endpoints', { token: other })).body.webhook_endpoints, []);
    assert.equal((await t.request('GET', '/api/webhook_endpoints', { token: readWrite })).status, 403);
    assert.equal((await t.request('POST', '/api/webhook_endpoints', { token: readWrite, body: { url: r.url } })).status, 403);
    assert.equal(r.received.length, 0, 'nothing was sent');
    const deleted = await t.request('DELETE', `/api/webhook_endpoints/${endpoint.id}`, { token: owner });
    assert.equal(deleted.status, 200);
    assert.equal((await t.request('DELETE', `/api/webhook_endpoints/${endpoint.id}`, { token: owner })).status, 404);
  });

  it('webhooks: every change to an endpoint is an event in the feed, with its id, URL and environment, never its secret; a token restricted to another environment does not see it', async () => {
    const { token } = await t.issueToken({ account: 'wh-history', scopes: [...ADMIN] });
    const { token: testingReader } = await t.issueToken({ account: 'wh-history', scopes: ['read'], env: 'Testing' });
    const r = await receiver();
    const endpoint = await createEndpoint(t, token, { url: r.url, types: ['user_group.deleted'] });
    const rotated = await t.request('POST', `/api/webhook_endpoints/${endpoint.id}/rotate_secret`, { token });
    assert.equal(rotated.status, 200, rotated.text);
    assert.equal((await t.request('POST', `/api/webhook_endpoints/${endpoint.id}/enable`, { token })).status, 200); // enabled already: no change, no event
    assert.equal((await t.request('DELETE', `/api/webhook_endpoints/${endpoint.id}`, { token })).status, 200);

    const types = 'webhook_endpoint.created,webhook_endpoint.secret_rotated,webhook_endpoint.enabled,webhook_endpoint.deleted';
    let events: { type: string; data: Record<string, unknown> }[] = [];
    for (const deadline = Date.now() + GENEROUS_WAIT_MS; events.length < 3 && Date.now() < deadline; await sleep(20))
      events = (await t.request('GET', '/api/events', { token, query: { types } })).body.events;
    const origin = new URL(r.url).origin; // never the path or query (test/webhook-urls.test.ts)
    const data = { webhook_endpoint_id: endpoint.id, url: origin, environment: null };
    assert.deepEqual(
      events.map((event) => [event.type, event.data]),
      [
        ['webhook_endpoint.created', { ...data, changes: { url: { old: null, new: origin } } }],
        ['webhook_endpoint.secret_rotated', data],
        ['webhook_endpoint.deleted', { ...data, changes: { url: { old: origin, new: null } } }],
      ],
    );
    const feed = JSON.stringify(events);
    for (const secret of [endpoint.secret, rotated.body.webhook_endpoint.secret]) assert.ok(!feed.includes(secret), 'never a secret');
    const restricted = await t.request('GET', '/api/events', { token: testingReader, query: { types } });
    assert.deepEqual(restricted.body.events, [], "an unrestricted endpoint's events are not a Testing token's");
  });

  it("webhooks: an endpoint created by an admin restricted to Testing receives only Testing's events, and only such admins see it", async () => {
    const { token: testingAdmin } = await t.issueToken({ account: 'wh-env', scopes: [...ADMIN], env: 'Testing' });
    const { token: admin } = await t.issueToken({ account: 'wh-env', scopes: [...ADMIN] });
    const { token: customerAdmin } = await t.issueToken({ account: 'wh-env', scopes: [...ADMIN], env: 'Customer' });
    const r = await receiver();
    const endpoint = await createEndpoint(t, testingAdmin, { url: r.url, types: ['user_group.created'] });
    assert.equal(endpoint.environment, 'Testing');
    await createGroup(t, { user_group_id: 'c', api_environment_tag: 'Customer' }, admin);
    await createGroup(t, { user_group_id: 'tt', api_environment_tag: 'Testing' }, admin);
    await r.until((all) => all.length >= 1);
    await sleep(300);
    assert.deepEqual(
      r.received.map((request) => (verified(endpoint.secret, request).data as { user_group_id: string }).user_group_id),
      ['tt'],
    );
    assert.equal((await t.request('GET', '/api/webhook_endpoints', { token: admin })).body.webhook_endpoints.length, 1);
    assert.deepEqual((await t.request('GET', '/api/webhook_endpoints', { token: customerAdmin })).body.webhook_endpoints, []);
    assert.equal((await t.request('GET', `/api/webhook_endpoints/${endpoint.id}/deliveries`, { token: customerAdmin })).status, 404);
  });

  it('webhooks: a test event is sent once, signed, and answered with its outcome; it is not in the feed', async () => {
    const { token } = await t.issueToken({ account: 'wh-test', scopes: [...ADMIN] });
    const r = await receiver();
    const endpoint = await createEndpoint(t, token, { url: r.url, types: ['user_group.deleted'] });
    const res = await t.request('POST', `/api/webhook_endpoints/${endpoint.id}/test`, { token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.delivered, true);
    assert.equal(res.body.attempt.status_code, 200);
    assert.equal(res.body.attempt.error, null);
    assert.equal(r.received.length, 1);
    const event = verified(endpoint.secret, r.received[0]);
    assert.equal(event.type, 'webhook_endpoint.test');
    assert.equal(event.account, 'wh-test');
    r.answer = () => 302;
    const redirected = await t.request('POST', `/api/webhook_endpoints/${endpoint.id}/test`, { token });
    assert.equal(redirected.body.delivered, false);
    assert.equal(redirected.body.attempt.error, 'HTTP 302 (redirects are not followed)');
    const feed = await t.request('GET', '/api/events', { token });
    assert.ok(!feed.body.events.some((e) => (e.type as string) === 'webhook_endpoint.test'));
    const deliveries = await t.request('GET', `/api/webhook_endpoints/${endpoint.id}/deliveries`, { token });
    assert.deepEqual(deliveries.body.deliveries, []);
  });

  it('webhooks: unknown event types, and URLs that are not http(s), are 400', async () => {
    const { token } = await t.issueToken({ account: 'wh-bad', scopes: [...ADMIN] });
    for (const body of [{ url: 'ftp://example.com/x' }, { url: 'not a url' }, { url: 'http://127.0.0.1/x', types: ['user_group.nope'] }]) {
      const res = await t.request('POST', '/api/webhook_endpoints', { token, body });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.body.error.code, 'validation_failed');
    }
  });
});

forEachBackend('webhooks: SSRF', (backend) => {
  const t = useTestApp(backend); // UGS_WEBHOOK_ALLOW_PRIVATE not set

  it('webhooks: a private URL is refused (400 webhook_url_forbidden) when UGS_WEBHOOK_ALLOW_PRIVATE is not set', async () => {
    const { token } = await t.issueToken({ account: 'wh-ssrf', scopes: [...ADMIN] });
    for (const url of [
      'http://127.0.0.1:8080/hook',
      'http://localhost/hook',
      'https://10.1.2.3/hook',
      'http://172.20.0.1/',
      'http://192.168.1.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://100.64.0.1/',
      'http://0.0.0.0/',
      'http://[::1]/',
      'http://[fd00::1]/',
      'http://[fe80::1]/',
      'http://[::ffff:10.0.0.1]/',
      'http://[::ffff:127.0.0.1]/',
    ]) {
      const res = await t.request('POST', '/api/webhook_endpoints', { token, body: { url } });
      assert.equal(res.status, 400, `${url}: ${res.text}`);
      assert.equal(res.body.error.code, 'webhook_url_forbidden', url);
    }
    assert.deepEqual((await t.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints, []);
  });

  // Forms that embed an IPv4 address, or route to one behind a gateway, and ranges no receiver has.
  for (const [form, url] of [
    ['an IPv4-compatible address (::a.b.c.d)', 'http://[::127.0.0.1]/'],
    ['an IPv4-compatible address in hex (::7f00:1)', 'http://[::7f00:1]/'],
    ['a SIIT IPv4-translated address (::ffff:0:a.b.c.d)', 'http://[::ffff:0:127.0.0.1]/'],
    ['a NAT64 local-use address (64:ff9b:1::/48)', 'http://[64:ff9b:1::7f00:1]/'],
    ['a NAT64 well-known address embedding a private IPv4 (64:ff9b::10.0.0.1)', 'http://[64:ff9b::10.0.0.1]/'],
    ['a 6to4 address (2002::/16)', 'http://[2002:7f00:1::1]/'],
    ['a site-local address (fec0::/10)', 'http://[fec0::1]/'],
    ['a Teredo address (2001::/32)', 'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/'],
    ['an IPv4 documentation address (192.0.2.0/24)', 'http://192.0.2.10/'],
    ['an IPv4 documentation address (198.51.100.0/24)', 'http://198.51.100.7/'],
    ['an IPv4 documentation address (203.0.113.0/24)', 'https://203.0.113.5/hook'],
    ['an IPv6 documentation address (2001:db8::/32)', 'http://[2001:db8::1]/'],
    ['an IPv6 documentation address (3fff::/20)', 'http://[3fff::1]/'],
  ] as const) {
    it(`webhooks SSRF: ${form} is refused with 400 webhook_url_forbidden, and no endpoint is made`, async () => {
      const { token } = await t.issueToken({ account: 'wh-ssrf-forms', scopes: [...ADMIN] });
      const res = await t.request('POST', '/api/webhook_endpoints', { token, body: { url } });
      assert.equal(res.status, 400, `${url}: ${res.text}`);
      assert.equal(res.body.error.code, 'webhook_url_forbidden', url);
      assert.deepEqual(res.body.error.details, [{ field: 'url', issue: 'forbidden_address' }]);
      assert.deepEqual((await t.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints, []);
    });
  }

  it('webhooks: a URL that became private is refused at delivery time too', async () => {
    const { token } = await t.issueToken({ account: 'wh-rebind', scopes: [...ADMIN] });
    const r = await new Receiver().start();
    try {
      // As if DNS had changed after the check: the row points at a private address now.
      const account = await t.handle.db.selectFrom('accounts').select('id').where('slug', '=', 'wh-rebind').executeTakeFirstOrThrow();
      const [row] = await t.handle.db
        .insertInto('webhook_endpoints')
        .values({
          account_id: account.id,
          url: r.url,
          types: null,
          description: null,
          environment: null,
          secret_sealed: t.keyring.seal('whsec_AAAA', 'webhook-secret'),
          created_at: new Date().toISOString(),
        })
        .returning('id')
        .execute();
      const res = await t.request('POST', `/api/webhook_endpoints/${row.id}/test`, { token });
      assert.equal(res.body.delivered, false);
      assert.match(res.body.attempt.error!, /127\.0\.0\.1.*public addresses only/);
      assert.equal(r.received.length, 0);
    } finally {
      await r.stop();
    }
  });

  it('webhooks: loopback, private, link-local, CGNAT, unspecified and IPv4-mapped addresses are forbidden; public ones are not', () => {
    for (const address of [
      '127.0.0.1',
      '10.0.0.1',
      '172.31.255.255',
      '192.168.0.1',
      '169.254.169.254',
      '100.127.0.1',
      '0.0.0.0',
      '::',
      '::1',
      'fc00::1',
      'fe80::1',
      '::ffff:192.168.0.1',
      '::ffff:7f00:1',
      '64:ff9b::a00:1',
    ])
      assert.ok(forbiddenAddressReason(address), address);
    for (const address of ['93.184.216.34', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808'])
      assert.equal(forbiddenAddressReason(address), null, address);
  });
});

forEachBackend('webhooks: disabling', (backend) => {
  let app: TestApp;
  let offset = 0;
  before(async () => {
    app = await startTestApp(backend, { config: { ...WEBHOOK_CONFIG, webhookRetryScheduleMs: Array(20).fill(300) }, now: () => new Date(Date.now() + offset) });
  });
  after(() => app?.close());

  it('webhooks: an endpoint failing for 3 days is disabled and marked, and receives nothing more', async () => {
    const { token } = await app.issueToken({ account: 'wh-disable', scopes: [...ADMIN] });
    const r = await new Receiver().start();
    try {
      r.answer = () => 500;
      await createEndpoint(app, token, { url: r.url, types: ['user_group.created'] });
      await createGroup({ ...app, token }, { user_group_id: 'one' }, token);
      await r.until((all) => all.length >= 1);
      let [listed] = (await app.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints;
      for (let waited = 0; listed.failing_since === null && waited < GENEROUS_WAIT_MS; waited += 20) {
        await sleep(20); // the attempt is recorded just after the receiver answered
        [listed] = (await app.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints;
      }
      assert.ok(listed.failing_since, 'failing since the first failure');
      assert.equal(listed.status, 'enabled');
      offset = 3 * 86_400_000 + 60_000; // three days later, still failing
      const deadline = Date.now() + GENEROUS_WAIT_MS;
      while (listed.status !== 'disabled' && Date.now() < deadline) {
        await sleep(50);
        [listed] = (await app.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints;
      }
      assert.equal(listed.status, 'disabled');
      assert.ok(listed.disabled_at && Date.parse(listed.disabled_at) - Date.parse(listed.failing_since!) >= 3 * 86_400_000);
      const count = r.received.length;
      r.answer = () => 200;
      await createGroup({ ...app, token }, { user_group_id: 'two' }, token);
      await sleep(1500);
      assert.equal(r.received.length, count, 'a disabled endpoint receives nothing');
    } finally {
      await r.stop();
    }
  });

  it('webhooks: a disabled endpoint, once enabled, gets its pending delivery again at once and the events from then on; its failing clock starts again', async () => {
    offset = 0;
    const { token } = await app.issueToken({ account: 'wh-enable', scopes: [...ADMIN] });
    const r = await new Receiver().start();
    try {
      r.answer = () => 500;
      const endpoint = await createEndpoint(app, token, { url: r.url, types: ['user_group.created'] });
      await createGroup({ ...app, token }, { user_group_id: 'before' }, token);
      await r.until((all) => all.length >= 1);
      offset += 3 * 86_400_000 + 60_000;
      let status = endpoint.status;
      for (const deadline = Date.now() + GENEROUS_WAIT_MS; status !== 'disabled' && Date.now() < deadline; ) {
        await sleep(50);
        status = (await app.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints[0].status;
      }
      assert.equal(status, 'disabled');
      await createGroup({ ...app, token }, { user_group_id: 'while-disabled' }, token);
      // In the feed, so its deliveries were made (for no endpoint) before the endpoint is enabled.
      for (const deadline = Date.now() + GENEROUS_WAIT_MS; Date.now() < deadline; await sleep(20)) {
        const feed = await app.request('GET', '/api/events', { token, query: { types: 'user_group.created' } });
        if (feed.body.events.some((event) => event.data.user_group_id === 'while-disabled')) break;
      }

      r.answer = () => 200;
      const enabled = await app.request('POST', `/api/webhook_endpoints/${endpoint.id}/enable`, { token });
      assert.equal(enabled.status, 200, enabled.text);
      assert.equal(enabled.body.webhook_endpoint.status, 'enabled');
      assert.equal(enabled.body.webhook_endpoint.disabled_at, null);
      assert.equal(enabled.body.webhook_endpoint.failing_since, null);
      // The feed numbers an event a moment after its change commits (docs/api.md, "Change events").
      let feed = await app.request('GET', '/api/events', { token, query: { types: 'webhook_endpoint.disabled,webhook_endpoint.enabled' } });
      for (const deadline = Date.now() + GENEROUS_WAIT_MS; feed.body.events.length < 2 && Date.now() < deadline; await sleep(20))
        feed = await app.request('GET', '/api/events', { token, query: { types: 'webhook_endpoint.disabled,webhook_endpoint.enabled' } });
      assert.deepEqual(
        feed.body.events.map((event) => event.type),
        ['webhook_endpoint.disabled', 'webhook_endpoint.enabled'],
        'the service disabling it and the admin enabling it are both in the feed',
      );
      await createGroup({ ...app, token }, { user_group_id: 'after' }, token);
      const delivered = await r.until((all) => all.some((request) => request.body.includes('"after"')));
      const created = delivered.map((request) => JSON.parse(request.body).data.user_group_id);
      assert.deepEqual([...new Set(created)], ['before', 'after'], 'the pending delivery first, then the new event; nothing made while it was disabled');

      const again = await app.request('POST', `/api/webhook_endpoints/${endpoint.id}/enable`, { token });
      assert.equal(again.status, 200, 'an enabled endpoint is answered as it is');
      assert.equal(again.body.webhook_endpoint.status, 'enabled');
      const missing = await app.request('POST', '/api/webhook_endpoints/999999/enable', { token });
      assert.equal(missing.status, 404);
      assert.equal(missing.body.error.code, 'webhook_endpoint_not_found');
    } finally {
      await r.stop();
    }
  });
});

forEachBackend('webhooks: durability', (backend) => {
  let database: TestDatabase;
  let env: Record<string, string>;
  const running: ServerProcess[] = [];
  before(async () => {
    database = await createTestDatabase(backend);
    env = {
      DATABASE_URL: database.url,
      UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'),
      UGS_WEBHOOK_ALLOW_PRIVATE: 'true',
      UGS_WEBHOOK_RETRY_SCHEDULE: Array(20).fill('1s').join(','),
    };
  });
  after(async () => {
    for (const server of running) await server.stop('SIGKILL');
    await database?.drop();
  });

  it('webhooks: SIGTERM does not wait for a receiver that never answers; the delivery goes again after the restart, with the same webhook-id', async () => {
    const { token } = await issueTokenWithCli({ DATABASE_URL: database.url }, ['--account', 'hanging', '--scopes', 'read,write,admin']);
    // A receiver that holds its first request without answering, then answers the next ones.
    const held: http.ServerResponse[] = [];
    const received: Received[] = [];
    const receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        if (received.length === 1) held.push(res);
        else res.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    try {
      let server = await spawnServer(env);
      running.push(server);
      const created = await httpRequest(server.baseUrl, 'POST', '/api/webhook_endpoints', { token, body: { url, types: ['user_group.created'] } });
      assert.equal(created.status, 201, created.text);
      assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'held' } })).status, 201);
      const deadline = Date.now() + GENEROUS_WAIT_MS;
      while (received.length === 0 && Date.now() < deadline) await sleep(20);
      assert.equal(received.length, 1, 'the first attempt is in flight');

      // The default shutdown timeout is 10 s, shorter than the 15 s an attempt may wait: it must not wait.
      const stopped = await server.stop('SIGTERM');
      assert.deepEqual(stopped, { code: 0, signal: null }, 'a clean exit, not the "shutdown took too long" exit 1');

      server = await spawnServer(env);
      running.push(server);
      const again = Date.now() + 30_000;
      while (received.length < 2 && Date.now() < again) await sleep(20);
      assert.ok(received.length >= 2, 'delivered again after the restart');
      assert.equal(received[1].headers['webhook-id'], received[0].headers['webhook-id']);
    } finally {
      for (const res of held) res.destroy();
      receiver.closeAllConnections();
      await new Promise((resolve) => receiver.close(resolve));
    }
  });

  it('webhooks: events of acknowledged changes arrive after a kill -9 taken while the receiver was down', async () => {
    const { token } = await issueTokenWithCli({ DATABASE_URL: database.url }, ['--account', 'durable', '--scopes', 'read,write,admin']);
    const port = await freePort();
    let r = await new Receiver().start(port);
    let server = await spawnServer(env);
    running.push(server);
    const created = await httpRequest(server.baseUrl, 'POST', '/api/webhook_endpoints', { token, body: { url: r.url, types: ['user_group.created'] } });
    assert.equal(created.status, 201, created.text);
    const secret: string = created.body.webhook_endpoint.secret;
    await r.stop();

    const ids = Array.from({ length: 5 }, (_, i) => `durable-${i}`);
    for (const id of ids) {
      const res = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id } });
      assert.equal(res.status, 201, res.text);
    }
    // The attempts fail: nobody listens. The endpoint's first delivery has been tried (the others
    // wait behind it) before the kill.
    const endpointId: number = created.body.webhook_endpoint.id;
    await eventually('a failed attempt', async () => {
      const { deliveries } = (await httpRequest(server.baseUrl, 'GET', `/api/webhook_endpoints/${endpointId}/deliveries`, { token })).body;
      return deliveries.some((delivery: { attempts: unknown[] }) => delivery.attempts.length > 0);
    });
    assert.deepEqual(await server.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });

    r = await new Receiver().start(port);
    try {
      server = await spawnServer(env);
      running.push(server);
      await r.until((all) => ids.every((id) => all.some((request) => request.body.includes(`"${id}"`))), 60_000);
      const events = r.received.map((request) => verified(secret, request));
      const firsts = [...new Map(events.map((event) => [event.id, event])).values()];
      assert.deepEqual(
        firsts.map((event) => event.data.user_group_id),
        ids,
        'in order',
      );
    } finally {
      await r.stop();
    }
  });
});
