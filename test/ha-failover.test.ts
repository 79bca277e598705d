// Page views and creates through the failovers of a highly available PostgreSQL: two Patroni
// nodes in synchronous mode behind HAProxy (test/helpers/ha-cluster.ts; docs/deployment.md,
// "Highly available PostgreSQL"), two instances of the service on HAProxy's read-write port with
// UGS_DATABASE_READ_URL on its read-only port, and a bounded load of page views and creates
// whose every answer is kept (scripts/failover-load.ts). Three failures: a planned switchover,
// the primary's node lost (kill -9 of its Patroni and its postmaster) and a replica whose replay
// is paused, a second at a time. After each, what callers saw (docs/operations.md, "During a
// failover"):
// - no acknowledged create is lost: every 201 is on the new primary, with its team_id;
// - every event is in the feed once (docs/api.md, "Change events");
// - no answer is a 500 (or any 5xx but 503, or no answer at all);
// - a write that fails is 503 unavailable with Retry-After;
// - page views are answered through the outage, from the replica: at least 99 % of them while
//   the primary is away (the goal of docs/performance.md, "Failover"), every one when nothing
//   is down;
// - a create acknowledged by one instance is found by a lookup through the other at once,
//   never a 404 (here and in 10,000 create-then-lookup pairs with reads on the replica first;
//   UGS_HA_PAIRS lowers the count, which is 10,000 under CI=true and 1,000 elsewhere).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { onConnection } from '../scripts/scratch-database.ts';
import {
  countPageViews,
  countWriteErrors,
  isPageView,
  request,
  sentBetween,
  startLoad,
  type Answer,
  type ExistingGroup,
  type RunningLoad,
} from '../scripts/failover-load.ts';
import { HA_SKIP, useHaCluster, type HaCluster } from './helpers/ha-cluster.ts';
import { issueTokenWithCli, ROOT, spawnServers, type ServerProcess } from './helpers/processes.ts';
import { redisAnswers } from './helpers/services.ts';
import { eventually } from './helpers/wait.ts';

const REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';
const redisMissing = HA_SKIP || (await redisAnswers(REDIS_URL)) ? '' : `no Redis answered PING at ${REDIS_URL} in 5 tries (set TEST_REDIS_URL)`;
const skip = HA_SKIP || (redisMissing && !process.env.CI ? `SKIPPED: ${redisMissing}` : false);

const PAIRS = Number(process.env.UGS_HA_PAIRS || (process.env.CI ? 10_000 : 1_000));
/** The goal while the primary is away (docs/performance.md, "Failover"): page views answered 2xx. */
const PAGE_VIEWS_DURING_OUTAGE_PERCENT = 99;
const EXISTING_GROUPS = 60;
const DATABASE = 'ugs';
const ARTIFACTS = path.join(ROOT, 'test', 'artifacts');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Instances {
  servers: ServerProcess[];
  urls: string[];
  apiToken: string;
  existing: ExistingGroup[];
}

/**
 * Two instances on the cluster (DATABASE_URL on the read-write port, UGS_DATABASE_READ_URL on
 * the read-only one, one Redis prefix of their own), started before the describe's first test
 * with groups to view, stopped after its last; their output kept in test/artifacts/.
 */
