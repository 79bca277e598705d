// Page views read a streaming replica (docs/api.md, "Reads from replicas"), on a scratch
// primary and standby of their own (helpers/replica-pair.ts): while the primary is stopped the
// page views are answered from the replica and writes answer 503; a read goes to the replica
// only when it has replayed the account's last write (replay paused: a group just created is
// found, by the primary; another account's older group is read on the replica; with the
// primary stopped too, the account that wrote gets 503, never a row from before its write); a
// replica lagging past the bound serves nothing; without Redis every read stays on the
// primary. Which node answered is told by each instance's ugs_database_reads_total{pool}.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { loadConfig, ConfigError } from '../src/config.ts';
import { replicaPairUnavailable, startReplicaPair, type ReplicaPair } from './helpers/replica-pair.ts';
import { httpRequest, issueTokenWithCli, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { redisAnswers } from './helpers/services.ts';
import { Scrape } from './helpers/prometheus.ts';
import { eventually } from './helpers/wait.ts';
import { startInterceptingProxy } from './helpers/intercepting-proxy.ts';
import { Redis } from 'ioredis';
import { openWritePositions } from '../src/db/write-positions.ts';
import type { ReplicaReadiness } from '../src/db/replica-readiness.ts';

const REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';
/** The create-then-lookup pairs of the read-your-writes run: 10,000 in CI; fewer on a busy machine (UGS_TEST_REPLICA_PAIRS). */
const PAIRS = Number(process.env.UGS_TEST_REPLICA_PAIRS || 10_000);
const LANES = 8;

const unavailable = replicaPairUnavailable();
const redisReachable = await redisAnswers(REDIS_URL);
const skip = unavailable || (redisReachable || process.env.CI ? false : `no Redis answered PING at ${REDIS_URL} (set TEST_REDIS_URL)`);
if (skip) process.stderr.write(`\n*** Reads from a replica SKIPPED: ${skip} ***\n\n`);

describe('UGS_DATABASE_READ_URL: what a start accepts', () => {
  it('refuses a replica beside a SQLite database, and a URL that is not postgres://', () => {
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'sqlite:./data/x.sqlite', UGS_DATABASE_READ_URL: 'postgres://replica/db' }),
      (err: Error) => err instanceof ConfigError && /SQLite database has no replica/.test(err.message),
    );
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'postgres://primary/db', UGS_DATABASE_READ_URL: 'mysql://replica/db' }),
      (err: Error) => err instanceof ConfigError && /UGS_DATABASE_READ_URL must be a postgres:\/\/ URL/.test(err.message),
    );
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'postgres://primary/db', UGS_DATABASE_READ_FROM: 'always' }),
      /UGS_DATABASE_READ_FROM must be one of fallback, replica/,
    );
    const config = loadConfig({ DATABASE_URL: 'postgres://primary/db', UGS_DATABASE_READ_URL: 'postgres://replica/db' });
    assert.equal(config.readFrom, 'fallback');
    assert.equal(config.readMaxLagMs, 1000);
  });
});

describe('write positions in Redis', { skip: redisReachable || process.env.CI ? false : `no Redis answered PING at ${REDIS_URL}` }, () => {
  it('only ever move forward: a smaller position recorded later, or concurrently, never replaces a larger one', async () => {
    const prefix = `ugs-test:${process.pid}:${crypto.randomBytes(4).toString('hex')}:wal:`;
    const positions = await openWritePositions(REDIS_URL, prefix, () => undefined);
    const redis = new Redis(REDIS_URL);
    try {
      assert.equal(await positions.required(7), 0n, 'an account without a recent write needs nothing');
      await positions.record([7], 0x1_0000_0010n);
      await positions.record([7], 0xffff_fff0n); // smaller, though longer as a decimal number's low half
      assert.equal(await positions.required(7), 0x1_0000_0010n);
      const shuffled = Array.from({ length: 200 }, (_, i) => BigInt(i) * 1000n).sort(() => Math.random() - 0.5);
      await Promise.all(shuffled.map((position) => positions.record([8, 9], position)));
      assert.equal(await positions.required(8), 199_000n);
      assert.equal(await positions.required(9), 199_000n);
      const ttl = await redis.pttl(`${prefix}8`);
      assert.ok(ttl > 20_000 && ttl <= 30_000, `kept about 30 s (${ttl} ms left)`);
    } finally {
      await redis.del(`${prefix}7`, `${prefix}8`, `${prefix}9`);
      redis.disconnect();
      await positions.close();
    }
  });

  it('a position asked for while the process could not run is read, not taken for a Redis that did not answer', async () => {
    const prefix = `ugs-test:${process.pid}:${crypto.randomBytes(4).toString('hex')}:wal:`;
    const positions = await openWritePositions(REDIS_URL, prefix, () => undefined);
    try {
      await positions.record([11], 0x2000n);
      const asked = positions.required(11);
      // Redis answers within a millisecond; the process sees it only once it runs again, long after the 250 ms bound.
      const until = performance.now() + 1000;
      while (performance.now() < until);
      assert.equal(await asked, 0x2000n);
    } finally {
      await positions.close();
    }
  });
});

