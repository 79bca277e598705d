// The typed client (packages/client) against a real listening server, on every operation
// and every error class; its retries, deadline and error translation against a stub server.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  UserGroupServiceClient,
  jwksUrl,
  UserGroupServiceError,
  isUserGroupServiceError,
  parseRetryAfter,
  retryDelayMs,
  DEFAULT_RETRY,
  type UserGroupServiceErrorCode,
} from '../packages/client/src/index.ts';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { BACKENDS } from './helpers/backends.ts';
import { startTestApp, type TestApp } from './helpers/harness.ts';

/** Awaits a failing call and returns its UserGroupServiceError, checking the code and status. */
async function failure(promise: Promise<unknown>, code: UserGroupServiceErrorCode, status: number): Promise<UserGroupServiceError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof UserGroupServiceError, `expected a UserGroupServiceError, got ${err}`);
    assert.equal(err.code, code, err.message);
    assert.equal(err.status, status);
    return err;
  }
  assert.fail(`expected ${code}, but the call succeeded`);
}

/** A fetch that records what the client sent. */
function recordingFetch() {
  const calls: { method: string; url: URL; headers: Headers; body: string | undefined }[] = [];
  const fetchImpl: typeof fetch = async (input, init) => {
    const url = new URL(String(input));
    calls.push({ method: init?.method ?? 'GET', url, headers: new Headers(init?.headers), body: init?.body as string | undefined });
    return fetch(input, init);
  };
  return { calls, fetch: fetchImpl };
}