function useInstances(ha: { cluster: HaCluster }, label: string, shared: { prefix: string; secret: string }, env: Record<string, string> = {}) {
  const instances: Instances = { servers: [], urls: [], apiToken: '', existing: [] };
  before(async () => {
    const cluster = ha.cluster;
    await onConnection(cluster.rwUrl(), `create database ${DATABASE}`).catch((err: Error) => {
      if (!/already exists/.test(err.message)) throw err;
    });
    const serverEnv = {
      DATABASE_URL: cluster.rwUrl(DATABASE),
      UGS_DATABASE_READ_URL: cluster.roUrl(DATABASE),
      REDIS_URL,
      UGS_DATABASE_READ_REDIS_PREFIX: `${shared.prefix}:wal:`,
      UGS_RATE_LIMIT_REDIS_PREFIX: `${shared.prefix}:rl:`,
      UGS_SECRET_KEY: shared.secret,
      ...env,
    };
    instances.apiToken = (
      await issueTokenWithCli({ DATABASE_URL: serverEnv.DATABASE_URL, UGS_SECRET_KEY: shared.secret }, ['--account', 'acme', '--scopes', 'read,write'])
    ).token;
    instances.servers = await spawnServers(2, serverEnv);
    instances.urls = instances.servers.map((s) => s.baseUrl);
    const auth = { authorization: `Token ${instances.apiToken}` };
    for (let i = 0; i < EXISTING_GROUPS; i++) {
      const id = `${label}-existing-${i}`;
      const made = await request(instances.urls[i % 2], 'GET', `/api/user?user_group_id=${id}`, { headers: auth });
      assert.ok([200, 201].includes(made.status), `seeding ${id}: ${made.status} ${JSON.stringify(made.body)}`);
      instances.existing.push({ id, token: made.body.user_group!.token! });
    }
  });
  after(async () => {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    instances.servers.forEach((server, i) => fs.writeFileSync(path.join(ARTIFACTS, `ha-failover-${label}-instance${i}.log`), server.output()));
    await Promise.all(instances.servers.map((server) => server.stop('SIGTERM')));
  });
  return instances;
}

/** Page-view reads the replica answered so far, on every instance (docs/metrics.md: ugs_database_reads_total). */
async function replicaReads(instances: Instances): Promise<number> {
  let total = 0;
  for (const url of instances.urls) {
    const metrics = await request(url, 'GET', '/metrics');
    assert.equal(metrics.status, 200, `${url}/metrics: ${metrics.status}`);
    for (const match of metrics.text.matchAll(/^ugs_database_reads_total\{[^}]*pool="replica"[^}]*\} (\d+)/gm)) total += Number(match[1]);
  }
  return total;
}

/** The accounts' write positions the instances keep in Redis (docs/api.md, "Reads from replicas"), for a failure's message. */
async function writePositions(prefix: string): Promise<string> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true });
  try {
    await redis.connect();
    const keys = await redis.keys(`${prefix}:wal:*`);
    const values = await Promise.all(keys.map(async (key) => `${key}=${await redis.get(key)}`));
    return values.join(', ') || '(none)';
  } catch (err) {
    return `(Redis: ${(err as Error).message})`;
  } finally {
    redis.disconnect();
  }
}

function describeAnswers(answers: readonly Answer[], limit = 10): string {
  return answers
    .slice(0, limit)
    .map((a) => `${a.kind} on ${a.instance}: ${a.status} ${a.code ?? ''} retry-after=${a.retryAfter ?? '-'} in ${a.end - a.start} ms (${a.id ?? ''})`)
    .join('\n');
}

/**
 * Runs the load, waits until both instances have answered page views and creates, runs
 * `failure` (which resolves when the failure is over: the cluster has a primary again), waits
 * until both instances acknowledge creates again, runs on a little, and stops the load.
 */
async function underLoad(
  instances: Instances,
  run: string,
  failure: () => Promise<void>,
): Promise<{ answers: Answer[]; outage: { from: number; to: number }; replicaReadsDuringFailure: number; sampled: string[] }> {
  let load: RunningLoad | undefined = startLoad({
    instances: instances.urls,
    apiToken: instances.apiToken,
    existing: instances.existing,
    run,
    pageViewsPerSecond: 40,
    createsPerSecond: 10,
    maxAnswers: 100_000,
  });
  try {
    const answered = (since: number, kind: 'page view' | 'create') => () =>
      [0, 1].every((instance) =>
        load!.answers.some((a) => a.instance === instance && a.start >= since && (kind === 'create' ? a.status === 201 : isPageView(a) && a.status < 300)),
      );
    await eventually('page views answered by both instances before the failure', answered(0, 'page view'));
    await eventually('creates acknowledged by both instances before the failure', answered(0, 'create'));
    const readsBefore = await replicaReads(instances);
    const from = Date.now();
    // What the instances say of the replica during the failure (/readyz), for a failure's message.
    const sampled: string[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const ready = await request(instances.urls[0], 'GET', '/readyz', { timeoutMs: 5000 });
        sampled.push(`${new Date().toISOString()} /readyz ${ready.status} ${JSON.stringify({ database: ready.body.database, replica: ready.body.replica })}`);
        await sleep(1000);
      }
    })();
    await failure().finally(() => {
      sampling = false;
    });
    await sampler;
    const failureOver = Date.now();
    const replicaReadsDuringFailure = (await replicaReads(instances)) - readsBefore;
    await eventually('both instances acknowledging creates again after the failure', answered(failureOver, 'create'), { timeoutMs: 60_000 });
    // A little more load on the recovered cluster: what comes after the outage is recorded too.
    const settled = load.answers.length;
    await eventually('more answers after the recovery', () => load!.answers.length >= settled + 40);
    const answers = await load.stop();
    load = undefined;
    // The outage: from the failure's start until the cluster had a primary again, or until the
    // last refused create if one came later.
    const refused = answers.filter((a) => a.kind === 'create' && a.status !== 201 && a.start >= from);
    const to = Math.max(failureOver, ...refused.map((a) => a.end));
    return { answers, outage: { from, to }, replicaReadsDuringFailure, sampled };
  } finally {
    await load?.stop();
  }
}

