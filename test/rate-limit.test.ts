import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { Redis } from 'ioredis';
import { BACKENDS } from './helpers/backends.ts';
import {
  buildTestApp,
  forEachBackend,
  issueTestToken,
  LogCapture,
  newSecretKey,
  openTestDatabase,
  type BuiltApp,
  type AnyAnswer,
  type HttpResult,
  type OpenDatabase,
} from './helpers/harness.ts';
import { httpRequest, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { redisAnswers } from './helpers/services.ts';
import { hashToken } from '../src/auth/token-format.ts';
import { userGroupTokenAccess } from '../src/auth/route-access.ts';

const REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';
const EMBED_CONTEXT = '/api/embed/context';
const EMBED_PROBE = '/api/embed/rate-limit-probe';

function assertEnvelope(res: HttpResult<AnyAnswer>, code: string): void {
  assert.equal(res.body.success, 0);
  assert.equal(res.body.error.code, code);
  assert.equal(res.body.error.request_id, res.headers['x-request-id']);
}

/** A port nothing listens on: bound once by us, then released. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function deleteKeys(redis: Redis, prefix: string): Promise<string[]> {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  return keys;
}

/** The embed route if it exists; otherwise a stand-in under /api/embed/, which the limit covers the same way. */
function addEmbedProbe(built: BuiltApp): void {
  built.app.get(EMBED_PROBE, { schema: userGroupTokenAccess() }, async () => ({ success: 1 }));
}

forEachBackend('rate limits on one instance', (backend) => {
  let db: OpenDatabase;
  let t: BuiltApp;
  before(async () => {
    db = await openTestDatabase(backend);
    t = await buildTestApp(db, {
      config: { rateLimitMax: 3, rateLimitWindowMs: 60_000, embedRateLimitMax: 2, embedRateLimitWindowMs: 30_000 },
    });
    addEmbedProbe(t);
    await t.app.ready();
  });
  after(async () => {
    await t.app.close();
    await db.close();
  });

  it('management: the budget of one API token runs out with 429 rate_limited, Retry-After and RateLimit fields', async () => {
    const { token } = await issueTestToken(db.handle);
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await t.request('GET', '/api/users', { token });
      assert.equal(res.status, 200);
      assert.equal(res.headers['ratelimit-policy'], '"api-token";q=3;w=60');
      remaining.push(String(res.headers['ratelimit']).replace(/;t=\d+$/, ''));
      assert.match(String(res.headers['ratelimit']), /^"api-token";r=\d+;t=(60|59)$/);
    }
    assert.deepEqual(remaining, ['"api-token";r=2', '"api-token";r=1', '"api-token";r=0']);
    const limited = await t.request('PUT', '/api/user', { token, body: { user_group_id: 'x', name: 'y' } });
    assert.equal(limited.status, 429);
    assertEnvelope(limited, 'rate_limited');
    const retryAfter = Number(limited.headers['retry-after']);
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    assert.equal(limited.headers['ratelimit-policy'], '"api-token";q=3;w=60');
    assert.match(String(limited.headers['ratelimit']), /^"api-token";r=0;t=\d+$/);
    assert.equal(limited.headers['cache-control'], 'no-store');
    // A refused request changed nothing: the group named in the refused PUT does not exist.
    const other = await issueTestToken(db.handle);
    const lookup = await t.request('GET', '/api/users', { token: other.token });
    assert.equal(lookup.body.user_groups.length, 0);
  });

  it('management: each API token has its own budget', async () => {
    const first = await issueTestToken(db.handle);
    const second = await issueTestToken(db.handle);
    for (let i = 0; i < 3; i++) assert.equal((await t.request('GET', '/api/users', { token: first.token })).status, 200);
    assert.equal((await t.request('GET', '/api/users', { token: first.token })).status, 429);
    const res = await t.request('GET', '/api/users', { token: second.token });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['ratelimit']), /^"api-token";r=2;/);
  });

  it('management: requests refused by authentication never count and never see 429', async () => {
    const { token } = await issueTestToken(db.handle);
    const wrong = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
    for (let i = 0; i < 10; i++) {
      const res = await t.request('GET', '/api/users', { token: wrong });
      assert.equal(res.status, 401);
      assert.equal(res.headers['ratelimit'], undefined);
    }
    assert.equal((await t.request('GET', '/api/users', { token })).status, 200);
  });

  it('operational routes are not limited', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await t.request('GET', '/healthz');
      assert.equal(res.status, 200);
      assert.equal(res.headers['ratelimit'], undefined);
    }
  });

  it('embed: each user group token has its own budget, apart from the API token budget', async () => {
    const { token } = await issueTestToken(db.handle);
    const useRealRoute = t.app.hasRoute({ method: 'GET', url: EMBED_CONTEXT });
    const groupTokens: string[] = [];
    for (const id of ['embed-a', 'embed-b']) {
      const res = await t.request('POST', '/api/user', { token, body: { user_group_id: id } });
      assert.equal(res.status, 201);
      groupTokens.push(res.body.user_group.token);
    }
    const path = useRealRoute ? EMBED_CONTEXT : EMBED_PROBE;
    for (let i = 0; i < 2; i++) {
      const res = await t.request('GET', path, { bearer: groupTokens[0] });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers['ratelimit-policy'], '"embed";q=2;w=30');
    }
    const limited = await t.request('GET', path, { bearer: groupTokens[0] });
    assert.equal(limited.status, 429);
    assertEnvelope(limited, 'rate_limited');
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    const other = await t.request('GET', path, { bearer: groupTokens[1] });
    assert.equal(other.status, 200);
    assert.match(String(other.headers['ratelimit']), /^"embed";r=1;t=\d+$/);
  });
});

