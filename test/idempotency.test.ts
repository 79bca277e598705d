// Idempotent retries (docs/api.md, "Idempotent retries"): a write sent with an
// Idempotency-Key runs once; a retry with the same key and body within 24 h gets the first
// answer again (Idempotent-Replayed: true), another body is 422, a retry while the first runs
// is 409; keys are per API token, so no other token (a lesser one above all) receives or
// blocks a token's answer, and a refusal is never stored; the stored answer is sealed; keys
// expire after 24 h; and the promise holds across two server processes on one database.
import { it, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { sql } from '../src/db/kysely.ts';
import { ApiTokenAuthenticator } from '../src/api-tokens/api-token-authenticator.ts';
import { registerApiTokenAuth } from '../src/auth/authenticate.ts';
import { apiTokenAccess } from '../src/auth/route-access.ts';
import { IdempotencySweeper } from '../src/idempotency/idempotency-sweeper.ts';
import { canonicalJson } from '../src/idempotency/idempotency.ts';
import { generateToken } from '../src/auth/token-format.ts';
import { buildTestApp, forEachBackend, issueTestToken, openTestDatabase, type BuiltApp, type OpenDatabase } from './helpers/harness.ts';
import { eventually } from './helpers/wait.ts';
import { httpRequest, useServerProcesses } from './helpers/processes.ts';
import { openDatabase } from '../src/db/database.ts';
import { singleWrite } from '../src/db/transaction.ts';

const DAY_MS = 24 * 60 * 60 * 1000;
const newKey = () => crypto.randomUUID();
const withKey = (key: string) => ({ 'idempotency-key': key });

/** A route of the test's own behind the API-token hook: it counts its runs, fails while told to, and waits at a gate. */
interface TestRoute {
  runs: number;
  failNext: boolean;
  gate: Promise<void> | undefined;
}

function addTestRoute(app: FastifyInstance, database: OpenDatabase, now: () => Date): TestRoute {
  const state: TestRoute = { runs: 0, failNext: false, gate: undefined };
  app.register(async (api) => {
    registerApiTokenAuth(api, new ApiTokenAuthenticator(database.handle.pageViews, now, 0));
    api.post('/test/effect', { schema: apiTokenAccess(null, 'none', 'the test effect'), config: { idempotent: true } }, async (_request, reply) => {
      state.runs++;
      const run = state.runs;
      if (state.gate) await state.gate;
      if (state.failNext) {
        state.failNext = false;
        throw new Error('a fault of the service');
      }
      reply.code(201);
      return { success: 1, run };
    });
  });
  return state;
}

forEachBackend('idempotent retries', (backend) => {
  let database: OpenDatabase;
  let built: BuiltApp;
  let route: TestRoute;
  let token: string;
  let tokenId: number;
  let adminToken: string;
  let otherAccountToken: string;
  /** Lesser tokens of the same account: read only; read only and restricted to Testing; read and write restricted to Testing. */
  let readToken: string;
  let testingReadToken: string;
  let testingWriteToken: string;
  let clock = Date.now();
  const now = () => new Date(clock);

  before(async () => {
    database = await openTestDatabase(backend);
    built = await buildTestApp(database, { now });
    route = addTestRoute(built.app, database, now);
    await built.app.ready();
    ({ token, id: tokenId } = await issueTestToken(database.handle));
    readToken = (await issueTestToken(database.handle, { scopes: ['read'] })).token;
    testingReadToken = (await issueTestToken(database.handle, { scopes: ['read'], env: 'Testing' })).token;
    testingWriteToken = (await issueTestToken(database.handle, { env: 'Testing' })).token;
    adminToken = (await issueTestToken(database.handle, { scopes: ['read', 'write', 'admin'] })).token;
    otherAccountToken = (await issueTestToken(database.handle, { account: 'globex' })).token;
  });
  after(async () => {
    await built?.app.close();
    await database?.close();
  });

  const post = (path: string, body: unknown, key: string | undefined, as = token) =>
    built.request('POST', path, { token: as, body, headers: key === undefined ? {} : withKey(key) });
  const history = async (userGroupId: string) =>
    (await built.request('GET', '/api/user/history', { token, query: { user_group_id: userGroupId } })).body.entries.map((e: { action: string }) => e.action);
  const rows = async () => (await sql<Record<string, unknown>>`select * from idempotency_keys`.execute(database.handle.db)).rows;
  /** A request with a key another token used: answered exactly as the same request without a key (status and code), and no replay. */
  async function answeredAsWithoutKey(path: string, body: unknown, key: string, as: string) {
    const keyed = await post(path, body, key, as);
    const plain = await post(path, body, undefined, as);
    assert.equal(keyed.headers['idempotent-replayed'], undefined, `a replay to another token: ${keyed.text}`);
    assert.equal(keyed.status, plain.status, keyed.text);
    assert.equal(keyed.body.error?.code, plain.body.error?.code);
    return keyed;
  }

  /** A request with `key` that runs the test route and waits in it until `open()`; resolves once it runs (the route's next runs do not wait). */
  async function runningRequest(key: string) {
    route.runs = 0;
    let open!: () => void;
    route.gate = new Promise((resolve) => (open = resolve));
    const answer = post('/test/effect', {}, key);
    await eventually('the first request runs its route', () => route.runs > 0);
    route.gate = undefined;
    return { answer, open };
  }

  it('create: a retry with the same key and body gets the first answer (same token, Idempotent-Replayed) and creates nothing more', async () => {
    const key = newKey();
    const body = { user_group_id: `idem-${key}`, name: 'First', properties: { b: 1, a: [1, { y: 2, x: 1 }] } };
    const first = await post('/api/user', body, key);
    assert.equal(first.status, 201, first.text);
    assert.equal(first.headers['idempotent-replayed'], undefined, 'the first answer is no replay');
    // The same body with its keys in another order is the same request.
    const retry = await post('/api/user', { properties: { a: [1, { x: 1, y: 2 }], b: 1 }, name: 'First', user_group_id: body.user_group_id }, key);
    assert.equal(retry.status, 201, retry.text);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(retry.text, first.text, 'the very same answer');
    assert.equal(retry.body.user_group.token, first.body.user_group.token);
    assert.notEqual(retry.headers['x-request-id'], first.headers['x-request-id'], 'the retry has its own request id');
    assert.equal(retry.headers['cache-control'], 'no-store');
    const list = await built.request('GET', '/api/users', { token, query: { q: body.user_group_id } });
    assert.equal(list.body.user_groups.length, 1, 'one group');
    assert.deepEqual(await history(body.user_group_id), ['user_group.create'], 'one history entry');
  });

  it('rotate: a rotation whose answer was lost, retried with its key, answers 200 with the same new token instead of 404 token_not_found', async () => {
    const id = `idem-rotate-${newKey()}`;
    const created = await post('/api/user', { user_group_id: id }, undefined);
    const rotation = { current_token: created.body.user_group.token };
    const key = newKey();
    const first = await post('/api/user', rotation, key);
    assert.equal(first.status, 200, first.text);
    const retry = await post('/api/user', rotation, key);
    assert.equal(retry.status, 200, retry.text);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(retry.body.user_group.token, first.body.user_group.token);
    const current = await built.request('GET', '/api/user', { token, query: { user_group_id: id } });
    assert.equal(current.body.user_group.token, first.body.user_group.token, 'the token the answers carry is the current one');
    assert.deepEqual(await history(id), ['user_group.rotate', 'user_group.create'], 'one rotation');
    const withoutKey = await post('/api/user', rotation, undefined);
    assert.equal(withoutKey.status, 404, 'without the key the retry is a new rotation of a token that is no longer current');
    assert.equal(withoutKey.body.error.code, 'token_not_found');
  });

  it('API tokens and embed tokens: a retry gets the same token, and no second one is issued', async () => {
    const before = (await built.request('GET', '/api/api_tokens', { token: adminToken })).body.api_tokens.length;
    const key = newKey();
    const body = { scopes: ['read'], name: 'idempotent' };
    const first = await post('/api/api_tokens', body, key, adminToken);
    assert.equal(first.status, 201, first.text);
    const retry = await post('/api/api_tokens', body, key, adminToken);
    assert.equal(retry.status, 201);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(retry.body.token, first.body.token);
    assert.equal((await built.request('GET', '/api/api_tokens', { token: adminToken })).body.api_tokens.length, before + 1, 'one token issued');

    const group = `idem-embed-${key}`;
    await post('/api/user', { user_group_id: group }, undefined);
    const embedKey = newKey();
    const issued = await post('/api/embed_token', { user_group_id: group }, embedKey);
    assert.equal(issued.status, 200, issued.text);
    const again = await post('/api/embed_token', { user_group_id: group }, embedKey);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.body.embed_token, issued.body.embed_token);
  });

  it('bulk upsert: a retry gets the first answer (created, not unchanged) and writes nothing more', async () => {
    const key = newKey();
    const id = `idem-upsert-${key}`;
    const body = { user_groups: [{ user_group_id: id, name: 'Bulk' }] };
    const first = await post('/api/users/upsert', body, key);
    assert.equal(first.status, 200, first.text);
    const retry = await post('/api/users/upsert', body, key);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(retry.text, first.text);
    assert.match(retry.text, /"created"/);
    assert.deepEqual(await history(id), ['user_group.create']);
  });

  it('the same key with another body, method or path: 422 idempotency_key_reused, and nothing runs', async () => {
    const key = newKey();
    const id = `idem-reused-${key}`;
    assert.equal((await post('/api/user', { user_group_id: id }, key)).status, 201);
    const other = await post('/api/user', { user_group_id: `${id}-2` }, key);
    assert.equal(other.status, 422, other.text);
    assert.equal(other.body.error.code, 'idempotency_key_reused');
    assert.equal(other.headers['idempotent-replayed'], undefined);
    const elsewhere = await post('/api/embed_token', { user_group_id: id }, key);
    assert.equal(elsewhere.status, 422);
    const list = await built.request('GET', '/api/users', { token, query: { q: `${id}-2` } });
    assert.equal(list.body.user_groups.length, 0, 'the other body created nothing');
  });

  it('4xx answers of the route are stored and replayed; answers given before it runs (validation) are not', async () => {
    const id = `idem-4xx-${newKey()}`;
    await post('/api/user', { user_group_id: id }, undefined);
    const key = newKey();
    const exists = await post('/api/user', { user_group_id: id }, key);
    assert.equal(exists.status, 409);
    assert.equal(exists.body.error.code, 'user_group_exists');
    const replayed = await post('/api/user', { user_group_id: id }, key);
    assert.equal(replayed.status, 409);
    assert.equal(replayed.headers['idempotent-replayed'], 'true');
    assert.equal(replayed.body.error.code, 'user_group_exists');

    const fresh = newKey();
    const invalid = await post('/api/user', { user_group_id: `${id}-new`, colour: 'red' }, fresh);
    assert.equal(invalid.status, 400);
    const valid = await post('/api/user', { user_group_id: `${id}-new` }, fresh);
    assert.equal(valid.status, 201, 'the key of a request refused before it ran is still free');
  });

  it('a 5xx answer is not stored: the retry runs for real, and its answer is the one replayed', async () => {
    const key = newKey();
    route.runs = 0;
    route.failNext = true;
    const failed = await post('/test/effect', {}, key);
    assert.equal(failed.status, 500);
    const retried = await post('/test/effect', {}, key);
    assert.equal(retried.status, 201, retried.text);
    assert.equal(retried.headers['idempotent-replayed'], undefined);
    assert.equal((retried.body as unknown as { run: number }).run, 2);
    const replayed = await post('/test/effect', {}, key);
    assert.equal((replayed.body as unknown as { run: number }).run, 2);
    assert.equal(replayed.headers['idempotent-replayed'], 'true');
    assert.equal(route.runs, 2);
  });

  it('a retry while the first still runs: 409 idempotency_key_in_use; after it answers, the replay', async () => {
    const key = newKey();
    const { answer: first, open } = await runningRequest(key);
    const during = await post('/test/effect', {}, key);
    assert.equal(during.status, 409, during.text);
    assert.equal(during.body.error.code, 'idempotency_key_in_use');
    open();
    assert.equal((await first).status, 201);
    const after = await post('/test/effect', {}, key);
    assert.equal(after.headers['idempotent-replayed'], 'true');
    assert.equal(route.runs, 1);
  });

  it('a retry while the first still runs: its 409 carries Retry-After, the seconds left of the lock (30 s at first, then fewer)', async () => {
    const key = newKey();
    const { answer: first, open } = await runningRequest(key);
    const at = await post('/test/effect', {}, key);
    assert.equal(at.status, 409, at.text);
    assert.equal(at.headers['retry-after'], '30', 'the whole lock (UGS_REQUEST_TIMEOUT_MS, 30 s) is left');
    clock += 10_500;
    const later = await post('/test/effect', {}, key);
    assert.equal(later.status, 409, later.text);
    assert.equal(later.body.error.code, 'idempotency_key_in_use');
    assert.equal(later.headers['retry-after'], '20', '19.5 s of the lock are left, rounded up');
    open();
    assert.equal((await first).status, 201);
  });

  it('a running key whose lock lapsed (its process died) is taken over by a retry; the first, if it ever ends, stores nothing', async () => {
    const key = newKey();
    const { answer: stuck, open } = await runningRequest(key);
    clock += 31_000; // past the lock (UGS_REQUEST_TIMEOUT_MS, 30 s)
    const takeover = await post('/test/effect', {}, key);
    assert.equal(takeover.status, 201, takeover.text);
    assert.equal((takeover.body as unknown as { run: number }).run, 2);
    open();
    assert.equal(((await stuck).body as unknown as { run: number }).run, 1);
    const replayed = await post('/test/effect', {}, key);
    assert.equal((replayed.body as unknown as { run: number }).run, 2, "the stored answer is the taker's");
  });

  it('concurrent requests with one key: exactly one runs; the others get 409 idempotency_key_in_use or its replay', async () => {
    const key = newKey();
    const id = `idem-race-${key}`;
    const answers = await Promise.all(Array.from({ length: 20 }, () => post('/api/user', { user_group_id: id }, key)));
    const fresh = answers.filter((a) => a.status === 201 && a.headers['idempotent-replayed'] === undefined);
    assert.equal(fresh.length, 1, `statuses: ${answers.map((a) => a.status).join(',')}`);
    for (const a of answers) {
      if (a.status === 201) assert.equal(a.body.user_group.token, fresh[0].body.user_group.token);
      else assert.equal(a.body.error.code, 'idempotency_key_in_use', a.text);
    }
    assert.deepEqual(await history(id), ['user_group.create']);
  });

  it('keys are per account: the same key in two accounts is two operations', async () => {
    const key = newKey();
    const body = { user_group_id: `idem-accounts-${key}` };
    const mine = await post('/api/user', body, key);
    const theirs = await post('/api/user', body, key, otherAccountToken);
    assert.equal(mine.status, 201);
    assert.equal(theirs.status, 201, theirs.text);
    assert.equal(theirs.headers['idempotent-replayed'], undefined);
    assert.notEqual(theirs.body.user_group.team_id, mine.body.user_group.team_id);
    assert.notEqual(theirs.body.user_group.token, mine.body.user_group.token);
  });

  it('row 1: an admin token minted with a key is never replayed to a read-only token, or a read token restricted to Testing, sending the same request and key', async () => {
    const key = `mint-ops-${newKey()}`;
    const body = { scopes: ['read', 'write', 'admin'], name: 'ops' };
    const minted = await post('/api/api_tokens', body, key, adminToken);
    assert.equal(minted.status, 201, minted.text);
    for (const lesser of [readToken, testingReadToken]) {
      const answer = await answeredAsWithoutKey('/api/api_tokens', body, key, lesser);
      assert.equal(answer.status, 403, answer.text);
      assert.equal(answer.body.error.code, 'insufficient_scope');
      assert.ok(!answer.text.includes(minted.body.token), 'the new admin token was handed to a lesser token');
    }
    const own = await post('/api/api_tokens', body, key, adminToken);
    assert.equal(own.headers['idempotent-replayed'], 'true', "the admin's own retry still gets its answer");
    assert.equal(own.body.token, minted.body.token);
  });

  it("row 1: a Customer group's token is never replayed to a read-only token, or a token restricted to Testing, sending the same create and key", async () => {
    const key = newKey();
    const body = { user_group_id: `idem-row1-${key}`, api_environment_tag: 'Customer' };
    const created = await post('/api/user', body, key);
    assert.equal(created.status, 201, created.text);
    for (const [lesser, code] of [
      [readToken, 'insufficient_scope'],
      [testingReadToken, 'insufficient_scope'],
      [testingWriteToken, 'environment_forbidden'],
    ] as const) {
      const answer = await answeredAsWithoutKey('/api/user', body, key, lesser);
      assert.equal(answer.status, 403, answer.text);
      assert.equal(answer.body.error.code, code);
      assert.ok(!answer.text.includes(created.body.user_group.token), "the group's token was handed to a lesser token");
    }
  });

  it("row 1b: a read token's refused upsert (403) is not stored and does not poison the key: the write token's same request and key runs and creates the group", async () => {
    const key = `nightly-2026-11-27-${newKey()}`;
    const id = `idem-row1b-${key}`;
    const body = { user_groups: [{ user_group_id: id }] };
    const refused = await post('/api/users/upsert', body, key, readToken);
    assert.equal(refused.status, 403, refused.text);
    const written = await post('/api/users/upsert', body, key);
    assert.equal(written.status, 200, written.text);
    assert.equal(written.headers['idempotent-replayed'], undefined);
    assert.match(written.text, /"created"/);
    assert.deepEqual(await history(id), ['user_group.create']);
    const refusedAgain = await post('/api/users/upsert', body, key, readToken);
    assert.equal(refusedAgain.status, 403);
    assert.equal(refusedAgain.headers['idempotent-replayed'], undefined, 'a refusal is not stored: the retry is refused afresh');
    const stored = (await rows()).filter((row) => row.idempotency_key === key);
    assert.deepEqual(
      stored.map((row) => [Number(row.api_token_id), Number(row.response_status)]),
      [[tokenId, 200]],
      "only the write token's answer is kept",
    );
  });

  it("keys are per API token: another token of the account sending the same key runs its own request, never 409 or 422 against the first token's key", async () => {
    const key = newKey();
    const { answer: first, open } = await runningRequest(key);
    const whileRunning = await post('/test/effect', {}, key, adminToken);
    assert.equal(whileRunning.status, 201, `not 409 idempotency_key_in_use: ${whileRunning.text}`);
    assert.equal((whileRunning.body as unknown as { run: number }).run, 2);
    const otherBody = await post('/test/effect', { other: true }, key, readToken);
    assert.equal(otherBody.status, 201, `not 422 idempotency_key_reused: ${otherBody.text}`);
    open();
    assert.equal(((await first).body as unknown as { run: number }).run, 1);
    for (const [as, run] of [
      [token, 1],
      [adminToken, 2],
      [readToken, 3],
    ] as const) {
      const replayed = await post('/test/effect', as === readToken ? { other: true } : {}, key, as);
      assert.equal(replayed.headers['idempotent-replayed'], 'true');
      assert.equal((replayed.body as unknown as { run: number }).run, run, 'each token gets its own answer');
    }
    assert.equal(route.runs, 3);
  });

  it('a 404 answered to a token restricted to one environment is not stored (it may mean "outside your environment"); an unrestricted token\'s 404 is', async () => {
    const rotation = { current_token: generateToken('user_group') };
    for (const [as, stored] of [
      [token, 'true'],
      [testingWriteToken, undefined],
    ] as const) {
      const key = newKey();
      const first = await post('/api/user', rotation, key, as);
      assert.equal(first.status, 404, first.text);
      assert.equal(first.body.error.code, 'token_not_found');
      const retry = await post('/api/user', rotation, key, as);
      assert.equal(retry.status, 404);
      assert.equal(retry.headers['idempotent-replayed'], stored);
    }
  });

  it('the stored answer is sealed under the secret key: no token appears in the table', async () => {
    const key = newKey();
    const group = await post('/api/user', { user_group_id: `idem-sealed-${key}` }, key);
    const apiToken = await post('/api/api_tokens', { scopes: ['read'] }, newKey(), adminToken);
    const raw = JSON.stringify(await rows());
    for (const secret of [group.body.user_group.token, apiToken.body.token]) {
      assert.ok(!raw.includes(secret), 'a token in plaintext');
      assert.ok(!raw.includes(secret.slice(-30)), 'part of a token in plaintext');
    }
    const stored = (await rows()).filter((row) => row.idempotency_key === key);
    assert.equal(stored.length, 1);
    assert.equal(String(stored[0].response_sealed).slice(0, 8), built.keyring.currentKeyId);
    assert.equal(Number(stored[0].response_status), 201);
  });

  it('a key older than 24 h is unknown again: the request runs again; the sweeper deletes expired keys', async () => {
    const key = newKey();
    const id = `idem-expired-${key}`;
    assert.equal((await post('/api/user', { user_group_id: id }, key)).status, 201);
    clock += DAY_MS + 60_000;
    const again = await post('/api/user', { user_group_id: id }, key);
    assert.equal(again.status, 409, 'it ran again: the group exists now');
    assert.equal(again.headers['idempotent-replayed'], undefined);
    assert.equal(again.body.error.code, 'user_group_exists');

    const expiring = newKey();
    await post('/api/user', { user_group_id: `${id}-sweep` }, expiring);
    clock += DAY_MS + 60_000;
    const kept = newKey();
    await post('/api/user', { user_group_id: `${id}-kept` }, kept);
    const sweeper = new IdempotencySweeper(database.handle, { now, everyMs: 60_000, onError: (err) => assert.fail(String(err)) });
    assert.ok((await sweeper.sweepOnce()) >= 2);
    const left = (await rows()).map((row) => row.idempotency_key);
    assert.ok(!left.includes(expiring) && !left.includes(key), 'expired keys are gone');
    assert.ok(left.includes(kept), 'a fresh key stays');
  });

  it('the header: 1-255 printable ASCII characters, else 400 validation_failed; ignored on routes without it', async () => {
    for (const bad of ['x'.repeat(256), '']) {
      const answer = await post('/api/user', { user_group_id: `idem-header-${newKey()}` }, bad);
      assert.equal(answer.status, 400, `${JSON.stringify(bad)}: ${answer.text}`);
      assert.equal(answer.body.error.code, 'validation_failed');
      assert.equal(answer.body.error.details?.[0].field, 'Idempotency-Key');
    }
    assert.equal((await post('/api/user', { user_group_id: `idem-header-${newKey()}` }, 'k'.repeat(255))).status, 201);
    const key = newKey();
    const id = `idem-put-${key}`;
    await post('/api/user', { user_group_id: id }, undefined);
    for (const name of ['One', 'Two']) {
      const put = await built.request('PUT', '/api/user', { token, body: { user_group_id: id, name }, headers: withKey(key) });
      assert.equal(put.status, 200);
      assert.equal(put.body.user_group.name, name, 'PUT is idempotent by nature and takes no key');
    }
  });

  it('OpenAPI: the idempotent operations declare Idempotency-Key, Idempotent-Replayed and the new answers', async () => {
    const doc = (await built.request('GET', '/openapi.json')).body as unknown as {
      paths: Record<string, Record<string, { parameters?: { name: string }[]; responses: Record<string, { headers?: Record<string, unknown> }> }>>;
    };
    for (const path of ['/api/user', '/api/users/upsert', '/api/api_tokens', '/api/embed_token']) {
      const operation = doc.paths[path].post;
      assert.ok(
        operation.parameters?.some((p) => p.name === 'Idempotency-Key'),
        `${path} declares the header`,
      );
      assert.ok(operation.responses['422'] && operation.responses['409'], `${path} declares 409 and 422`);
      const ok = operation.responses['201'] ?? operation.responses['200'];
      assert.ok(ok.headers?.['Idempotent-Replayed'], `${path} declares Idempotent-Replayed`);
    }
    assert.ok(!doc.paths['/api/user'].put.parameters?.some((p) => p.name === 'Idempotency-Key'), 'PUT does not take it');
  });
});