/** Every assertion of a failure scenario, on what the load recorded. */
async function assertCallersSaw(
  cluster: HaCluster,
  instances: Instances,
  answers: Answer[],
  outage: { from: number; to: number },
  { pageViewsDuringOutage, diagnostics = '' }: { pageViewsDuringOutage: 'all' | 'goal'; diagnostics?: string },
): Promise<void> {
  // No 500 (nor any other 5xx than 503), and every request got an answer.
  const broken = answers.filter((a) => a.status === 0 || (a.status >= 500 && a.status !== 503));
  assert.deepEqual(broken.length, 0, `answers that are neither a success nor a 503:\n${describeAnswers(broken)}`);

  // A write that fails is 503 unavailable with Retry-After.
  const refused = answers.filter((a) => a.kind === 'create' && a.status !== 201);
  const unclear = refused.filter((a) => a.status !== 503 || a.code !== 'unavailable' || !(Number(a.retryAfter) > 0));
  assert.equal(unclear.length, 0, `creates refused other than 503 unavailable with Retry-After:\n${describeAnswers(unclear)}`);

  // Page views: every one answered when nothing is down; the goal while the primary is away.
  const views = countPageViews(answers);
  const duringOutage = countPageViews(sentBetween(answers, outage.from, outage.to));
  const wrong = answers.filter((a) => isPageView(a) && a.status >= 300 && a.status !== 503);
  assert.equal(wrong.length, 0, `page views answered neither 2xx nor 503:\n${describeAnswers(wrong)}`);
  const failedViews = answers.filter((a) => isPageView(a) && a.status >= 300);
  assert.ok(duringOutage.total >= 20, `page views sent during the outage: ${duringOutage.total}`);
  if (pageViewsDuringOutage === 'all') {
    assert.equal(views.answered2xx, views.total, `page views not answered 2xx: ${JSON.stringify(views.failures)}\n${describeAnswers(failedViews)}`);
  } else {
    assert.ok(
      duringOutage.percent >= PAGE_VIEWS_DURING_OUTAGE_PERCENT,
      `page views answered 2xx during the outage: ${duringOutage.answered2xx} of ${duringOutage.total} (${duringOutage.percent.toFixed(1)} %), ` +
        `failures ${JSON.stringify(duringOutage.failures)}\n${describeAnswers(failedViews)}\n${diagnostics}`,
    );
  }

  // Read-your-writes across instances: a create acknowledged by one is found through the other.
  const stale = answers.filter((a) => a.kind === 'lookup-after-create' && a.status !== 200 && !(a.status === 503 && Number(a.retryAfter) > 0));
  assert.equal(stale.length, 0, `lookups right after an acknowledged create that did not find it:\n${describeAnswers(stale)}`);

  // No acknowledged create is lost: each is on the new primary, with the team_id it was given.
  const acknowledged = answers.filter((a) => a.kind === 'create' && a.status === 201);
  assert.ok(acknowledged.length > 0, 'creates were acknowledged');
  const primary = await cluster.waitForPrimary();
  const client = new pg.Client({ connectionString: primary.url(DATABASE) });
  await client.connect();
  let stored: Map<string, number>;
  try {
    const rows = await client.query<{ provided_id: string; team_id: number }>(
      'select provided_id, team_id from user_groups where provided_id = any($1::text[])',
      [acknowledged.map((a) => a.id!)],
    );
    stored = new Map(rows.rows.map((row) => [row.provided_id, Number(row.team_id)]));
  } finally {
    await client.end();
  }
  const lost = acknowledged.filter((a) => stored.get(a.id!) !== a.teamId);
  assert.equal(lost.length, 0, `acknowledged creates not on the new primary (${primary.name}):\n${describeAnswers(lost)}`);

  // Every event once: each acknowledged create has exactly one user_group.created in the feed.
  const wanted = new Set(acknowledged.map((a) => a.teamId!));
  const events = await eventually(
    `the user_group.created events of the ${wanted.size} acknowledged creates in the feed`,
    async () => {
      const all = await readFeed(instances, 'user_group.created');
      const seen = new Set(all.filter((e) => wanted.has(e.data.team_id)).map((e) => e.data.team_id));
      return seen.size === wanted.size ? all : undefined;
    },
    { timeoutMs: 60_000, everyMs: 500 },
  );
  const ids = events.map((e) => e.id);
  assert.equal(new Set(ids).size, ids.length, 'no event id is in the feed twice');
  const perGroup = new Map<number, number>();
  for (const e of events) perGroup.set(e.data.team_id, (perGroup.get(e.data.team_id) ?? 0) + 1);
  const twice = [...perGroup].filter(([, n]) => n > 1);
  assert.deepEqual(twice, [], 'no group has two user_group.created events');

  // Both instances take writes again, and say they are ready.
  for (const url of instances.urls) {
    await eventually(`${url} ready (/readyz 200)`, async () => (await request(url, 'GET', '/readyz')).status === 200);
  }
}