/** The replica part of a /readyz answer. */
const replicaOf = (body: unknown) => (body as { replica: ReplicaReadiness }).replica;

/** Reads this instance's page views sent to each node so far. */
async function readsOf(server: ServerProcess): Promise<{ primary: number; replica: number }> {
  const scrape = new Scrape((await httpRequest(server.baseUrl, 'GET', '/metrics')).text);
  return { primary: scrape.value('ugs_database_reads_total', { pool: 'primary' }), replica: scrape.value('ugs_database_reads_total', { pool: 'replica' }) };
}

/** What `work` made `server` read on each node. */
async function readsDuring<T>(server: ServerProcess, work: () => Promise<T>): Promise<{ answer: T; primary: number; replica: number }> {
  const before = await readsOf(server);
  const answer = await work();
  const after = await readsOf(server);
  return { answer, primary: after.primary - before.primary, replica: after.replica - before.replica };
}

/** CommandComplete of a COMMIT, as PostgreSQL sends it: 'C', its length (11), "COMMIT\0". */
const COMMIT_COMPLETE = Buffer.from([0x43, 0, 0, 0, 11, ...Buffer.from('COMMIT'), 0]);

/**
 * A proxy in front of PostgreSQL that, once armed, forwards the first answer holding a
 * COMMIT's completion and then closes that connection: a primary that dies the moment it has
 * answered a commit.
 */
async function startCutAfterCommit(target: URL) {
  let armed = false;
  let cuts = 0;
  const proxy = await startInterceptingProxy(target, {
    toClient: (chunk, connection) => {
      if (!armed || !chunk.includes(COMMIT_COMPLETE)) return connection.forward(chunk);
      armed = false;
      cuts++;
      connection.forward(chunk, () => connection.close());
    },
  });
  return {
    url: proxy.url,
    arm: () => {
      armed = true;
    },
    cuts: () => cuts,
    close: proxy.close,
  };
}