describe('canonical JSON', () => {
  it('orders keys at every depth and keeps arrays in order', () => {
    assert.equal(canonicalJson({ b: [2, 1, { d: 1, c: null }], a: 'x' }), '{"a":"x","b":[2,1,{"c":null,"d":1}]}');
    assert.notEqual(canonicalJson([1, 2]), canonicalJson([2, 1]));
  });
});

forEachBackend('idempotent retries across two server processes', (backend) => {
  const two = useServerProcesses(backend);

  for (const [what, body] of [
    ['a create', (id: string) => ({ user_group_id: id })],
    ['a rotation', undefined],
  ] as const) {
    it(`${what}: 30 concurrent requests with one key split across two processes have exactly one effect`, async () => {
      const id = `mi-idem-${crypto.randomUUID()}`;
      let request: unknown;
      if (body) request = body(id);
      else {
        const created = await httpRequest(two.servers[0].baseUrl, 'POST', '/api/user', { token: two.token, body: { user_group_id: id } });
        request = { current_token: created.body.user_group.token };
      }
      const key = crypto.randomUUID();
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          httpRequest(two.servers[i % 2].baseUrl, 'POST', '/api/user', { token: two.token, body: request, headers: withKey(key) }),
        ),
      );
      const success = body ? 201 : 200;
      const fresh = answers.filter((a) => a.status === success && a.headers['idempotent-replayed'] === undefined);
      assert.equal(fresh.length, 1, `statuses: ${answers.map((a) => `${a.status}${a.headers['idempotent-replayed'] ? 'r' : ''}`).join(',')}`);
      for (const a of answers) {
        if (a.status === success) assert.equal(a.body.user_group.token, fresh[0].body.user_group.token);
        else assert.equal(a.body.error.code, 'idempotency_key_in_use', a.text);
      }
      for (const server of two.servers) {
        const retry = await httpRequest(server.baseUrl, 'POST', '/api/user', { token: two.token, body: request, headers: withKey(key) });
        assert.equal(retry.status, success);
        assert.equal(retry.headers['idempotent-replayed'], 'true');
        assert.equal(retry.body.user_group.token, fresh[0].body.user_group.token);
      }
      const history = await httpRequest(two.servers[1].baseUrl, 'GET', `/api/user/history?user_group_id=${encodeURIComponent(id)}`, { token: two.token });
      assert.deepEqual(
        history.body.entries.map((e: { action: string }) => e.action),
        body ? ['user_group.create'] : ['user_group.rotate', 'user_group.create'],
      );
    });
  }
});