interface FeedEvent {
  id: number;
  type: string;
  data: { team_id: number };
}

async function readFeed(instances: Instances, types: string): Promise<FeedEvent[]> {
  const events: FeedEvent[] = [];
  let after: number | undefined;
  for (;;) {
    const page = await request(instances.urls[0], 'GET', `/api/events?types=${types}&limit=500${after === undefined ? '' : `&after=${after}`}`, {
      headers: { authorization: `Token ${instances.apiToken}` },
    });
    assert.equal(page.status, 200, `the feed: ${page.status} ${JSON.stringify(page.body)}`);
    const batch = page.body.events as FeedEvent[];
    events.push(...batch);
    if (batch.length < 500) return events;
    after = page.body.next_cursor as number;
  }
}

function report(cluster: HaCluster, name: string, { answers, outage, replicaReadsDuringFailure }: Awaited<ReturnType<typeof underLoad>>): void {
  const during = countPageViews(sentBetween(answers, outage.from, outage.to));
  const writes = countWriteErrors(answers);
  console.log(
    `${name}: ${replicaReadsDuringFailure} page-view reads on the replica during the failure; outage ${((outage.to - outage.from) / 1000).toFixed(1)} s; page views during it ${during.answered2xx}/${during.total} ` +
      `(${during.percent.toFixed(1)} %) ${JSON.stringify(during.failures)}; creates ${writes.acknowledged}/${writes.creates} acknowledged, ` +
      `write errors over ${writes.spanSeconds.toFixed(1)} s, time to 503 ${JSON.stringify(writes.timeTo503Ms)}\n${cluster.timeline.slice(-8).join('\n')}`,
  );
}