// Like the PostgreSQL half: a plain `npm test` on a machine without Redis skips this loudly;
// CI (CI=true) always runs it, so a missing Redis fails there.
const redisReachable = await redisAnswers(REDIS_URL);
const redisSkip = redisReachable || process.env.CI ? false : `SKIPPED: no Redis answered PING at ${REDIS_URL} in 5 tries (set TEST_REDIS_URL)`;
if (redisSkip) process.stderr.write(`\n*** Rate limits shared through Redis ${redisSkip} ***\n\n`);

describe('rate limits shared through Redis', { skip: redisSkip }, () => {
  const prefix = `ugs-test:${process.pid}:${crypto.randomBytes(4).toString('hex')}:`;
  let redis: Redis;
  let db: OpenDatabase;
  const servers: ServerProcess[] = [];
  before(async () => {
    redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    db = await openTestDatabase(BACKENDS[BACKENDS.length - 1]);
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await deleteKeys(redis, prefix);
    redis.disconnect();
    await db.close();
  });

  it('two instances share one budget per API token, keyed by its SHA-256 (never the token)', async () => {
    const secretKey = newSecretKey().toString('base64');
    const env = {
      DATABASE_URL: db.url,
      UGS_SECRET_KEY: secretKey,
      REDIS_URL,
      UGS_RATE_LIMIT_REDIS_PREFIX: prefix,
      UGS_RATE_LIMIT_MAX: '10',
      UGS_RATE_LIMIT_WINDOW_MS: '60000',
    };
    servers.push(await spawnServer(env), await spawnServer(env));
    const { token } = await issueTestToken(db.handle);
    const { token: otherToken } = await issueTestToken(db.handle);
    const statuses = await Promise.all(
      Array.from({ length: 30 }, (_, i) => httpRequest(servers[i % 2].baseUrl, 'GET', '/api/users', { token }).then((r) => r.status)),
    );
    // INCR in Redis is atomic, so the shared budget is exact: no slack within one window.
    assert.equal(statuses.filter((s) => s === 200).length, 10, statuses.join(','));
    assert.equal(statuses.filter((s) => s === 429).length, 20, statuses.join(','));
    // Either instance now refuses this token, and still serves another one.
    for (const server of servers) {
      assert.equal((await httpRequest(server.baseUrl, 'GET', '/api/users', { token })).status, 429);
      assert.equal((await httpRequest(server.baseUrl, 'GET', '/api/users', { token: otherToken })).status, 200);
    }
    const keys = await redis.keys(`${prefix}*`);
    assert.deepEqual(keys.sort(), [`${prefix}api:${hashToken(token)}`, `${prefix}api:${hashToken(otherToken)}`].sort());
    for (const key of keys) {
      assert.ok(!key.includes('ugs_'), 'a Redis key holds a token');
      assert.ok((await redis.pttl(key)) > 0, 'every key expires');
    }
    const removed = await deleteKeys(redis, prefix);
    assert.equal(removed.length, 2);
  });
});

