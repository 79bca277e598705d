// One instance at a time works on a webhook endpoint, under a lease on its row
// (src/webhooks/webhook-leases.ts). Taking and giving back that lease are writes that can fail
// for real reasons: SQLite's write lock held by another process longer than a write waits for
// it, PostgreSQL's statement timeout behind another transaction's lock on the row. Once the
// database answers again, the endpoint's deliveries go on: a failed claim does not cost the
// account its place on the instance, and a lease its instance could not give back is taken
// back by that instance at once, not when it runs out 30 s later. A lock held for a moment
// fails nothing: the lease statements wait for it as transactions do. (Two instances writing
// at once made these happen: test/webhook-fan-out.test.ts.)
import { it } from 'node:test';
import assert from 'node:assert/strict';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { forEachBackend, openTestDatabase, buildTestApp, issueTestToken, LogCapture, type BuiltApp } from './helpers/harness.ts';
import type { Backend } from './helpers/backends.ts';
import { createEndpoint, Receiver, WEBHOOK_CONFIG } from './helpers/webhook-receiver.ts';
import { eventually } from './helpers/wait.ts';
import type { Config } from '../src/config.ts';
import { SQLITE_LOCK_WAIT_MS } from '../src/db/sqlite-lock.ts';
import type { LogEvent } from 'kysely';

const ADMIN = ['read', 'write', 'admin'] as const;
/** How long a write waits for SQLite's write lock here, unless told (5 s in production): the failures come sooner. */
const SHORT_LOCK_WAIT_MS = 250;

/** The app's clock: moved on, or stopped, by the test (real time otherwise). */
class TestClock {
  offsetMs = 0;
  private stoppedAt: number | undefined;
  readonly now = () => new Date((this.stoppedAt ?? Date.now()) + this.offsetMs);
  stop(): void {
    this.stoppedAt ??= Date.now();
  }
}

interface LeaseTestApp extends BuiltApp {
  backend: Backend;
  databaseUrl: string;
  clock: TestClock;
  log: LogCapture;
  db: Awaited<ReturnType<typeof openTestDatabase>>['handle']['db'];
  token: string;
  /** Every statement the app ran, and every one that failed (Kysely's log). */
  statements: LogEvent[];
}

async function startApp(
  backend: Backend,
  { config = {}, lockWaitMs = SHORT_LOCK_WAIT_MS }: { config?: Partial<Config>; lockWaitMs?: number },
  after: (fn: () => Promise<void>) => void,
): Promise<LeaseTestApp> {
  const clock = new TestClock();
  const log = new LogCapture();
  const statements: LogEvent[] = [];
  const database = await openTestDatabase(backend, { lockWaitMs, onQuery: (event) => statements.push(event) });
  const built = await buildTestApp(database, { config: { ...WEBHOOK_CONFIG, ...config }, log, now: clock.now });
  after(async () => {
    await built.app.close();
    await database.close();
  });
  await built.app.ready();
  const { token } = await issueTestToken(database.handle, { account: 'wh-lease', scopes: [...ADMIN] });
  return { ...built, backend, databaseUrl: database.url, clock, log, db: database.handle.db, token, statements };
}

/**
 * Keeps the endpoint's row from being written until release(), as another process would: on
 * SQLite another connection's write lock (on the whole file), on PostgreSQL another
 * transaction's lock on the row.
 */
async function holdEndpointRow(app: LeaseTestApp, endpointId: number): Promise<{ release(): Promise<void> }> {
  if (app.backend === 'sqlite') {
    const connection = new SQLite(app.databaseUrl.slice('sqlite:'.length));
    // The app runs in this process: waiting for its lock here must not block its event loop.
    connection.pragma('busy_timeout = 0');
    await eventually('the SQLite write lock', () => {
      try {
        connection.exec('begin immediate');
        return true;
      } catch (err) {
        if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
        return false;
      }
    });
    return {
      async release() {
        connection.exec('commit');
        connection.close();
      },
    };
  }
  const client = new pg.Client({ connectionString: app.databaseUrl });
  await client.connect();
  await client.query('begin');
  await client.query('select id from webhook_endpoints where id = $1 for update', [endpointId]);
  return {
    async release() {
      await client.query('commit');
      await client.end();
    },
  };
}

const dispatcherFailures = (app: LeaseTestApp) =>
  app.log.lines.filter((line) => line.loop === 'webhook dispatcher' && /failed; will try again/.test(String(line.msg)));

/** Resolves once the webhook dispatcher has logged a failure (the first is logged at once). */
function dispatcherFailed(app: LeaseTestApp): Promise<unknown> {
  return eventually('a failure logged by the webhook dispatcher', () => dispatcherFailures(app)[0]);
}

