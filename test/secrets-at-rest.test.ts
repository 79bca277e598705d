// Secrets at rest and in logs (docs/api.md, "Tokens"): a copy of the database reveals no
// usable API token or user group token, and the server's output never holds a token, while
// its request logs are JSON lines with request id, route, status and latency.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { createTestDatabase, type Backend, type TestDatabase } from './helpers/backends.ts';
import { forEachBackend } from './helpers/harness.ts';
import { eventually } from './helpers/wait.ts';
import { httpRequest, runUgs, spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';

const WINDOW = 12; // characters of a token's random part that may never appear anywhere

/** The random part of a token (`ugs_api_<43 random><6 checksum>`), where its secrecy lives. */
const randomPartOf = (token: string) => token.slice(token.lastIndexOf('_') + 1, token.lastIndexOf('_') + 1 + 43);

/** Where in `haystack` a token, or any WINDOW characters of its random part, appears. */
function findLeaks(haystack: Buffer, tokens: Iterable<string>): string[] {
  const leaks: string[] = [];
  for (const token of tokens) {
    if (haystack.includes(token)) {
      leaks.push(`full token ${token.slice(0, 12)}…`);
      continue;
    }
    const random = randomPartOf(token);
    for (let i = 0; i + WINDOW <= random.length; i++) {
      if (haystack.includes(random.slice(i, i + WINDOW))) {
        leaks.push(`characters ${i}-${i + WINDOW} of the random part of ${token.slice(0, 12)}…`);
        break;
      }
    }
  }
  return leaks;
}

/** Every byte of the database: the SQLite file with its -wal and -shm, or a pg_dump. */
async function databaseBytes(backend: Backend, url: string): Promise<Buffer> {
  if (backend === 'sqlite') {
    const file = url.slice('sqlite:'.length);
    return Buffer.concat([file, `${file}-wal`, `${file}-shm`].filter((f) => fs.existsSync(f)).map((f) => fs.readFileSync(f)));
  }
  const { stdout } = await promisify(execFile)('pg_dump', ['--no-owner', url], { maxBuffer: 256 * 1024 * 1024, encoding: 'buffer' });
  return stdout as unknown as Buffer;
}

forEachBackend('secrets at rest and in logs', (backend) => {
  let database: TestDatabase;
  let server: ServerProcess;
  const apiTokens: string[] = [];
  const groupTokens = new Set<string>();
  const responses: { requestId: string; status: number }[] = [];
  let whileRunning: Buffer;
  let output = '';
  let exit: { code: number | null; signal: NodeJS.Signals | null };

  async function call(method: string, path: string, options: Parameters<typeof httpRequest>[3] = {}) {
    const r = await httpRequest(server.baseUrl, method, path, options);
    responses.push({ requestId: String(r.headers['x-request-id']), status: r.status });
    const group = typeof r.body === 'object' && r.body ? r.body.user_group : undefined;
    if (group?.token) groupTokens.add(group.token);
    return r;
  }

  // One run of the server that handles tokens every way it can: in Authorization headers,
  // in request bodies (rotation), and in responses. Then it is stopped and its output kept.
  before(async () => {
    database = await createTestDatabase(backend);
    const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'), UGS_BOOTSTRAP: 'false' };
    for (const args of [
      ['--account', 'acme'],
      ['--account', 'acme', '--scopes', 'read'],
      ['--account', 'other-co', '--env', 'Testing'],
    ]) {
      const issued = await issueTokenWithCli({ DATABASE_URL: database.url }, args);
      apiTokens.push(issued.token);
    }
    const [writer, reader, other] = apiTokens;

    server = await spawnServer(env);
    const closed = new Promise((resolve) => server.child.once('close', resolve));

    for (let i = 0; i < 10; i++) {
      assert.equal((await call('POST', '/api/user', { token: writer, body: { user_group_id: `g${i}`, properties: { i } } })).status, 201);
    }
    assert.equal((await call('GET', '/api/user', { token: writer, body: { user_group_id: 'g-goc' } })).status, 201);
    assert.equal((await call('GET', '/api/user?user_group_id=g0', { token: reader })).status, 200);
    assert.equal((await call('GET', '/api/user', { token: other, body: { user_group_id: 'g-other' } })).status, 201);

    // Rotations: the current token travels in the body; some keep a grace period.
    for (let i = 0; i < 6; i++) {
      const current = (await call('GET', '/api/user', { token: writer, body: { user_group_id: `g${i}` } })).body.user_group.token;
      const rotated = await call('POST', '/api/user', { token: writer, body: { current_token: current, ...(i % 2 ? { grace_period_seconds: 600 } : {}) } });
      assert.equal(rotated.status, 200);
    }
    // Refused uses of tokens: a stale token in a body, a group token as an API token, the
    // read-only token asking to write, another account's token, a revoked token.
    const stale = [...groupTokens][0];
    assert.equal((await call('POST', '/api/user', { token: writer, body: { current_token: stale } })).status, 404);
    assert.equal((await call('POST', '/api/user', { token: other, body: { current_token: [...groupTokens].at(-1) } })).status, 404);
    assert.equal((await call('GET', '/api/users', { token: stale })).status, 401);
    assert.equal((await call('POST', '/api/user', { token: reader, body: { current_token: stale } })).status, 403);
    assert.equal((await call('POST', '/api/user', { token: writer, body: { current_token: stale, name: 'x' } })).status, 400);
    assert.equal((await call('PUT', '/api/user', { token: writer, body: { user_group_id: 'g1', user_groupid: stale } })).status, 400);
    assert.equal((await call('GET', '/api/users', { token: `${writer.slice(0, -1)}${writer.endsWith('x') ? 'y' : 'x'}` })).status, 401); // a wrong checksum
    // The embed side: a user group token as a Bearer credential.
    const current = (await call('GET', '/api/user', { token: writer, body: { user_group_id: 'g9' } })).body.user_group.token;
    const embed = await call('GET', '/api/embed/context', { headers: { authorization: `Bearer ${current}` } });
    assert.equal(embed.status, 200, JSON.stringify(embed.body));

    const revoked = await issueTokenWithCli({ DATABASE_URL: database.url });
    apiTokens.push(revoked.token);
    assert.equal((await call('GET', '/api/users', { token: revoked.token })).status, 200);
    assert.equal((await runUgs(['token', 'revoke', String(revoked.id)], { DATABASE_URL: database.url })).code, 0);
    await eventually('the revoked token refused', async () => (await call('GET', '/api/users', { token: revoked.token })).status === 401);

    assert.ok(groupTokens.size >= 18, `collected ${groupTokens.size} user group tokens`);
    whileRunning = await databaseBytes(backend, database.url);
    exit = await server.stop('SIGTERM');
    await closed; // every byte of stdout and stderr has been read
    output = server.output();
  });

  after(async () => {
    await server?.stop('SIGKILL');
    await database?.drop();
  });

  it('the leak search finds a token, or a piece of its random part, when one is there', () => {
    const token = apiTokens[0];
    assert.equal(findLeaks(Buffer.from(`x${token}x`), [token]).length, 1);
    assert.equal(findLeaks(Buffer.from(`..${randomPartOf(token).slice(20, 20 + WINDOW)}..`), [token]).length, 1);
    assert.equal(findLeaks(Buffer.from(token.slice(0, 'ugs_api_'.length + 6)), [token]).length, 0, 'the listed start is not a leak');
  });

  it('the database, read while the server runs, holds no API token or user group token', () => {
    assert.ok(whileRunning.length > 0);
    assert.deepEqual(findLeaks(whileRunning, apiTokens), []);
    assert.deepEqual(findLeaks(whileRunning, groupTokens), []);
  });

  it('the database, read after the server stopped, holds no API token or user group token', async () => {
    const bytes = await databaseBytes(backend, database.url);
    // The dump or file really holds the data (so the search above means something).
    assert.ok(bytes.includes('g-other'), 'the copy holds the user groups');
    assert.ok(bytes.includes('ugs_api_'), 'the copy holds the non-secret starts of API tokens');
    assert.deepEqual(findLeaks(bytes, apiTokens), []);
    assert.deepEqual(findLeaks(bytes, groupTokens), []);
  });

  it('the server’s whole stdout and stderr hold no token that went through it', () => {
    assert.equal(exit.code, 0, output);
    const bytes = Buffer.from(output);
    assert.deepEqual(findLeaks(bytes, apiTokens), []);
    assert.deepEqual(findLeaks(bytes, groupTokens), []);
    assert.doesNotMatch(output, /authorization/i, 'no Authorization header is logged');
  });

  it('logs are JSON lines, one per request, with request_id, route, status and latency', () => {
    const lines = output.split('\n').filter((l) => l.trim() !== '');
    const entries = lines.map((line) => {
      try {
        return JSON.parse(line);
      } catch {
        assert.fail(`a log line is not JSON: ${line}`);
      }
    });
    const requests = entries.filter((e) => e.msg === 'request');
    const byId = new Map(requests.map((e) => [e.request_id, e]));
    for (const r of responses) {
      const entry = byId.get(r.requestId);
      assert.ok(entry, `a log line for request ${r.requestId}`);
      assert.equal(entry.status, r.status);
      assert.equal(typeof entry.route, 'string');
      assert.equal(typeof entry.ms, 'number');
      assert.ok(entry.ms >= 0);
      assert.equal(typeof entry.method, 'string');
      assert.equal(typeof entry.level, 'number');
      assert.equal(typeof entry.time, 'number');
    }
    assert.equal(requests.filter((e) => responses.some((r) => r.requestId === e.request_id)).length, responses.length, 'one line a request');
    assert.ok(requests.some((e) => e.route === '/api/user' && e.status === 201));
    assert.ok(requests.some((e) => e.route === '/api/embed/context'));
    for (const e of requests) assert.ok(!('url' in e) || !String(e.url).includes('?'), 'no query strings in logs');
  });
});