for (const backend of BACKENDS) {
  describe(`[${backend}] client against a real server`, () => {
    let t: TestApp;
    let baseUrl: string;
    let token: string;
    let client: UserGroupServiceClient;
    const run = crypto.randomBytes(4).toString('hex');

    before(async () => {
      t = await startTestApp(backend);
      await t.app.listen({ host: '127.0.0.1', port: 0 });
      baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
      token = (await t.issueToken()).token;
      client = new UserGroupServiceClient({ baseUrl, apiToken: token, retry: { maxAttempts: 1 } });
    });
    after(() => t.close());

    it('createUserGroup: 201 with the group and its token', async () => {
      const { success, user_group } = await client.createUserGroup({
        user_group_id: `c-${run}`,
        name: 'Create',
        mapping: { '40': '213' },
        properties: { region: 'emea' },
      });
      assert.equal(success, 1);
      assert.equal(user_group.provided_id, `c-${run}`);
      assert.equal(user_group.name, 'Create');
      assert.deepEqual(user_group.mapping, { '40': '213' });
      assert.deepEqual(user_group.properties, { region: 'emea' });
      assert.equal(user_group.api_environment_tag, 'Customer');
      assert.equal(typeof user_group.token, 'string');
      assert.equal(typeof user_group.team_id, 'number');
    });

    it('createUserGroup on an existing id: 409 user_group_exists with the request id, sent once', async () => {
      const recorder = recordingFetch();
      const recording = new UserGroupServiceClient({ baseUrl, apiToken: token, fetch: recorder.fetch });
      await recording.createUserGroup({ user_group_id: `dup-${run}` });
      const err = await failure(recording.createUserGroup({ user_group_id: `dup-${run}` }, { requestId: `req-dup-${run}` }), 'user_group_exists', 409);
      assert.equal(err.requestId, `req-dup-${run}`);
      assert.ok(isUserGroupServiceError(err, 'user_group_exists'));
      assert.equal(recorder.calls.length, 2, 'a 409 is never retried');
    });

    it('getOrCreateUserGroup without mapping or properties uses GET with a query string', async () => {
      const recorder = recordingFetch();
      const recording = new UserGroupServiceClient({ baseUrl, apiToken: token, fetch: recorder.fetch });
      const first = await recording.getOrCreateUserGroup({ user_group_id: `goc-${run}`, name: 'Got', api_environment_tag: 'Testing' });
      assert.equal(first.new_user_group, true);
      assert.equal(first.user_group.name, 'Got');
      assert.equal(first.user_group.api_environment_tag, 'Testing');
      const second = await recording.getOrCreateUserGroup({ user_group_id: `goc-${run}`, name: 'Other', api_environment_tag: 'Testing' });
      assert.equal(second.new_user_group, false);
      assert.equal(second.user_group.token, first.user_group.token);
      assert.equal(second.user_group.name, 'Got', 'nothing is modified');
      assert.deepEqual(
        recorder.calls.map((c) => c.method),
        ['GET', 'GET'],
      );
      assert.equal(recorder.calls[0].url.searchParams.get('user_group_id'), `goc-${run}`);
      assert.equal(recorder.calls[0].body, undefined);
    });

    it('getOrCreateUserGroup with properties uses POST with X-HTTP-Method-Override: GET', async () => {
      const recorder = recordingFetch();
      const recording = new UserGroupServiceClient({ baseUrl, apiToken: token, fetch: recorder.fetch });
      const created = await recording.getOrCreateUserGroup({
        user_group_id: `gocp-${run}`,
        properties: { plan: 'pro', nested: { a: [1, 2] } },
        mapping: { '1': 2 },
      });
      assert.equal(created.new_user_group, true);
      assert.deepEqual(created.user_group.properties, { plan: 'pro', nested: { a: [1, 2] } });
      assert.deepEqual(created.user_group.mapping, { '1': 2 });
      const again = await recording.getOrCreateUserGroup({ user_group_id: `gocp-${run}`, properties: { plan: 'free' } });
      assert.equal(again.new_user_group, false);
      assert.deepEqual(again.user_group.properties, { plan: 'pro', nested: { a: [1, 2] } });
      assert.equal(recorder.calls[0].method, 'POST');
      assert.equal(recorder.calls[0].headers.get('x-http-method-override'), 'GET');
    });

    it('getOrCreateUserGroup accepts an integer user_group_id, stored as its decimal string', async () => {
      const id = 9_000_000 + crypto.randomInt(1_000_000);
      const created = await client.getOrCreateUserGroup({ user_group_id: id });
      assert.equal(created.user_group.provided_id, String(id));
    });

    it('updateUserGroup replaces the given fields; a missing group is 404 user_group_not_found', async () => {
      await client.createUserGroup({ user_group_id: `u-${run}`, properties: { a: 1 } });
      const { user_group } = await client.updateUserGroup({ user_group_id: `u-${run}`, name: 'Renamed', mapping: null, is_demo_group: true });
      assert.equal(user_group.name, 'Renamed');
      assert.equal(user_group.mapping, null);
      assert.equal(user_group.is_demo_group, true);
      assert.deepEqual(user_group.properties, { a: 1 });
      const err = await failure(client.updateUserGroup({ user_group_id: `u-missing-${run}`, name: 'x' }), 'user_group_not_found', 404);
      assert.match(err.requestId ?? '', /\S/);
    });

    it('rotateToken gives a new token; the old one is then 404 token_not_found', async () => {
      const { user_group } = await client.createUserGroup({ user_group_id: `r-${run}` });
      const rotated = await client.rotateToken({ current_token: user_group.token });
      assert.notEqual(rotated.user_group.token, user_group.token);
      assert.equal(rotated.user_group.team_id, user_group.team_id);
      await failure(client.rotateToken({ current_token: user_group.token }), 'token_not_found', 404);
    });

    it('deleteUserGroup answers the group without its token; again is 404', async () => {
      await client.createUserGroup({ user_group_id: `d-${run}`, api_environment_tag: 'Testing' });
      const deleted = await client.deleteUserGroup({ user_group_id: `d-${run}`, api_environment_tag: 'Testing' });
      assert.equal(deleted.user_group.provided_id, `d-${run}`);
      assert.equal('token' in deleted.user_group, false);
      await failure(client.deleteUserGroup({ user_group_id: `d-${run}`, api_environment_tag: 'Testing' }), 'user_group_not_found', 404);
    });

    it('listUserGroups pages with next_cursor; iterateUserGroups walks every page', async () => {
      const ids = Array.from({ length: 5 }, (_, i) => `list-${run}-${i}`);
      for (const id of ids) await client.createUserGroup({ user_group_id: id, api_environment_tag: 'Testing' });
      const page = await client.listUserGroups({ api_environment_tag: 'Testing', q: `list-${run}-`, limit: 2 });
      assert.equal(page.user_groups.length, 2);
      assert.equal(typeof page.next_cursor, 'string');
      const all: string[] = [];
      for await (const group of client.iterateUserGroups({ api_environment_tag: 'Testing', q: `list-${run}-`, limit: 2 })) {
        assert.equal('token' in group, false);
        all.push(group.provided_id);
      }
      assert.deepEqual(all, ids);
    });

    it('hierarchy: parent, level and tags on create; filters on list; rename and cascade delete, all typed', async () => {
      const company = await client.getOrCreateUserGroup({ user_group_id: `co-${run}`, properties: { region: 'emea' }, group_tags: ['vip'] });
      const user = await client.getOrCreateUserGroup({ user_group_id: `user-${run}`, parent_user_group_id: `co-${run}`, hierarchy_level: 'User' });
      assert.equal(user.user_group.parent_user_group_id, company.user_group.provided_id);
      assert.deepEqual(user.user_group.computed_properties, { region: 'emea' });
      const children = await client.listUserGroups({ parent_user_group_id: `co-${run}`, hierarchy_level: 'User' });
      assert.deepEqual(
        children.user_groups.map((g) => g.provided_id),
        [`user-${run}`],
      );
      assert.deepEqual(
        (await client.listUserGroups({ tag: 'vip', q: `co-${run}` })).user_groups.map((g) => g.provided_id),
        [`co-${run}`],
      );
      const renamed = await client.updateUserGroup({ user_group_id: `user-${run}`, new_user_group_id: `user-${run}-2`, group_tags: ['b', 'a'] });
      assert.deepEqual(renamed.user_group.group_tags, ['a', 'b']);
      await failure(client.deleteUserGroup({ user_group_id: `co-${run}` }), 'user_group_has_children', 409);
      const deleted = await client.deleteUserGroup({ user_group_id: `co-${run}`, cascade: true });
      assert.equal(deleted.deleted_count, 2);
    });

    it('tags: listGroupTags counts, createGroupTag, renameGroupTag merges, deleteGroupTag by name, iterateGroupTags walks every page; an unknown tag is a typed 404', async () => {
      const tag = (name: string) => `tag-${run}-${name}`;
      await client.upsertUserGroups({
        user_groups: [
          { user_group_id: `tg1-${run}`, group_tags: [tag('a'), tag('b')] },
          { user_group_id: `tg2-${run}`, group_tags: [tag('a')] },
        ],
      });
      const created = await client.createGroupTag({ name: tag('c') });
      assert.deepEqual(created.group_tag, { name: tag('c'), user_group_count: 0 });
      await failure(client.createGroupTag({ name: tag('a') }), 'group_tag_exists', 409);
      const page = await client.listGroupTags({ q: tag(''), limit: 2 });
      assert.deepEqual(page.group_tags, [
        { name: tag('a'), user_group_count: 2 },
        { name: tag('b'), user_group_count: 1 },
      ]);
      const walked: string[] = [];
      for await (const each of client.iterateGroupTags({ q: tag(''), limit: 1 })) walked.push(each.name);
      assert.deepEqual(walked, [tag('a'), tag('b'), tag('c')]);
      const renamed = await client.renameGroupTag({ name: tag('a'), new_name: tag('b') });
      assert.deepEqual([renamed.group_tag, renamed.merged, renamed.user_groups_changed], [{ name: tag('b'), user_group_count: 2 }, true, 2]);
      const deleted = await client.deleteGroupTag({ name: tag('b') });
      assert.deepEqual([deleted.name, deleted.user_groups_changed], [tag('b'), 2]);
      await failure(client.deleteGroupTag({ name: tag('b') }), 'group_tag_not_found', 404);
      await failure(client.renameGroupTag({ name: tag('b'), new_name: tag('z') }), 'group_tag_not_found', 404);
      assert.deepEqual((await client.lookupUserGroup({ user_group_id: `tg1-${run}` })).user_group.group_tags, []);
    });

    it('userGroupHistory lists the changes newest first', async () => {
      const { user_group } = await client.createUserGroup({ user_group_id: `h-${run}` });
      await client.updateUserGroup({ user_group_id: `h-${run}`, name: 'H2' });
      await client.rotateToken({ current_token: user_group.token });
      const history = await client.userGroupHistory({ user_group_id: `h-${run}` });
      assert.equal(history.provided_id, `h-${run}`);
      assert.deepEqual(history.entries.map((e) => e.action).slice(0, 3), ['user_group.rotate', 'user_group.update', 'user_group.create']);
      assert.deepEqual(history.entries[1].changed_fields, ['name']);
    });

    it('createEmbedToken and getEmbedContext: the dashboard side sees the group, never a token', async () => {
      const { user_group } = await client.createUserGroup({ user_group_id: `e-${run}`, name: 'Embedded', properties: { region: 'apac' } });
      const embed = await client.createEmbedToken({ user_group_id: `e-${run}`, expires_in_seconds: 600 });
      assert.equal(typeof embed.embed_token, 'string');
      assert.ok(Date.parse(embed.expires_at) > Date.now());
      const browser = new UserGroupServiceClient({ baseUrl }); // no API token: the embed side needs none
      for (const credential of [embed.embed_token, user_group.token]) {
        const context = await browser.getEmbedContext(credential);
        assert.equal(context.user_group.provided_id, `e-${run}`);
        assert.equal(context.variables.user_group_name, 'Embedded');
        assert.equal(context.variables.region, 'apac');
        assert.equal(JSON.stringify(context).includes(user_group.token), false);
      }
      await failure(browser.getEmbedContext('ugs_grp_not-a-token'), 'invalid_token', 401);
    });

    it('introspectEmbedToken and jwksUrl: a backend learns whether a token is active; a data API verifies it with the published keys', async () => {
      await client.createUserGroup({ user_group_id: `i-${run}`, properties: { region: 'emea' } });
      const { embed_token } = await client.createEmbedToken({ user_group_id: `i-${run}`, embed_id: 'sales' });
      const active = await client.introspectEmbedToken(embed_token);
      assert.equal(active.active, true);
      assert.equal(active.sub, `acme:Customer:i-${run}`);
      assert.equal(active.ugs_user_group_id, `i-${run}`);
      assert.equal(active.aud, 'sales');
      assert.deepEqual(active.ugs_variables, { user_group_id: `i-${run}`, user_group_name: `i-${run}`, region: 'emea' });
      assert.deepEqual(await client.introspectEmbedToken(`${embed_token}x`), { success: 1, active: false });

      assert.equal(client.jwksUrl().href, `${baseUrl}/.well-known/jwks.json`);
      assert.equal(jwksUrl('https://ugs.example.com/').href, 'https://ugs.example.com/.well-known/jwks.json');
      assert.equal(
        jwksUrl('https://ugs.example.com/', { alg: ['ES256', 'RS256', 'EdDSA'] }).href,
        'https://ugs.example.com/.well-known/jwks.json?alg=ES256%2CRS256%2CEdDSA',
      );
      const { payload } = await jwtVerify(embed_token, createRemoteJWKSet(client.jwksUrl()), { audience: 'sales', issuer: 'http://127.0.0.1:3000' });
      assert.equal(payload.sub, `acme:Customer:i-${run}`);
    });

    it('getJwks and getEmbedTokenDiscovery: the public key set and where to find it, without a token', async () => {
      const anonymous = new UserGroupServiceClient({ baseUrl });
      const { keys } = await anonymous.getJwks();
      assert.ok(keys.length >= 1);
      assert.deepEqual(
        keys.map((key) => [key.kty, key.alg, key.use]),
        keys.map(() => ['EC', 'ES256', 'sig']),
      );
      assert.deepEqual(await anonymous.getJwks({ alg: 'ES256,RS256,EdDSA' }), { keys }, 'no EdDSA key is published here: the same set');
      assert.deepEqual(await anonymous.getJwks({ alg: 'EdDSA' }), { keys: [] });
      const discovery = await anonymous.getEmbedTokenDiscovery();
      assert.deepEqual(discovery, {
        issuer: 'http://127.0.0.1:3000',
        jwks_uri: 'http://127.0.0.1:3000/.well-known/jwks.json',
        id_token_signing_alg_values_supported: ['ES256'],
      });
    });

    it('API tokens: an admin client lists, creates (value once), revokes and reads the history; escalation is a typed 403', async () => {
      const admin = new UserGroupServiceClient({ baseUrl, apiToken: (await t.issueToken({ scopes: ['read', 'admin'] })).token, retry: { maxAttempts: 1 } });
      const { token: value, api_token } = await admin.createApiToken({ name: `c-${run}`, scopes: ['read'] });
      assert.ok(value.startsWith(api_token.token_start));
      assert.ok((await admin.listApiTokens()).api_tokens.some((listed) => listed.id === api_token.id));
      await failure(admin.createApiToken({ scopes: ['write'] }), 'insufficient_scope', 403);
      const revoked = await admin.revokeApiToken(api_token.id);
      assert.equal(revoked.api_token.status, 'revoked');
      await failure(admin.revokeApiToken(api_token.id), 'api_token_revoked', 409);
      const { entries } = await admin.getApiTokenHistory({ limit: 2 });
      assert.deepEqual(
        entries.map((entry) => [entry.action, entry.api_token_id]),
        [
          ['api_token.revoke', api_token.id],
          ['api_token.issue', api_token.id],
        ],
      );
      await failure(client.listApiTokens(), 'insufficient_scope', 403);
      assert.deepEqual((await admin.getCurrentApiToken()).api_token.scopes, ['admin', 'read']);
    });

    it('400 validation_failed carries details naming the field', async () => {
      const err = await failure(client.createUserGroup({ user_group_id: `v-${run}`, name: '' }), 'validation_failed', 400);
      assert.deepEqual(err.details, [{ field: 'name', issue: 'too_short' }]);
      const unknown = await failure(client.createUserGroup({ user_group_id: `v-${run}`, user_groupid: 'typo' } as never), 'validation_failed', 400);
      assert.deepEqual(unknown.details, [{ field: 'user_groupid', issue: 'unknown_field' }]);
    });

    it('401: an unknown API token, and a user group token where an API token belongs', async () => {
      await failure(new UserGroupServiceClient({ baseUrl, apiToken: 'nonsense' }).listUserGroups(), 'invalid_api_token', 401);
      const { user_group } = await client.createUserGroup({ user_group_id: `k-${run}` });
      await failure(new UserGroupServiceClient({ baseUrl, apiToken: user_group.token }).listUserGroups(), 'wrong_token_kind', 401);
    });

    it('a call that needs an API token fails fast without one', async () => {
      await assert.rejects(new UserGroupServiceClient({ baseUrl }).listUserGroups(), TypeError);
    });

    it('403: insufficient_scope and environment_forbidden', async () => {
      const reader = new UserGroupServiceClient({ baseUrl, apiToken: (await t.issueToken({ scopes: ['read'] })).token });
      await failure(reader.createUserGroup({ user_group_id: `s-${run}` }), 'insufficient_scope', 403);
      await failure(reader.getOrCreateUserGroup({ user_group_id: `s-${run}` }), 'insufficient_scope', 403);
      const testingOnly = new UserGroupServiceClient({ baseUrl, apiToken: (await t.issueToken({ env: 'Testing', defaultEnv: 'Testing' })).token });
      await failure(testingOnly.createUserGroup({ user_group_id: `s-${run}`, api_environment_tag: 'Customer' }), 'environment_forbidden', 403);
    });

    it('413 payload_too_large for a body over 256 KiB', async () => {
      await failure(client.createUserGroup({ user_group_id: `big-${run}`, properties: { blob: 'x'.repeat(300 * 1024) } }), 'payload_too_large', 413);
    });
  });
}

