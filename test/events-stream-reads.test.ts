// One account's many event streams read the feed a few at a time on an instance (docs/api.md,
// "The stream"), so that they cannot hold most of the database's connections while another
// account's requests wait for one. PostgreSQL, where reads run side by side on the pool; on
// SQLite every statement of a process runs one after the other anyway.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, forEachBackend, issueTestToken, openTestDatabase, type BuiltApp, type OpenDatabase } from './helpers/harness.ts';
import { openSse, type SseStream } from './helpers/sse.ts';

const STREAMS = 20;
const GROUPS = 300;

forEachBackend('change events: an account with many streams', (backend) => {
  let database: OpenDatabase;
  let built: BuiltApp;
  let baseUrl: string;
  const open: SseStream[] = [];

  before(async () => {
    database = await openTestDatabase(backend);
    built = await buildTestApp(database);
    baseUrl = await built.app.listen({ host: '127.0.0.1', port: 0 });
  });

  after(async () => {
    for (const stream of open) stream.close();
    await built?.app.close();
    await database?.close();
  });

  it(`streams: ${STREAMS} streams of one account, woken together by each batch of its events, read the feed a few at a time, never most of the pool's connections, and each gets every event`, {
    skip: backend !== 'postgres' && 'PostgreSQL only: SQLite runs one statement of a process at a time whatever the streams do',
  }, async () => {
    const { token } = await issueTestToken(database.handle, { account: 'many-streams' });
    for (let i = 0; i < STREAMS; i++) {
      const stream = await openSse(baseUrl, '/api/events/stream?types=user_group.created', { token });
      assert.equal(stream.status, 200, stream.text);
      open.push(stream);
    }
    // Meanwhile, how many of the instance's pooled connections are in use at once. Besides the
    // streams' reads (two at most), the sequencer and this test's upsert use one each, and a
    // background loop may: the pool has 10, which 20 streams woken together used to take.
    const pool = database.handle.pool!;
    let inUse = 0;
    let most = 0;
    const acquired = () => {
      inUse++;
      most = Math.max(most, inUse);
    };
    const released = () => inUse--;
    pool.on('acquire', acquired);
    pool.on('release', released);
    for (let start = 0; start < GROUPS; start += 50) {
      const res = await built.request('POST', '/api/users/upsert', {
        token,
        body: { user_groups: Array.from({ length: 50 }, (_, i) => ({ user_group_id: `streamed-${start + i}` })) },
      });
      assert.equal(res.status, 200, res.text);
    }
    await Promise.all(open.map((stream) => stream.waitForEvents(GROUPS)));
    pool.off('acquire', acquired);
    pool.off('release', released);
    assert.ok(most <= 5, `${most} of the pool's connections were in use at once`);
  });
});
