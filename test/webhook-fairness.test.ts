// One account's hanging webhook receivers cannot hold another account's deliveries
// (docs/security.md, "Webhooks"; src/webhooks/webhook-traffic.ts): an instance works on at
// most UGS_WEBHOOK_ACCOUNT_CONCURRENCY of one account's endpoints at once, picks due endpoints
// a few per account, and every endpoint has connections of its own, so another account's
// deliveries to the very same host keep their usual latency. Test events count like deliveries.
import { it, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { forEachBackend, useTestApp, type SuiteApp } from './helpers/harness.ts';
import { createEndpoint, sleep, WEBHOOK_CONFIG } from './helpers/webhook-receiver.ts';

const ADMIN = ['read', 'write', 'admin'] as const;
/** Changes of the measured account, in each phase: one at a time, each waited for. */
const SAMPLES = 15;

/**
 * One receiver on one host and port: requests to /hang are read and never answered (the
 * connection stays open until the end); /ok answers 200 at once and notes when each event came.
 */
class HangingAndHealthy {
  readonly hanging: http.ServerResponse[] = [];
  readonly arrived = new Map<string, number>();
  private readonly server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      if (req.url?.startsWith('/hang')) {
        this.hanging.push(res);
        return;
      }
      const event = JSON.parse(body);
      if (typeof event.data?.user_group_id === 'string') this.arrived.set(event.data.user_group_id, Date.now());
      res.end('ok');
    });
  });

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  url(path: string): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${path}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

async function until(what: string, done: () => boolean, ms = 30_000): Promise<void> {
  for (const deadline = Date.now() + ms; !done(); await sleep(5)) assert.ok(Date.now() < deadline, `waited ${ms} ms for ${what}`);
}

/** The slowest of `SAMPLES` changes, each from its 201 to its delivery to the healthy receiver; each waited for `boundMs` at most. */
async function slowestDelivery(t: Pick<SuiteApp, 'request'>, token: string, receiver: HangingAndHealthy, prefix: string, boundMs = 30_000): Promise<number> {
  let slowest = 0;
  for (let i = 0; i < SAMPLES; i++) {
    const id = `${prefix}-${i}`;
    const res = await t.request('POST', '/api/user', { token, body: { user_group_id: id } });
    assert.equal(res.status, 201, res.text);
    const answered = Date.now();
    await until(`the delivery of ${id} (slowest so far ${slowest} ms)`, () => receiver.arrived.has(id), boundMs);
    slowest = Math.max(slowest, receiver.arrived.get(id)! - answered);
  }
  return slowest;
}

forEachBackend('webhook fairness', (backend) => {
  // The attempt timeout stays 15 s, as in production: a hanging request holds what it holds that long.
  const t = useTestApp(backend, { config: WEBHOOK_CONFIG });
  let receiver: HangingAndHealthy;
  after(() => receiver?.stop());

  it("webhooks fairness: two accounts' 12 endpoints hanging on a burst of changes leave another account's deliveries to the same host within their usual latency plus 1 s", async () => {
    receiver = await new HangingAndHealthy().start();
    const { token: healthy } = await t.issueToken({ account: 'wh-fair-healthy', scopes: [...ADMIN] });
    const hangingTokens = [];
    for (const n of [1, 2]) hangingTokens.push((await t.issueToken({ account: `wh-fair-hanging-${n}`, scopes: [...ADMIN] })).token);
    const hanging = hangingTokens[0];
    await createEndpoint(t, healthy, { url: receiver.url('/ok'), types: ['user_group.created'] });

    const usual = await slowestDelivery(t, healthy, receiver, 'usual');

    // Two accounts, 6 endpoints each, all on the healthy receiver's host: together they hold 8
    // requests there, as many as a connection pool shared by every account had for one host.
    for (const token of hangingTokens) {
      for (let i = 0; i < 6; i++) await createEndpoint(t, token, { url: receiver.url(`/hang?n=${i}`), types: ['user_group.created'] });
      const burst = await t.request('POST', '/api/users/upsert', {
        token,
        body: { user_groups: Array.from({ length: 50 }, (_, i) => ({ user_group_id: `burst-${i}` })) },
      });
      assert.equal(burst.status, 200, burst.text);
    }
    await until("the hanging accounts' requests in flight", () => receiver.hanging.length >= 8);

    const bound = usual + 1000;
    const during = await slowestDelivery(t, healthy, receiver, 'during', bound);
    assert.ok(during < bound, `slowest delivery ${during} ms while the other accounts hang; ${usual} ms before`);

    // Test events count like deliveries: the hanging account has all it may have in flight.
    const [endpoint] = (await t.request('GET', '/api/webhook_endpoints', { token: hanging })).body.webhook_endpoints;
    const busy = await t.request('POST', `/api/webhook_endpoints/${endpoint.id}/test`, { token: hanging });
    assert.equal(busy.status, 429, busy.text);
    assert.equal(busy.body.error.code, 'webhook_endpoint_busy');
    assert.ok(Number(busy.headers['retry-after']) >= 1, 'with Retry-After');
    assert.match(busy.body.error.message, /UGS_WEBHOOK_ACCOUNT_CONCURRENCY/);
    const [own] = (await t.request('GET', '/api/webhook_endpoints', { token: healthy })).body.webhook_endpoints;
    const tested = await t.request('POST', `/api/webhook_endpoints/${own.id}/test`, { token: healthy });
    assert.equal(tested.status, 200, tested.text);
    assert.equal(tested.body.delivered, true, "another account's test event is sent");
  });

  it('webhooks fairness: one test event at a time per endpoint: a second one while the first hangs is 429 webhook_endpoint_busy', async () => {
    receiver ??= await new HangingAndHealthy().start();
    const { token } = await t.issueToken({ account: 'wh-fair-tests', scopes: [...ADMIN] });
    const endpoint = await createEndpoint(t, token, { url: receiver.url('/hang?test'), types: ['embed_key.retired'] });
    const held = receiver.hanging.length;
    const first = t.request('POST', `/api/webhook_endpoints/${endpoint.id}/test`, { token });
    await until('the first test event in flight', () => receiver.hanging.length > held);
    const second = await t.request('POST', `/api/webhook_endpoints/${endpoint.id}/test`, { token });
    assert.equal(second.status, 429, second.text);
    assert.equal(second.body.error.code, 'webhook_endpoint_busy');
    receiver.hanging.at(-1)!.socket?.destroy(); // the receiver gives up: the first ends as a failed attempt
    const firstAnswer = await first;
    assert.equal(firstAnswer.status, 200, firstAnswer.text);
    assert.equal(firstAnswer.body.delivered, false);
    const before = receiver.hanging.length;
    const third = t.request('POST', `/api/webhook_endpoints/${endpoint.id}/test`, { token });
    await until('a test event again, once the first ended', () => receiver.hanging.length > before);
    receiver.hanging.at(-1)!.socket?.destroy();
    assert.equal((await third).status, 200);
  });
});