forEachBackend('idempotent retries: the first attempt died with its instance', (backend) => {
  // A lock of 5 s (the request timeout) keeps the wait short. One heavy operation per account,
  // whose slot the test holds: the bulk upsert waits in it, its key claimed, until its process is killed.
  const LOCK_SECONDS = 5;
  const two = useServerProcesses(backend, {
    env: { UGS_HEAVY_OPERATIONS_PER_ACCOUNT: '1', UGS_REQUEST_TIMEOUT_MS: String(LOCK_SECONDS * 1000), UGS_HEADERS_TIMEOUT_MS: String(LOCK_SECONDS * 1000) },
  });

  it('a bulk upsert killed (kill -9) mid-request: a retry on another instance gets 409 idempotency_key_in_use with Retry-After, the seconds left of the lock; after them, the retry runs', async () => {
    const handle = openDatabase(two.database.url);
    try {
      const account = await handle.db.selectFrom('accounts').select('id').where('slug', '=', 'acme').executeTakeFirstOrThrow();
      const now = new Date();
      // singleWrite: on SQLite the servers' writes hold the file's lock now and then; wait for it as they do.
      await singleWrite(handle, () =>
        handle.db
          .insertInto('heavy_operations')
          .values({
            account_id: account.id,
            slot: 0,
            holder: 'the test',
            operation: 'upsert',
            started_at: now.toISOString(),
            lease_until: new Date(now.getTime() + 600_000).toISOString(),
          })
          .execute(),
      );
      const key = crypto.randomUUID();
      const body = { user_groups: [{ user_group_id: `killed-${key}` }] };
      const send = (server: number) => httpRequest(two.servers[server].baseUrl, 'POST', '/api/users/upsert', { token: two.token, body, headers: withKey(key) });
      const first = send(0).catch(() => 'the connection died with the process');
      await eventually(
        'the first attempt holds its key',
        async () => (await handle.db.selectFrom('idempotency_keys').select('state').where('idempotency_key', '=', key).executeTakeFirst())?.state === 'running',
      );
      assert.deepEqual(await two.servers[0].stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
      assert.equal(await first, 'the connection died with the process');

      const retry = await send(1);
      assert.equal(retry.status, 409, retry.text);
      assert.equal(retry.body.error.code, 'idempotency_key_in_use');
      const seconds = Number(retry.headers['retry-after']);
      assert.ok(Number.isInteger(seconds) && seconds >= 1 && seconds <= LOCK_SECONDS, `Retry-After: ${retry.headers['retry-after']} (1-${LOCK_SECONDS})`);

      // The slot is given back (the test's "other operation" ends); after the seconds it said, the retry runs.
      await singleWrite(handle, () => handle.db.deleteFrom('heavy_operations').where('holder', '=', 'the test').execute());
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      const ran = await send(1);
      assert.equal(ran.status, 200, ran.text);
      assert.equal(ran.headers['idempotent-replayed'], undefined, 'it ran: nothing was stored for the killed attempt');
      assert.match(ran.text, /"created"/);
    } finally {
      await handle.close();
    }
  });
});