describe('[postgres] page views read a replica', { skip }, () => {
  let pair: ReplicaPair;
  const prefix = `ugs-test:${process.pid}:${crypto.randomBytes(4).toString('hex')}:wal:`;
  const secret = crypto.randomBytes(32).toString('base64');
  /** acme writes throughout; other wrote its group long before the replica was paused. */
  let acme: string;
  let other: string;
  const servers: ServerProcess[] = [];

  const envFor = (extra: Record<string, string> = {}) => ({
    DATABASE_URL: pair.primaryUrl,
    UGS_DATABASE_READ_URL: pair.replicaUrl,
    REDIS_URL,
    UGS_DATABASE_READ_REDIS_PREFIX: prefix,
    UGS_SECRET_KEY: secret,
    ...extra,
  });
  const serve = async (extra: Record<string, string>) => {
    const server = await spawnServer(envFor(extra));
    servers.push(server);
    return server;
  };
  const stopServers = async () => {
    await Promise.all(servers.splice(0).map((server) => server.stop('SIGKILL')));
  };

  before(async () => {
    pair = await startReplicaPair();
    acme = (await issueTokenWithCli(envFor(), ['--account', 'acme'])).token;
    other = (await issueTokenWithCli(envFor(), ['--account', 'other'])).token;
    const server = await serve({});
    assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token: other, body: { user_group_id: 'old-1' } })).status, 201);
    await stopServers();
    await pair.caughtUp();
  });

  after(async () => {
    await stopServers();
    await pair?.stop();
  });

  it('read-your-writes: with replay paused, a group created through one instance is found through another, by the primary; an account without newer writes reads the replica', async (t) => {
    t.after(async () => {
      await pair.resumeReplay();
      await stopServers();
    });
    // The lag bound out of the way: only the accounts' positions decide here.
    const [a, b] = [
      await serve({ UGS_DATABASE_READ_FROM: 'replica', UGS_DATABASE_READ_MAX_LAG_MS: '3600000' }),
      await serve({ UGS_DATABASE_READ_FROM: 'replica', UGS_DATABASE_READ_MAX_LAG_MS: '3600000' }),
    ];
    await pair.pauseReplay();

    const created = await httpRequest(a.baseUrl, 'POST', '/api/user', { token: acme, body: { user_group_id: 'new-1' } });
    assert.equal(created.status, 201, created.text);

    const lookup = await readsDuring(b, () => httpRequest(b.baseUrl, 'GET', '/api/user/lookup?user_group_id=new-1', { token: acme }));
    assert.equal(lookup.answer.status, 200, lookup.answer.text);
    assert.equal(lookup.answer.body.user_group.team_id, created.body.user_group.team_id);
    assert.equal(lookup.replica, 0, 'the replica, behind acme’s write, answered none of the lookup’s reads');
    assert.ok(lookup.primary >= 1, 'the primary answered the lookup');

    const hit = await httpRequest(b.baseUrl, 'GET', '/api/user?user_group_id=new-1', { token: acme });
    assert.equal(hit.status, 200, hit.text);
    assert.equal(hit.body.new_user_group, false, 'get-or-create found the group: it did not create it again');

    const context = await httpRequest(b.baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${created.body.user_group.token}` } });
    assert.equal(context.status, 200, context.text);
    assert.equal(context.body.user_group.provided_id, 'new-1');

    const old = await readsDuring(b, () => httpRequest(b.baseUrl, 'GET', '/api/user/lookup?user_group_id=old-1', { token: other }));
    assert.equal(old.answer.status, 200, old.answer.text);
    assert.ok(old.replica >= 1, 'the replica answered the other account’s lookup');
    assert.equal(old.primary, 0, 'the primary answered none of it');

    await pair.resumeReplay();
    await pair.caughtUp();
    const later = await readsDuring(b, () => httpRequest(b.baseUrl, 'GET', '/api/user/lookup?user_group_id=new-1', { token: acme }));
    assert.equal(later.answer.status, 200);
    assert.ok(later.replica >= 1, 'once replayed, acme’s group is read on the replica');
  });

  it('a replica lagging more than UGS_DATABASE_READ_MAX_LAG_MS serves nothing', async (t) => {
    t.after(async () => {
      await pair.resumeReplay();
      await stopServers();
    });
    const server = await serve({ UGS_DATABASE_READ_FROM: 'replica', UGS_DATABASE_READ_MAX_LAG_MS: '1000' });
    const fresh = await readsDuring(server, () => httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=old-1', { token: other }));
    assert.ok(fresh.replica >= 1, 'a replica that keeps up serves');

    await pair.pauseReplay();
    assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token: acme, body: { user_group_id: 'lag-1' } })).status, 201);
    const ready = await eventually('/readyz says the replica lags more than 1 s', async () => {
      const answer = await httpRequest(server.baseUrl, 'GET', '/readyz');
      return answer.status === 200 && replicaOf(answer.body).lag_seconds! > 1 ? replicaOf(answer.body) : undefined;
    });
    assert.equal(ready.reachable, true);
    assert.equal(ready.max_lag_seconds, 1);

    const lagging = await readsDuring(server, () => httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=old-1', { token: other }));
    assert.equal(lagging.answer.status, 200, lagging.answer.text);
    assert.equal(lagging.replica, 0, 'the lagging replica answered nothing');
    assert.ok(lagging.primary >= 1);
  });

  it('without Redis every read stays on the primary', async (t) => {
    t.after(stopServers);
    const server = await serve({ REDIS_URL: '', UGS_DATABASE_READ_FROM: 'replica' });
    await server.waitForOutput(/UGS_DATABASE_READ_URL is set without REDIS_URL/);
    const lookup = await readsDuring(server, () => httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=old-1', { token: other }));
    assert.equal(lookup.answer.status, 200);
    assert.equal(lookup.replica, 0);
    assert.ok(lookup.primary >= 1);
    const ready = await httpRequest(server.baseUrl, 'GET', '/readyz');
    assert.equal(replicaOf(ready.body).in_use, false);
  });

  it(`${PAIRS.toLocaleString('en-US')} create-then-lookup pairs through two instances, with the replica in use: not one lookup misses`, async (t) => {
    t.after(stopServers);
    const pairServers = [await serve({ UGS_DATABASE_READ_FROM: 'replica' }), await serve({ UGS_DATABASE_READ_FROM: 'replica' })];
    const before = await Promise.all(pairServers.map(readsOf));
    const misses: string[] = [];
    let next = 0;
    const started = performance.now();
    const lane = async () => {
      for (let i = next++; i < PAIRS; i = next++) {
        const [writer, reader] = i % 2 === 0 ? pairServers : [pairServers[1], pairServers[0]];
        const id = `pair-${i}`;
        const created = await httpRequest(writer.baseUrl, 'POST', '/api/user', { token: acme, body: { user_group_id: id } });
        assert.equal(created.status, 201, created.text);
        const found = await httpRequest(reader.baseUrl, 'GET', `/api/user/lookup?user_group_id=${id}`, { token: acme });
        if (found.status !== 200 || found.body.user_group.team_id !== created.body.user_group.team_id) misses.push(`${id}: ${found.status} ${found.text}`);
      }
    };
    await Promise.all(Array.from({ length: LANES }, lane));
    const seconds = (performance.now() - started) / 1000;
    const after = await Promise.all(pairServers.map(readsOf));
    const replica = after.reduce((sum, reads, i) => sum + reads.replica - before[i].replica, 0);
    const primary = after.reduce((sum, reads, i) => sum + reads.primary - before[i].primary, 0);
    t.diagnostic(`${PAIRS} pairs in ${seconds.toFixed(1)} s; reads: ${replica} on the replica, ${primary} on the primary`);
    assert.deepEqual(misses.slice(0, 10), [], `${misses.length} lookups missed`);
    assert.ok(replica > 0, 'the replica answered some of the lookups');
  });

  it("a write's position is read with its commit: a primary lost right after answering the commit leaves the account's position known, not one no replica passes", async (t) => {
    const cutter = await startCutAfterCommit(new URL(pair.primaryUrl));
    t.after(async () => {
      await stopServers();
      await cutter.close();
    });
    const ownPrefix = `${prefix}cut:`;
    const server = await serve({ DATABASE_URL: cutter.url, UGS_DATABASE_READ_REDIS_PREFIX: ownPrefix });
    assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token: acme, body: { user_group_id: 'cut-0' } })).status, 201);
    cutter.arm();
    const created = await httpRequest(server.baseUrl, 'POST', '/api/user', { token: acme, body: { user_group_id: 'cut-1' } });
    assert.equal(created.status, 201, created.text);
    assert.equal(cutter.cuts(), 1, "the proxy closed the create's connection right after the commit's answer");
    const redis = new Redis(REDIS_URL);
    try {
      const keys = await redis.keys(`${ownPrefix}*`);
      assert.equal(keys.length, 1, `one account wrote: ${keys.join(', ')}`);
      const stored = await redis.get(keys[0]);
      assert.match(stored ?? '', /^[0-9a-f]{16}$/);
      assert.notEqual(stored, 'f'.repeat(16), 'the position is known (not the one no replica passes, which holds the account on the primary for 30 s)');
    } finally {
      await redis.del(...(await redis.keys(`${ownPrefix}*`)), 'nothing');
      redis.disconnect();
    }
  });

  it('while the primary is stopped, page views are answered from the replica and writes answer 503 with Retry-After', async (t) => {
    t.after(stopServers);
    const server = await serve({ UGS_DATABASE_READ_FROM: 'fallback' });
    await server.waitForOutput(/"read_from":"fallback".*page views may read the replica/);
    const created = await httpRequest(server.baseUrl, 'POST', '/api/user', { token: acme, body: { user_group_id: 'page-1', properties: { region: 'emea' } } });
    assert.equal(created.status, 201, created.text);
    const groupToken = created.body.user_group.token as string;
    const minted = await httpRequest(server.baseUrl, 'POST', '/api/embed_token', { token: acme, body: { user_group_id: 'page-1' } });
    assert.equal(minted.status, 200, minted.text);
    await pair.caughtUp();

    await pair.stopPrimary();
    t.after(() => pair.startPrimary());
    const outage = await readsDuring(server, async () => {
      const hit = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=page-1', { token: acme });
      assert.equal(hit.status, 200, hit.text);
      assert.equal(hit.body.new_user_group, false);
      assert.equal(hit.body.user_group.token, groupToken);
      const lookup = await httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=page-1', { token: acme });
      assert.equal(lookup.status, 200, lookup.text);

      const token = await httpRequest(server.baseUrl, 'POST', '/api/embed_token', {
        token: acme,
        body: { user_group_id: 'page-1' },
        headers: { 'idempotency-key': crypto.randomUUID() },
      });
      assert.equal(token.status, 200, token.text);
      // The key cannot be kept published for 30 days without the primary: the token ends when its publication does.
      const longer = await httpRequest(server.baseUrl, 'POST', '/api/embed_token', {
        token: acme,
        body: { user_group_id: 'page-1', expires_in_seconds: 2_592_000 },
      });
      assert.equal(longer.status, 200, longer.text);
      const expiresAt = Date.parse(longer.body.expires_at);
      assert.ok(expiresAt < Date.now() + 2_592_000_000 - 3_600_000 && expiresAt > Date.now() + 60_000, `shortened, not refused: ${longer.body.expires_at}`);

      for (const bearer of [groupToken, minted.body.embed_token, token.body.embed_token]) {
        const context = await httpRequest(server.baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${bearer}` } });
        assert.equal(context.status, 200, context.text);
        assert.equal(context.body.variables.region, 'emea');
      }
      // The signing keys are read again after a second: from the replica.
      await eventually('the JWKS is answered after its copy was read again', async () => {
        await new Promise((resolve) => setTimeout(resolve, 1100));
        const jwks = await httpRequest(server.baseUrl, 'GET', '/.well-known/jwks.json');
        return jwks.status === 200 && jwks.body.keys.length > 0;
      });
    });
    assert.ok(outage.replica >= 5, `the replica answered the page views (${outage.replica} reads)`);
    assert.equal(outage.primary, 0);

    for (const [method, body] of [
      ['POST', { user_group_id: 'page-2' }],
      ['PUT', { user_group_id: 'page-1', name: 'renamed' }],
    ] as const) {
      const write = await httpRequest(server.baseUrl, method, '/api/user', { token: acme, body });
      assert.equal(write.status, 503, write.text);
      assert.equal(write.body.error.code, 'unavailable');
      assert.ok(Number(write.headers['retry-after']) > 0, 'Retry-After is set');
    }
    const missing = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=page-3', { token: acme });
    assert.equal(missing.status, 503, 'creating a group still needs the primary');

    const ready = await httpRequest(server.baseUrl, 'GET', '/readyz');
    assert.equal(ready.status, 503);
    assert.match(ready.body.error.message, /page views are served from the replica/);

    await pair.startPrimary();
    await eventually('creates succeed again once the primary is back', async () => {
      const write = await httpRequest(server.baseUrl, 'POST', '/api/user', { token: acme, body: { user_group_id: 'page-2' } });
      return write.status === 201;
    });
  });
  it('while the primary is stopped, an account whose last write the replica has not replayed gets 503, until it has; another account is served', async (t) => {
    t.after(async () => {
      await pair.resumeReplay();
      await pair.startPrimary();
      await stopServers();
    });
    await pair.startPrimary();
    // The lag bound out of the way: only the accounts' positions decide here.
    const server = await serve({ UGS_DATABASE_READ_FROM: 'fallback', UGS_DATABASE_READ_MAX_LAG_MS: '3600000' });
    await pair.caughtUp();
    await pair.pauseReplay();
    assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token: other, body: { user_group_id: 'behind-1' } })).status, 201);
    await pair.stopPrimary();

    const served = await httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=page-1', { token: acme });
    assert.equal(served.status, 200, `acme wrote nothing since the pause: served by the replica (${served.text})`);
    const refused = await httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=old-1', { token: other });
    assert.equal(refused.status, 503, `other's last write is not on the replica yet: no read from before it (${refused.text})`);
    assert.equal(refused.body.error.code, 'unavailable');
    assert.ok(Number(refused.headers['retry-after']) > 0);

    await pair.resumeReplay();
    const found = await eventually('other’s groups are served once the replica replayed its write', async () => {
      const answer = await httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=behind-1', { token: other });
      return answer.status === 200 ? answer : undefined;
    });
    assert.equal(found.body.user_group.provided_id, 'behind-1');
  });
});