describe('failover on a highly available PostgreSQL (Patroni, etcd, HAProxy)', { skip }, () => {
  const ha = useHaCluster();
  const shared = { prefix: `ugs-ha-test-${process.pid}-${crypto.randomBytes(4).toString('hex')}`, secret: crypto.randomBytes(32).toString('base64') };

  describe('reads fall back to the replica while the primary is away (the default)', () => {
    const instances = useInstances(ha, 'fallback', shared);

    it('each instance says at start that the primary commits synchronously (Patroni synchronous_mode)', async () => {
      for (const server of instances.servers)
        await server.waitForOutput(/PostgreSQL commits synchronously \(synchronous_commit=on, synchronous_standby_names=/);
    });

    it('planned switchover: no acknowledged create lost, every event once, no 500, writes 503 with Retry-After, page views answered', async () => {
      await ha.cluster.restoreNodes();
      const run = await underLoad(instances, 'switchover', async () => {
        await ha.cluster.switchover();
      });
      report(ha.cluster, 'switchover', run);
      await assertCallersSaw(ha.cluster, instances, run.answers, run.outage, { pageViewsDuringOutage: 'goal' });
    });

    it("the primary's node lost (kill -9 of Patroni and the postmaster): the same, page views answered from the replica", async () => {
      await ha.cluster.restoreNodes();
      try {
        const run = await underLoad(instances, 'node-loss', async () => {
          await ha.cluster.killPrimary();
          await ha.cluster.waitForPrimary();
        });
        report(ha.cluster, 'node loss', run);
        const diagnostics = `${run.sampled.join('\n')}\nwrite positions in Redis: ${await writePositions(shared.prefix)}\n${ha.cluster.timeline.slice(-6).join('\n')}`;
        assert.ok(run.replicaReadsDuringFailure > 0, `page views were answered from the replica while the primary was away\n${diagnostics}`);
        assert.ok(countWriteErrors(run.answers).failed > 0, 'creates were refused while no node took writes (else the outage was not one)');
        await assertCallersSaw(ha.cluster, instances, run.answers, run.outage, { pageViewsDuringOutage: 'goal', diagnostics });
      } finally {
        // The lost node comes back as a replica, for what follows.
        await ha.cluster.restoreNodes();
      }
    });
  });

  describe('reads on the replica first (UGS_DATABASE_READ_FROM=replica)', () => {
    const instances = useInstances(ha, 'replica-first', shared, { UGS_DATABASE_READ_FROM: 'replica' });

    it('a replica lagging by a second (replay paused): every page view answered, every create found at once, none lost', async () => {
      await ha.cluster.restoreNodes();
      const run = await underLoad(instances, 'lag', async () => {
        for (let i = 0; i < 6; i++) {
          const replica = await ha.cluster.pauseReplay();
          await sleep(1000);
          await ha.cluster.resumeReplay(replica);
          await sleep(300);
        }
      });
      report(ha.cluster, 'replica lag', run);
      await assertCallersSaw(ha.cluster, instances, run.answers, run.outage, { pageViewsDuringOutage: 'all' });
      assert.equal(countWriteErrors(run.answers).failed, 0, 'no create is refused: the primary was there all along');
    });

    it(`${PAIRS} create-then-lookup pairs, each lookup through the other instance: every one finds its group`, async () => {
      await ha.cluster.restoreNodes();
      const readsBefore = await replicaReads(instances);
      const auth = { authorization: `Token ${instances.apiToken}` };
      const failures: string[] = [];
      let next = 0;
      const chain = async (worker: number) => {
        for (let n = next++; n < PAIRS; n = next++) {
          const id = `pair-${n}`;
          const writer = (n + worker) % 2;
          const created = await request(instances.urls[writer], 'POST', '/api/user', { headers: auth, body: { user_group_id: id } });
          if (created.status !== 201) {
            failures.push(`${id}: create answered ${created.status} ${JSON.stringify(created.body)}`);
            continue;
          }
          const found = await request(instances.urls[1 - writer], 'GET', `/api/user/lookup?user_group_id=${id}`, { headers: auth });
          if (found.status !== 200 || found.body.user_group?.team_id !== created.body.user_group?.team_id) {
            failures.push(`${id}: lookup through the other instance answered ${found.status} ${JSON.stringify(found.body)}`);
          }
        }
      };
      await Promise.all(Array.from({ length: 8 }, (_, worker) => chain(worker)));
      assert.deepEqual(failures.slice(0, 20), [], `${failures.length} of ${PAIRS} pairs failed`);
      const readsOnReplica = (await replicaReads(instances)) - readsBefore;
      console.log(`pairs: ${PAIRS} create-then-lookup pairs; ${readsOnReplica} page-view reads answered by the replica meanwhile`);
      assert.ok(readsOnReplica > 0, 'the replica answered page-view reads meanwhile (ugs_database_reads_total{pool="replica"})');
    });
  });
});
