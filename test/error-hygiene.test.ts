// Error hygiene: what anyone can send without a token must not look like an outage, every
// /api answer is uncacheable, no log line at any level holds a token, text is well-formed
// Unicode, an embed token has one spelling, and the method override and request ids cannot
// be used to mislead.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { startTestApp, type TestApp } from './helpers/harness.ts';
import { httpRequest, spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';

/** Sends the headers and part of a body, then hangs up. */
function hangUpMidBody(baseUrl: string, head: string): Promise<void> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(head);
      setTimeout(() => socket.destroy(), 100);
    });
    socket.on('close', () => resolve());
    socket.on('error', () => undefined);
  });
}

const logLines = (output: string) =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);

for (const backend of BACKENDS) {
  describe(`[${backend}] error hygiene on real processes`, () => {
    let database: TestDatabase;
    let server: ServerProcess;
    let apiToken: string;

    before(async () => {
      database = await createTestDatabase(backend);
      const issued = await issueTokenWithCli({ DATABASE_URL: database.url });
      apiToken = issued.token;
      server = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'), LOG_LEVEL: 'trace' });
    });
    after(async () => {
      await server?.stop('SIGKILL');
      await database?.drop();
    });

    it('hang-up: a client that closes mid-body is not a database outage: no 503, no warning', async () => {
      const body = 'Content-Type: application/json\r\nContent-Length: 500\r\n';
      await hangUpMidBody(server.baseUrl, `POST /api/user HTTP/1.1\r\nHost: x\r\nAuthorization: Token ${apiToken}\r\n${body}\r\n{"user_group_id":`);
      await hangUpMidBody(server.baseUrl, `GET /api/user HTTP/1.1\r\nHost: x\r\nAuthorization: Token ${apiToken}\r\n${body}\r\n{"user_group_id":`);
      await hangUpMidBody(server.baseUrl, `DELETE /api/user HTTP/1.1\r\nHost: x\r\nAuthorization: Token ${apiToken}\r\n${body}\r\n{"user_group_id":`);
      assert.equal((await httpRequest(server.baseUrl, 'GET', '/healthz')).status, 200);
      await server.logsUpToNow(); // the log is written in batches
      const lines = logLines(server.output());
      assert.equal(lines.filter((l) => /database/.test(String(l.msg)) && Number(l.level) >= 40).length, 0, 'no database warning');
      const served = lines.filter((l) => l.msg === 'request' && l.route === '/api/user');
      for (const line of served) assert.ok(Number(line.status) < 500, `status ${line.status}`);
    });

    it('logs: at LOG_LEVEL=trace no API token, user group token or embed token reaches any log line', async () => {
      const base = server.baseUrl;
      const created = await httpRequest(base, 'POST', '/api/user', { token: apiToken, body: { user_group_id: 'logged' } });
      const groupToken: string = created.body.user_group.token;
      const rotated = await httpRequest(base, 'POST', '/api/user', { token: apiToken, body: { current_token: groupToken, grace_period_seconds: 60 } });
      const newToken: string = rotated.body.user_group.token;
      const embed = await httpRequest(base, 'POST', '/api/embed_token', { token: apiToken, body: { user_group_id: 'logged' } });
      const embedToken: string = embed.body.embed_token;
      await httpRequest(base, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${embedToken}` } });
      await httpRequest(base, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${groupToken}` } });
      await httpRequest(base, 'GET', '/api/embed/context', { headers: { authorization: `Token ${apiToken}` } });
      await httpRequest(base, 'GET', `/api/user?user_group_id=logged`, { headers: { authorization: `Token ${newToken}` } });
      // Requests the HTTP layer refuses, with a token in them: malformed, oversized headers.
      for (const raw of [
        `GET /api/users HTTP/1.1\r\nHost: x\r\nAuthorization: Token ${apiToken}\r\nBad Header\r\n\r\n`,
        `GET /api/users HTTP/1.1\r\nHost: x\r\nAuthorization: Token ${apiToken}\r\nX-Pad: ${'p'.repeat(20_000)}\r\n\r\n`,
        `GET /api/embed/context HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${embedToken}\r\nContent-Length: abc\r\n\r\n`,
      ]) {
        await hangUpMidBody(base, raw);
      }
      await server.logsUpToNow();
      const output = server.output();
      assert.ok(logLines(output).some((l) => Number(l.level) === 10 || Number(l.level) === 20) || output.includes('"msg":"request"'), 'the server logged');
      for (const secret of [apiToken, groupToken, newToken, embedToken]) {
        assert.ok(!output.includes(secret), 'a token in the logs');
        assert.ok(!output.includes(secret.slice(8, 40)), 'part of a token in the logs');
      }
    });
  });

  describe(`[${backend}] error hygiene over HTTP`, () => {
    let t: TestApp;
    let token: string;

    before(async () => {
      t = await startTestApp(backend);
      token = (await t.issueToken()).token;
    });
    after(() => t.close());

    it('no-store: every /api answer carries Cache-Control: no-store, 401, 404, 405 and embed errors included', async () => {
      const answers = [
        await t.request('GET', '/api/users'),
        await t.request('GET', '/api/users', { token: 'ugs_api_nope' }),
        await t.request('GET', '/api/nowhere', { token }),
        await t.request('PATCH', '/api/user', { token }),
        await t.request('GET', '/api/embed/context'),
        await t.request('GET', '/api/embed/nowhere'),
        await t.request('POST', '/api/embed/context'),
        await t.request('GET', '/api/users', { token }),
      ];
      for (const answer of answers) assert.equal(answer.headers['cache-control'], 'no-store', `${answer.status} ${answer.text}`);
    });

    it('unicode: a lone surrogate in an id, a name, an embed_id or q answers 400 validation_failed and changes nothing', async () => {
      const token = (await t.issueToken({ account: 'unicode' })).token;
      const refused = [
        await t.request('POST', '/api/user', { token, rawBody: `{"user_group_id":"a\\ud800"}` }),
        await t.request('POST', '/api/user', { token, rawBody: `{"user_group_id":"ok-name","name":"b\\udfff"}` }),
        await t.request('GET', '/api/user', { token, rawBody: `{"user_group_id":"c\\ud800"}` }),
        await t.request('GET', '/api/user?user_group_id=d%ED%A0%80', { token }),
        await t.request('GET', '/api/user?user_group_id=d%ED', { token }),
        await t.request('GET', '/api/users?q=e%ED%A0%80', { token }),
        await t.request('POST', '/api/embed_token', { token, rawBody: `{"user_group_id":"f","embed_id":"g\\ud800"}` }),
        await t.request('PUT', '/api/user', { token, rawBody: `{"user_group_id":"h\\ud800","name":"x"}` }),
      ];
      for (const answer of refused) {
        assert.equal(answer.status, 400, answer.text);
        assert.equal(answer.body.error.code, 'validation_failed', answer.text);
      }
      const listed = await t.request('GET', '/api/users', { token });
      assert.deepEqual(listed.body.user_groups, [], 'nothing was created');
      // A well-formed pair (an emoji) is fine.
      assert.equal((await t.request('POST', '/api/user', { token, rawBody: `{"user_group_id":"smile-\\ud83d\\ude00"}` })).status, 201);
    });

    it('embed tokens: one spelling: a variant in the unused bits of a base64url part is refused', async () => {
      assert.equal((await t.request('POST', '/api/user', { token, body: { user_group_id: 'spelled' } })).status, 201);
      const issued = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: 'spelled' } });
      const embedToken: string = issued.body.embed_token;
      assert.equal((await t.request('GET', '/api/embed/context', { bearer: embedToken })).status, 200);
      const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
      const parts = embedToken.split('.');
      let variants = 0;
      for (const [index, part] of parts.entries()) {
        const unusedBits = part.length % 4 === 2 ? 4 : part.length % 4 === 3 ? 2 : 0;
        if (unusedBits === 0) continue;
        const last = alphabet.indexOf(part.at(-1)!);
        for (let low = 1; low < 2 ** unusedBits; low++) {
          const respelled = [...parts];
          respelled[index] = part.slice(0, -1) + alphabet[last ^ low];
          assert.equal(Buffer.from(respelled[index], 'base64url').toString('base64url'), part, 'the same bytes');
          const answer = await t.request('GET', '/api/embed/context', { bearer: respelled.join('.') });
          assert.equal(answer.status, 401, `variant of part ${index}`);
          variants++;
        }
      }
      assert.ok(variants > 0, 'the token has parts with unused bits');
    });

    it('method override: anything but GET on POST /api/user answers 400 validation_failed naming the header', async () => {
      const token = (await t.issueToken({ account: 'override' })).token;
      const cases: [string, string, string][] = [
        ['GET', '/api/user?user_group_id=x', 'DELETE'],
        ['PUT', '/api/user', 'GET'],
        ['DELETE', '/api/user?user_group_id=x', 'GET'],
        ['GET', '/api/users', 'POST'],
        ['POST', '/api/embed_token', 'GET'],
        ['POST', '/api/user', 'DELETE'],
      ];
      for (const [method, path, override] of cases) {
        const answer = await t.request(method, path, {
          token,
          headers: { 'x-http-method-override': override },
          body: method === 'PUT' || method === 'POST' ? { user_group_id: 'x', name: 'n' } : undefined,
        });
        assert.equal(answer.status, 400, `${method} ${path} with ${override}: ${answer.text}`);
        assert.equal(answer.body.error.code, 'validation_failed');
        assert.deepEqual(answer.body.error.details, [{ field: 'X-HTTP-Method-Override', issue: 'not_allowed' }]);
      }
      assert.equal((await t.request('GET', '/api/users', { token })).body.user_groups.length, 0, 'nothing was created');
      const honoured = await t.request('POST', '/api/user', { token, headers: { 'x-http-method-override': 'GET' }, body: { user_group_id: 'via-override' } });
      assert.equal(honoured.status, 201);
    });

    it("request ids: a caller's X-Request-Id that looks like one the server issues (req_…) is replaced", async () => {
      const answer = await t.request('GET', '/api/users', { token, headers: { 'x-request-id': 'req_000000000000000001' } });
      assert.notEqual(answer.headers['x-request-id'], 'req_000000000000000001');
      assert.match(String(answer.headers['x-request-id']), /^req_[0-9a-f]{12}/);
      const kept = await t.request('GET', '/api/users', { token, headers: { 'x-request-id': 'caller-req_1' } });
      assert.equal(kept.headers['x-request-id'], 'caller-req_1');
    });
  });
}
