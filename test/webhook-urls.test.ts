// Secrets in webhook URLs (docs/api.md, "Webhooks"; docs/security.md, "Webhooks"): a URL with a
// user name or password is refused; history and events, which every `read` token, every
// endpoint that takes every type and `ugs audit` see, carry the URL's origin only, never the
// path or the query string where a receiver's credentials live; admins see the whole URL in
// the endpoint listing. Migration 0009 cuts the URLs of entries and events written before.
// And what a refusal says (SSRF): one answer for every refused host, and no DNS at creation,
// so that neither tells a tenant what the service's own DNS knows.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import dns from 'node:dns/promises';
import os from 'node:os';
import { Migrator } from 'kysely';
import { forEachBackend, useTestApp } from './helpers/harness.ts';
import { createTestDatabase } from './helpers/backends.ts';
import { createEndpoint, sleep, useReceivers, verified, WEBHOOK_CONFIG } from './helpers/webhook-receiver.ts';
import { GENEROUS_WAIT_MS } from './helpers/wait.ts';
import { openDatabase } from '../src/db/database.ts';
import { forbiddenAddressReason } from '../src/webhooks/webhook-address.ts';
import { migrateToLatest, migrationsFor } from '../src/db/migrate.ts';

const ADMIN = ['read', 'write', 'admin'] as const;
/** A receiver's credentials in the path and in the query string, on a host that needs no DNS answer to be accepted. */
const SECRET_URL = 'https://hooks.example.net/in/p4th-s3cret?access_token=xoxb-1234-query-secret';
const SECRETS = ['p4th-s3cret', 'xoxb-1234', 'query-secret', '/in/'];