interface StubRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

/** A server that answers each request with the next scripted reply (the last one repeats). */
async function stubServer(replies: Array<(req: http.IncomingMessage, res: http.ServerResponse) => void>) {
  const seen: StubRequest[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    const reply = replies[Math.min(seen.length - 1, replies.length - 1)];
    req.on('end', () => reply(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': 'req_stub', ...headers });
    res.end(JSON.stringify(body));
  };
const errorReply = (status: number, code: string, headers: Record<string, string> = {}) =>
  json(status, { success: 0, error: { code, message: code, request_id: 'req_stub' } }, headers);
const unavailable = (retryAfter: string) => errorReply(503, 'unavailable', { 'retry-after': retryAfter });
const rateLimited = (retryAfter: string) => errorReply(429, 'rate_limited', { 'retry-after': retryAfter });
const listPage = json(200, { success: 1, user_groups: [], next_cursor: null });
const created = json(201, { success: 1, user_group: { provided_id: 'x' } });
const hangUp = (req: http.IncomingMessage) => req.socket.destroy();

describe('client retries, deadline and error translation (stub server)', () => {
  const stubs: Array<{ close(): Promise<void> }> = [];
  after(async () => {
    await Promise.all(stubs.map((s) => s.close()));
  });
  async function stub(...replies: Parameters<typeof stubServer>[0]) {
    const s = await stubServer(replies);
    stubs.push(s);
    return s;
  }

  it('503 with Retry-After: waits that long, then succeeds', async () => {
    const s = await stub(unavailable('1'), listPage);
    const client = new UserGroupServiceClient({ baseUrl: s.baseUrl, apiToken: 'ugs_api_x' });
    const started = Date.now();
    const page = await client.listUserGroups();
    const elapsed = Date.now() - started;
    assert.deepEqual(page.user_groups, []);
    assert.equal(s.seen.length, 2);
    assert.ok(elapsed >= 950, `waited ${elapsed} ms for Retry-After: 1`);
  });

  it('429 is retried even for a create (the service refused it before doing anything)', async () => {
    const s = await stub(rateLimited('0'), created);
    const client = new UserGroupServiceClient({ baseUrl: s.baseUrl, apiToken: 'ugs_api_x' });
    const result = await client.createUserGroup({ user_group_id: 'x' });
    assert.equal(result.user_group.provided_id, 'x');
    assert.deepEqual(
      s.seen.map((r) => r.method),
      ['POST', 'POST'],
    );
  });

  it('attempts are bounded: the last 503 is thrown with its Retry-After', async () => {
    const s = await stub(unavailable('0'));
    const client = new UserGroupServiceClient({ baseUrl: s.baseUrl, apiToken: 'ugs_api_x', retry: { maxAttempts: 4 } });
    const err = await failure(client.listUserGroups(), 'unavailable', 503);
    assert.equal(s.seen.length, 4);
    assert.equal(err.retryAfterSeconds, 0);
    assert.equal(err.requestId, 'req_stub');
  });

  it('a Retry-After longer than maxDelayMs is not waited for', async () => {
    const s = await stub(rateLimited('120'), listPage);
    const client = new UserGroupServiceClient({ baseUrl: s.baseUrl, apiToken: 'ugs_api_x', retry: { maxDelayMs: 5000 } });
    const err = await failure(client.listUserGroups(), 'rate_limited', 429);
    assert.equal(err.retryAfterSeconds, 120);
    assert.equal(s.seen.length, 1);
  });

  it('without Retry-After, backs off exponentially with jitter', async () => {
    const s = await stub(errorReply(503, 'unavailable'), errorReply(503, 'unavailable'), listPage);
    const client = new UserGroupServiceClient({ baseUrl: s.baseUrl, apiToken: 'ugs_api_x', retry: { baseDelayMs: 20 } });
    await client.listUserGroups();
    assert.equal(s.seen.length, 3);
    const options = { ...DEFAULT_RETRY, baseDelayMs: 100, maxDelayMs: 1000 };
    assert.equal(
      retryDelayMs(1, undefined, options, () => 0),
      50,
    );
    assert.equal(
      retryDelayMs(1, undefined, options, () => 1),
      100,
    );
    assert.equal(
      retryDelayMs(3, undefined, options, () => 0),
      200,
    );
    assert.equal(
      retryDelayMs(3, undefined, options, () => 1),
      400,
    );
    assert.equal(
      retryDelayMs(10, undefined, options, () => 1),
      1000,
      'capped at maxDelayMs',
    );
    assert.equal(retryDelayMs(1, 3000, options), 3000, 'Retry-After wins');
    assert.equal(parseRetryAfter('2'), 2000);
    const fromDate = parseRetryAfter(new Date(Date.now() + 5000).toUTCString());
    assert.ok(fromDate !== undefined && fromDate > 3000 && fromDate <= 5000, `HTTP-date Retry-After: ${fromDate}`);
    assert.equal(parseRetryAfter(null), undefined);
  });

  it('other errors are not retried (500, 409)', async () => {
    const s = await stub(errorReply(500, 'internal_error'), listPage);
    const client = new UserGroupServiceClient({ baseUrl: s.baseUrl, apiToken: 'ugs_api_x' });
    await failure(client.listUserGroups(), 'internal_error', 500);
    assert.equal(s.seen.length, 1);
  });

  it('a lost connection is retried for idempotent calls, never for create or rotate', async () => {
    const s = await stub(hangUp, listPage);
    const client = new UserGroupServiceClient({ baseUrl: s.baseUrl, apiToken: 'ugs_api_x' });
    await client.listUserGroups();
    assert.equal(s.seen.length, 2);

    const c = await stub(hangUp);
    const creator = new UserGroupServiceClient({ baseUrl: c.baseUrl, apiToken: 'ugs_api_x' });
    await failure(creator.createUserGroup({ user_group_id: 'x' }), 'network_error', 0);
    await failure(creator.rotateToken({ current_token: 'ugs_grp_x' }), 'network_error', 0);
    assert.equal(c.seen.length, 2, 'one attempt each');
  });

  it('timeoutMs bounds the whole call: code timeout', async () => {
    const s = await stub(() => undefined); // never answers
    const client = new UserGroupServiceClient({ baseUrl: s.baseUrl, apiToken: 'ugs_api_x', timeoutMs: 200 });
    const started = Date.now();
    await failure(client.listUserGroups(), 'timeout', 0);
    assert.ok(Date.now() - started < 2000);
    // A per-call timeout also cuts a Retry-After wait short.
    const r = await stub(unavailable('1'), listPage);
    const retrying = new UserGroupServiceClient({ baseUrl: r.baseUrl, apiToken: 'ugs_api_x' });
    await failure(retrying.listUserGroups({}, { timeoutMs: 300 }), 'unavailable', 503);
    assert.equal(r.seen.length, 1, 'a wait past the deadline is not started');
  });

  it("the caller's AbortSignal cancels the call: code aborted", async () => {
    const s = await stub(() => undefined);
    const client = new UserGroupServiceClient({ baseUrl: s.baseUrl, apiToken: 'ugs_api_x' });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    await failure(client.listUserGroups({}, { signal: controller.signal }), 'aborted', 0);
  });

  it('a response that is not the service envelope is invalid_response', async () => {
    const s = await stub((_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<html>bad gateway</html>');
    });
    const client = new UserGroupServiceClient({ baseUrl: s.baseUrl, apiToken: 'ugs_api_x' });
    await failure(client.listUserGroups(), 'invalid_response', 502);
  });

  it('a refused connection is network_error', async () => {
    const s = await stub(listPage);
    await s.close();
    const client = new UserGroupServiceClient({ baseUrl: s.baseUrl, apiToken: 'ugs_api_x', retry: { maxAttempts: 2, baseDelayMs: 1 } });
    await failure(client.listUserGroups(), 'network_error', 0);
  });
});
