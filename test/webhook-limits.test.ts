// What one account's webhooks may cost the others (docs/security.md, "Webhooks"): at most
// UGS_WEBHOOK_MAX_ENDPOINTS endpoints receive one environment's events of an account (an
// endpoint of no environment counts for both), checked under a lock so that creations at once
// cannot pass it together.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp, type SuiteApp } from './helpers/harness.ts';
import { WEBHOOK_CONFIG } from './helpers/webhook-receiver.ts';

const ADMIN = ['read', 'write', 'admin'] as const;
/** Nobody listens there, and no endpoint below takes an event type any test makes. */
const QUIET = { url: 'http://127.0.0.1:9/hook', types: ['embed_key.retired'] };

async function create(t: Pick<SuiteApp, 'request'>, token: string) {
  return t.request('POST', '/api/webhook_endpoints', { token, body: QUIET });
}

forEachBackend('webhook limits', (backend) => {
  const t = useTestApp(backend, { config: { ...WEBHOOK_CONFIG, webhookMaxEndpoints: 3 } });

  it('webhooks: one endpoint beyond UGS_WEBHOOK_MAX_ENDPOINTS is 409 webhook_endpoint_limit_reached naming the limit, and nothing is made; after a delete there is room again', async () => {
    const { token } = await t.issueToken({ account: 'wh-cap', scopes: [...ADMIN] });
    const made = [];
    for (let i = 0; i < 3; i++) {
      const res = await create(t, token);
      assert.equal(res.status, 201, res.text);
      made.push(res.body.webhook_endpoint.id);
    }
    const refused = await create(t, token);
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.body.error.code, 'webhook_endpoint_limit_reached');
    assert.match(refused.body.error.message, /UGS_WEBHOOK_MAX_ENDPOINTS=3/);
    assert.equal((await t.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints.length, 3, 'nothing was made');
    assert.equal((await t.request('DELETE', `/api/webhook_endpoints/${made[0]}`, { token })).status, 200);
    assert.equal((await create(t, token)).status, 201, 'room again after a delete');
    // Another account has its own endpoints.
    const { token: other } = await t.issueToken({ account: 'wh-cap-other', scopes: [...ADMIN] });
    assert.equal((await create(t, other)).status, 201);
  });

  it("webhooks: the cap is per environment; an endpoint of no environment counts for both, so an environment's admin finds the unrestricted endpoints in its count", async () => {
    const { token: unrestricted } = await t.issueToken({ account: 'wh-cap-env', scopes: [...ADMIN] });
    const { token: customer } = await t.issueToken({ account: 'wh-cap-env', scopes: [...ADMIN], env: 'Customer' });
    const { token: testing } = await t.issueToken({ account: 'wh-cap-env', scopes: [...ADMIN], env: 'Testing' });
    assert.equal((await create(t, unrestricted)).status, 201);
    for (let i = 0; i < 2; i++) assert.equal((await create(t, customer)).status, 201);
    const full = await create(t, customer);
    assert.equal(full.status, 409, full.text);
    assert.match(full.body.error.message, /3 webhook endpoints receiving Customer's events/);
    for (let i = 0; i < 2; i++) assert.equal((await create(t, testing)).status, 201, 'Testing has room of its own');
    assert.equal((await create(t, testing)).status, 409);
    assert.equal((await create(t, unrestricted)).status, 409, 'an endpoint of no environment would be a fourth for both');
  });

  it('webhooks: ten creations at once with room for three make exactly three endpoints', async () => {
    const { token } = await t.issueToken({ account: 'wh-cap-race', scopes: [...ADMIN] });
    const answers = await Promise.all(Array.from({ length: 10 }, () => create(t, token)));
    assert.deepEqual(answers.map((res) => res.status).sort(), [201, 201, 201, 409, 409, 409, 409, 409, 409, 409], answers.map((res) => res.text).join('\n'));
    assert.equal((await t.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints.length, 3);
  });
});

forEachBackend('webhook limits: the default', (backend) => {
  const t = useTestApp(backend, { config: WEBHOOK_CONFIG }); // UGS_WEBHOOK_MAX_ENDPOINTS not set

  it('webhooks: by default an account has at most 16 endpoints per environment', async () => {
    const { token } = await t.issueToken({ account: 'wh-cap-default', scopes: [...ADMIN] });
    for (let i = 0; i < 16; i++) assert.equal((await create(t, token)).status, 201);
    const refused = await create(t, token);
    assert.equal(refused.status, 409, refused.text);
    assert.match(refused.body.error.message, /UGS_WEBHOOK_MAX_ENDPOINTS=16/);
  });
});