forEachBackend('webhook URLs', (backend) => {
  const t = useTestApp(backend, { config: WEBHOOK_CONFIG });
  const receiver = useReceivers();

  it('webhooks: a URL with a user name or password is 400 validation_failed on url, saying to put the credentials in the path or a query parameter; nothing is made', async () => {
    const { token } = await t.issueToken({ account: 'wh-userinfo', scopes: [...ADMIN] });
    for (const url of ['https://user:S3cr3t@hooks.example.net/in', 'https://user@hooks.example.net/in', 'https://:S3cr3t@hooks.example.net/in']) {
      const res = await t.request('POST', '/api/webhook_endpoints', { token, body: { url } });
      assert.equal(res.status, 400, `${url}: ${res.text}`);
      assert.equal(res.body.error.code, 'validation_failed');
      assert.deepEqual(res.body.error.details, [{ field: 'url', issue: 'userinfo' }]);
      assert.match(res.body.error.message, /path or in a query parameter/);
      assert.ok(!res.text.includes('S3cr3t'), 'the answer does not repeat the password');
    }
    assert.deepEqual((await t.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints, []);
  });

  it("webhooks: a read token's feed, the history and an endpoint that takes every type see only an endpoint URL's origin, never its path or query string; an admin's listing has the whole URL", async () => {
    const { token: admin } = await t.issueToken({ account: 'wh-url-readers', scopes: [...ADMIN] });
    const { token: reader } = await t.issueToken({ account: 'wh-url-readers', scopes: ['read'] });
    const r = await receiver();
    const everything = await createEndpoint(t, admin, { url: r.url }); // every type, its own endpoint's events included
    const secret = await createEndpoint(t, admin, { url: SECRET_URL, types: ['user_group.deleted'] });
    assert.equal(secret.url, SECRET_URL, 'the creating admin gets the whole URL back');
    assert.equal((await t.request('DELETE', `/api/webhook_endpoints/${secret.id}`, { token: admin })).status, 200);

    let feed = await t.request('GET', '/api/events', { token: reader });
    for (const deadline = Date.now() + 5000; !feed.text.includes('webhook_endpoint.deleted') && Date.now() < deadline; await sleep(20))
      feed = await t.request('GET', '/api/events', { token: reader });
    assert.equal(feed.status, 200, feed.text);
    const ofSecret = feed.body.events.filter((event) => event.data.webhook_endpoint_id === secret.id);
    assert.deepEqual(
      ofSecret.map((event) => [event.type, event.data.url, event.data.changes]),
      [
        ['webhook_endpoint.created', 'https://hooks.example.net', { url: { old: null, new: 'https://hooks.example.net' } }],
        ['webhook_endpoint.deleted', 'https://hooks.example.net', { url: { old: 'https://hooks.example.net', new: null } }],
      ],
    );
    for (const part of SECRETS) assert.ok(!feed.text.includes(part), `the feed holds "${part}": ${feed.text}`);

    // The endpoint that takes every type got the same events.
    const received = await r.until((all) => all.some((request) => request.body.includes('webhook_endpoint.deleted')));
    for (const request of received) {
      const event = verified(everything.secret, request);
      for (const part of SECRETS) assert.ok(!request.body.includes(part), `a delivery holds "${part}": ${request.body}`);
      if (event.data.webhook_endpoint_id === secret.id) assert.equal(event.data.url, 'https://hooks.example.net');
    }

    // Stored: the history (what `ugs audit` prints) and the feed hold the origin only.
    const stored = JSON.stringify([
      await t.handle.db.selectFrom('audit_log').selectAll().where('subject_type', '=', 'webhook_endpoint').execute(),
      await t.handle.db.selectFrom('events').selectAll().execute(),
      await t.handle.db.selectFrom('event_outbox').selectAll().execute(),
    ]);
    assert.ok(stored.includes('https://hooks.example.net'));
    for (const part of SECRETS) assert.ok(!stored.includes(part), `history or events store "${part}"`);

    const listed = await t.request('GET', '/api/webhook_endpoints', { token: admin });
    assert.deepEqual(
      listed.body.webhook_endpoints.map((endpoint) => endpoint.url),
      [r.url],
    );
    const again = await createEndpoint(t, admin, { url: SECRET_URL });
    assert.equal(
      (await t.request('GET', '/api/webhook_endpoints', { token: admin })).body.webhook_endpoints.find((endpoint) => endpoint.id === again.id)?.url,
      SECRET_URL,
      'the admin listing has the whole URL',
    );
  });

  it('migration 0009: history entries and events of webhook endpoints written before keep only the URL origin', async () => {
    const database = await createTestDatabase(backend);
    const handle = openDatabase(database.url);
    try {
      const migrator = new Migrator({ db: handle.db, provider: { getMigrations: async () => migrationsFor(handle.dialect) } });
      const { error } = await migrator.migrateTo('0007-idempotency-keys');
      assert.ifError(error);
      const now = new Date().toISOString();
      const account = await handle.db
        .insertInto('accounts')
        .values({ slug: 'before-0009', hierarchy_levels: null, created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow();
      const data = JSON.stringify({ webhook_endpoint_id: 7, url: SECRET_URL, environment: null, changes: { url: { old: null, new: SECRET_URL } } });
      const event = { account_id: account.id, environment: null, type: 'webhook_endpoint.created', occurred_at: now, data };
      await handle.db
        .insertInto('events')
        .values({ ...event, seq: 1 })
        .execute();
      await handle.db.insertInto('event_outbox').values(event).execute();
      await handle.db
        .insertInto('audit_log')
        .values({
          account_id: account.id,
          subject_type: 'webhook_endpoint',
          subject_id: '7',
          environment: null,
          provided_id: null,
          action: 'webhook_endpoint.create',
          changed_fields: null,
          details: JSON.stringify({ url: { old: null, new: SECRET_URL } }),
          actor_token_id: null,
          request_id: null,
          created_at: now,
        })
        .execute();

      await migrateToLatest(handle);
      const expected = {
        webhook_endpoint_id: 7,
        url: 'https://hooks.example.net',
        environment: null,
        changes: { url: { old: null, new: 'https://hooks.example.net' } },
      };
      assert.deepEqual(JSON.parse((await handle.db.selectFrom('events').select('data').executeTakeFirstOrThrow()).data), expected);
      assert.deepEqual(JSON.parse((await handle.db.selectFrom('event_outbox').select('data').executeTakeFirstOrThrow()).data), expected);
      assert.deepEqual(JSON.parse((await handle.db.selectFrom('audit_log').select('details').executeTakeFirstOrThrow()).details!), {
        url: { old: null, new: 'https://hooks.example.net' },
      });
    } finally {
      await handle.close();
      await database.drop();
    }
  });
});

/** A refusal's message with its host taken out: what must be the same for every refused host. */
const withoutHost = (message: string, host: string) => message.replace(`"${host}"`, '"<host>"');
/** A name that no DNS answers (RFC 6761: `.invalid` never resolves). */
const NO_SUCH_NAME = 'no-such-receiver.invalid';

forEachBackend('webhook URLs: refusals', (backend) => {
  const t = useTestApp(backend); // UGS_WEBHOOK_ALLOW_PRIVATE not set
  const receiver = useReceivers();

  it('webhooks SSRF: every refused host gets one answer, 400 webhook_url_forbidden naming only the host: literal addresses (5f00::1 and the other reserved IPv6 blocks too), localhost and the names under it', async () => {
    const { token } = await t.issueToken({ account: 'wh-one-answer', scopes: [...ADMIN] });
    const refused = [
      ['127.0.0.1', 'http://127.0.0.1:8080/hook'],
      ['10.1.2.3', 'https://10.1.2.3/hook'],
      ['::1', 'http://[::1]/'],
      ['5f00::1', 'http://[5f00::1]/'], // SRv6 segment identifiers (5f00::/16)
      ['5f12:3456::1', 'https://[5f12:3456::1]/'], // reserved by IETF (4000::/3), as is all outside 2000::/3
      ['100::1', 'http://[100::1]/'], // discard-only
      ['2001:1::1', 'http://[2001:1::1]/'], // IETF protocol assignments (2001::/23)
      ['localhost', 'http://localhost:8080/hook'],
      ['localhost.', 'http://LOCALHOST.:8080/hook'],
      ['hooks.localhost', 'https://hooks.localhost/in'],
    ] as const;
    const messages = new Set<string>();
    for (const [host, url] of refused) {
      const res = await t.request('POST', '/api/webhook_endpoints', { token, body: { url } });
      assert.equal(res.status, 400, `${url}: ${res.text}`);
      assert.equal(res.body.error.code, 'webhook_url_forbidden', url);
      assert.deepEqual(res.body.error.details, [{ field: 'url', issue: 'forbidden_address' }]);
      assert.ok(res.body.error.message.includes(`"${host}"`), `${url}: ${res.body.error.message}`);
      messages.add(withoutHost(res.body.error.message, host));
    }
    assert.equal(messages.size, 1, `one answer for every refused host: ${[...messages].join(' | ')}`);
    assert.deepEqual((await t.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints, []);
  });

  it('webhooks SSRF: creating an endpoint never resolves its host: a name that does not resolve and a name this machine resolves to a private address are both 201', async () => {
    const { token } = await t.issueToken({ account: 'wh-no-dns', scopes: [...ADMIN] });
    // This machine's own name, as in the report, when it resolves to an address webhooks may not reach.
    const own = await dns.lookup(os.hostname(), { all: true }).catch(() => []);
    const names = [NO_SUCH_NAME];
    if (own.some(({ address }) => forbiddenAddressReason(address) !== null)) names.push(os.hostname());
    for (const name of names) await createEndpoint(t, token, { url: `https://${name}/hook` });
    assert.equal((await t.request('GET', '/api/webhook_endpoints', { token })).body.webhook_endpoints.length, names.length);
  });

  it('webhooks SSRF: at an attempt, a name that resolves to a refused address and a name that does not resolve fail with the same recorded reason, never the address, and nothing is sent', async () => {
    const { token } = await t.issueToken({ account: 'wh-attempt-answer', scopes: [...ADMIN] });
    const r = await receiver();
    // A name that resolves to the receiver's loopback address. Creation refuses `localhost` by its
    // text, so the row is written as a name whose DNS answer changed after its creation would be.
    const account = await t.handle.db.selectFrom('accounts').select('id').where('slug', '=', 'wh-attempt-answer').executeTakeFirstOrThrow();
    const [local] = await t.handle.db
      .insertInto('webhook_endpoints')
      .values({
        account_id: account.id,
        url: `http://localhost:${r.port}/hook`,
        types: JSON.stringify(['user_group.created']),
        description: null,
        environment: null,
        secret_sealed: t.keyring.seal('whsec_AAAA', 'webhook-secret'),
        created_at: new Date().toISOString(),
      })
      .returning('id')
      .execute();
    const missing = await createEndpoint(t, token, { url: `http://${NO_SUCH_NAME}:${r.port}/hook`, types: ['user_group.created'] });
    const hosts = new Map([
      [Number(local.id), 'localhost'],
      [Number(missing.id), NO_SUCH_NAME],
    ]);

    // The test event answers at once; a change's delivery records its attempt.
    const answers = new Set<string>();
    for (const [id, host] of hosts) {
      const res = await t.request('POST', `/api/webhook_endpoints/${id}/test`, { token });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.delivered, false);
      answers.add(withoutHost(res.body.attempt.error!, host));
    }
    assert.equal((await t.request('POST', '/api/user', { token, body: { user_group_id: 'refused-hosts' } })).status, 201);
    for (const [id, host] of hosts) {
      let attempts: { error: string | null }[] = [];
      for (const deadline = Date.now() + GENEROUS_WAIT_MS; attempts.length === 0 && Date.now() < deadline; await sleep(20)) {
        const listing = await t.request('GET', `/api/webhook_endpoints/${id}/deliveries`, { token });
        attempts = listing.body.deliveries.flatMap((delivery) => delivery.attempts);
      }
      assert.ok(attempts.length > 0, `an attempt is recorded for ${host}`);
      answers.add(withoutHost(attempts[0].error!, host));
    }
    assert.equal(answers.size, 1, `one reason for both names: ${[...answers].join(' | ')}`);
    const [answer] = answers;
    assert.match(answer, /public addresses only/);
    for (const address of ['127.0.0.1', '::1']) assert.ok(!answer.includes(address), answer);
    assert.equal(r.received.length, 0, 'nothing reached the receiver');
  });
});