/**
 * Another instance held the endpoint and died: its lease runs out in an hour of the app's
 * clock. Then an event it takes is in the feed (the endpoint is due from the same commit).
 */
async function leftByDeadInstance(app: LeaseTestApp, endpointId: number, groupId: string): Promise<void> {
  await app.db
    .updateTable('webhook_endpoints')
    .set({ lease_owner: 'an-instance-that-died', lease_until: new Date(app.clock.now().getTime() + 3_600_000).toISOString() })
    .where('id', '=', endpointId)
    .execute();
  await createGroup(app, groupId);
  await eventually(
    'the event in the feed',
    async () => (await app.request('GET', '/api/events', { token: app.token, query: { types: 'user_group.created' } })).body.events?.length === 1,
  );
}

/** The dead instance's lease runs out, and this instance tries to take the endpoint. */
const outliveDeadLease = (app: LeaseTestApp) => (app.clock.offsetMs += 2 * 3_600_000);

async function createGroup(app: LeaseTestApp, id: string): Promise<void> {
  const res = await app.request('POST', '/api/user', { token: app.token, body: { user_group_id: id } });
  assert.equal(res.status, 201, res.text);
}

const groupOf = (request: { body: string }) => JSON.parse(request.body).data.user_group_id;

forEachBackend('webhook leases', (backend) => {
  it('webhooks leases: an endpoint the instance failed to take (the database busy past its wait) still gets its events once the database answers', async (t) => {
    // One place per account: a place the failed claim kept would leave none.
    const app = await startApp(backend, { config: { webhookAccountConcurrency: 1 } }, (fn) => t.after(fn));
    const r = await new Receiver().start();
    t.after(() => r.stop());
    const endpoint = await createEndpoint(app, app.token, { url: r.url, types: ['user_group.created'] });
    await leftByDeadInstance(app, endpoint.id, 'waiting');
    const held = await holdEndpointRow(app, endpoint.id);
    try {
      outliveDeadLease(app);
      await dispatcherFailed(app);
    } finally {
      await held.release();
    }
    const received = await r.until((all) => all.some((request) => groupOf(request) === 'waiting'));
    assert.deepEqual(received.map(groupOf), ['waiting']);
  });

  it('webhooks leases: an endpoint whose lease its instance failed to give back gets its next event at once, not when the lease runs out', async (t) => {
    const app = await startApp(backend, {}, (fn) => t.after(fn));
    const r = await new Receiver().start();
    t.after(() => r.stop());
    const endpoint = await createEndpoint(app, app.token, { url: r.url, types: ['user_group.created'] });
    let held: { release(): Promise<void> } | undefined;
    r.answer = async (_request, index) => {
      if (index === 0) {
        // From here the app's clock stands still: the lease taken before this attempt never runs out.
        app.clock.stop();
        held = await holdEndpointRow(app, endpoint.id);
      }
      return 200;
    };
    await createGroup(app, 'first');
    const lock = await eventually('the first attempt', () => held);
    try {
      // What follows the attempt fails for as long as the row is held, giving the lease back last.
      await dispatcherFailed(app);
    } finally {
      await lock.release();
    }
    await createGroup(app, 'second');
    const received = await r.until((all) => all.some((request) => groupOf(request) === 'second'));
    const firsts = [...new Map(received.map((request) => [request.headers['webhook-id'], groupOf(request)])).values()];
    assert.deepEqual(firsts, ['first', 'second'], 'in the order of the feed (the first again, with its webhook-id, if its outcome was not recorded)');
  });

  if (backend === 'sqlite')
    it("webhooks leases: while another process holds SQLite's write lock for a moment, the endpoint is taken once it lets go, and nothing fails", async (t) => {
      const app = await startApp(backend, { lockWaitMs: SQLITE_LOCK_WAIT_MS }, (fn) => t.after(fn));
      const r = await new Receiver().start();
      t.after(() => r.stop());
      const endpoint = await createEndpoint(app, app.token, { url: r.url, types: ['user_group.created'] });
      await leftByDeadInstance(app, endpoint.id, 'waiting');
      const held = await holdEndpointRow(app, endpoint.id);
      try {
        outliveDeadLease(app);
        await eventually('an attempt to take the endpoint while the lock is held', () =>
          app.statements.some((event) => event.level === 'error' && /^update "webhook_endpoints" set "lease_owner"/.test(event.query.sql)),
        );
      } finally {
        await held.release();
      }
      const received = await r.until((all) => all.some((request) => groupOf(request) === 'waiting'));
      assert.deepEqual(received.map(groupOf), ['waiting']);
      assert.deepEqual(dispatcherFailures(app), [], 'the claim waited for the lock, as a transaction does');
    });
});