forEachBackend('rate limits with Redis unreachable', (backend) => {
  it('fail open: requests are served without a limit and a warning is logged', async () => {
    const db = await openTestDatabase(backend);
    const log = new LogCapture();
    const t = await buildTestApp(db, {
      log,
      config: { rateLimitMax: 1, rateLimitWindowMs: 60_000, redisUrl: `redis://127.0.0.1:${await closedPort()}` },
    });
    try {
      await t.app.ready();
      const { token } = await issueTestToken(db.handle);
      for (let i = 0; i < 5; i++) {
        const res = await t.request('GET', '/api/users', { token });
        assert.equal(res.status, 200, res.text);
        assert.equal(res.headers['ratelimit'], undefined);
      }
      const warnings = log.lines.filter((l) => l.level === 40 && /Redis/.test(String(l.msg)));
      assert.ok(warnings.length >= 1, `no warning about Redis in:\n${log.text()}`);
      assert.ok(!log.text().includes(token), 'the log holds a token');
    } finally {
      await t.app.close();
      await db.close();
    }
  });
});

/**
 * A Redis that is up and ready (it answers INFO, which ioredis asks before it is ready) and
 * then never answers a command: what a Redis stuck in a long script, or a proxy holding the
 * connection, looks like.
 */
async function redisThatNeverAnswers(): Promise<{ url: string; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('data', (data) => {
      const info = '# Server\r\nloading:0\r\n';
      if (/info/i.test(data.toString())) socket.write(`$${info.length}\r\n${info}\r\n`);
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

forEachBackend('rate limits with a Redis that never answers', (backend) => {
  it('fail open: a request whose Redis command gets no answer is served without a limit after the command bound, with a warning', async () => {
    const db = await openTestDatabase(backend);
    const log = new LogCapture();
    const redis = await redisThatNeverAnswers();
    const t = await buildTestApp(db, { log, config: { rateLimitMax: 1, rateLimitWindowMs: 60_000, redisUrl: redis.url } });
    try {
      await t.app.ready();
      const { token } = await issueTestToken(db.handle);
      for (let i = 0; i < 3; i++) {
        const res = await t.request('GET', '/api/users', { token });
        assert.equal(res.status, 200, res.text);
        assert.equal(res.headers['ratelimit'], undefined);
      }
      // One warning: the rate limit's warnings are throttled (foundations/throttled-warning.ts).
      const warnings = log.lines.filter((l) => l.level === 40 && /rate limit store \(Redis\)/.test(String(l.msg)));
      assert.ok(warnings.length >= 1, `no warning about Redis in:\n${log.text()}`);
      assert.match(log.text(), /Command timed out/);
    } finally {
      await t.app.close();
      await db.close();
      redis.close();
    }
  });
});

/**
 * A proxy in front of Redis, in this process: while armed, it holds the next rate-limit
 * command (EVALSHA or EVAL) by keeping this process's event loop busy for `blockMs`, then
 * passes it on. The answer then comes at once; only the process did not run meanwhile.
 */
async function redisBehindABusyLoop(target: string, blockMs: number): Promise<{ url: string; arm(): void; close(): void }> {
  const { port: targetPort, hostname } = new URL(target);
  let armed = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(targetPort), hostname);
    sockets.add(client).add(upstream);
    client.on('data', (data) => {
      if (armed && /evalsha|eval/i.test(data.toString())) {
        armed = false;
        const until = performance.now() + blockMs;
        while (performance.now() < until) {
          // the process's loop is busy: no timer, no socket is served
        }
      }
      upstream.write(data);
    });
    upstream.on('data', (data) => client.write(data));
    for (const socket of [client, upstream]) socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    arm: () => {
      armed = true;
    },
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

describe('rate limits while the process does not run', { skip: redisSkip }, () => {
  it("a Redis answer that waited in the socket while the process's loop was busy for 600 ms is read, not taken for a timeout: the request is limited, never let through", async () => {
    const db = await openTestDatabase('sqlite');
    const log = new LogCapture();
    const proxy = await redisBehindABusyLoop(REDIS_URL, 600);
    const prefix = `ugs-test:${process.pid}:${crypto.randomBytes(4).toString('hex')}:`;
    const t = await buildTestApp(db, { log, config: { rateLimitMax: 1, rateLimitWindowMs: 60_000, redisUrl: proxy.url, rateLimitRedisPrefix: prefix } });
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    try {
      await t.app.ready();
      const { token } = await issueTestToken(db.handle);
      proxy.arm();
      const first = await t.request('GET', '/api/users', { token });
      assert.equal(first.status, 200, first.text);
      assert.ok(first.headers['ratelimit'] !== undefined, `the first request was let through unlimited:\n${log.text()}`);
      const second = await t.request('GET', '/api/users', { token });
      assert.equal(second.status, 429, second.text);
      assert.equal(log.lines.filter((l) => l.level === 40).length, 0, `a warning, as if Redis had failed:\n${log.text()}`);
    } finally {
      await t.app.close();
      await db.close();
      proxy.close();
      await deleteKeys(redis, prefix);
      redis.disconnect();
    }
  });
});
