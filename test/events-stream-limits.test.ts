// The limits on open event streams (docs/api.md, "The stream"; docs/security.md, "Limits on
// open event streams"): per API token and per account, on all instances together, over real
// sockets. One more stream is 429 too_many_streams with the limit; a stream that ends frees
// its slot; another account is never counted.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import SQLite from 'better-sqlite3';
import { forEachBackend, useTestApp } from './helpers/harness.ts';
import { openSse, useStreams, type SseStream } from './helpers/sse.ts';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { issueTokenWithCli, spawnServers, type ServerProcess } from './helpers/processes.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The refusal of a stream over a limit, as a client sees it. */
function assertRefused(refused: SseStream, limit: RegExp): void {
  assert.equal(refused.status, 429, refused.text);
  const body = JSON.parse(refused.text);
  assert.equal(body.error.code, 'too_many_streams');
  assert.match(body.error.message, limit);
  assert.ok(Number(refused.headers['retry-after']) > 0, 'Retry-After');
}

/** Opens a stream, trying again while a slot is not yet free (the server learns of a closed stream a moment after the client closed it). */
async function openOnceFree(open: () => Promise<SseStream>): Promise<SseStream> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const stream = await open();
    if (stream.status !== 429 || Date.now() > deadline) return stream;
    await sleep(50);
  }
}

forEachBackend('change events: limits on open streams', (backend) => {
  const t = useTestApp(backend, { config: { eventStreamsPerToken: 2, eventStreamsPerAccount: 3 } });
  const streams = useStreams(t);
  const stream = (token: string) => streams.open('/api/events/stream', { token });

  it('stream limits: a token holds 2 streams and its account 3; the next is 429 too_many_streams with the limit, closing one frees a slot, another account is not counted', async () => {
    const { token: first } = await t.issueToken({ account: 'limits-a' });
    const { token: second } = await t.issueToken({ account: 'limits-a' });
    const { token: other } = await t.issueToken({ account: 'limits-b' });

    const a1 = await stream(first);
    const a2 = await stream(first);
    assert.deepEqual([a1.status, a2.status], [200, 200]);
    assertRefused(await stream(first), /this API token has 2 event streams open, the most one token may have \(2\)/);

    a1.close();
    const again = await openOnceFree(() => stream(first));
    assert.equal(again.status, 200, 'a closed stream frees its slot');

    const ofSecond = await stream(second);
    assert.equal(ofSecond.status, 200, 'another token of the account: its own slots, up to the account limit');
    assertRefused(await stream(second), /this account has 3 event streams open, the most one account may have \(3\)/);

    const ofOther = [await stream(other), await stream(other)];
    assert.deepEqual(
      ofOther.map((s) => s.status),
      [200, 200],
      "another account's streams are its own",
    );
  });

  it("stream limits: a stream closed while another process holds SQLite's write lock frees its slot once the lock is let go, not when its lease lapses", async (context) => {
    if (backend !== 'sqlite') return context.skip('SQLite only: PostgreSQL waits for row locks by itself');
    const { token } = await t.issueToken({ account: 'limits-locked' });
    const [s1, s2] = [await stream(token), await stream(token)];
    assert.deepEqual([s1.status, s2.status], [200, 200]);
    // Another process writes: the app's connection finds the write lock taken.
    const other = new SQLite(t.databaseUrl.slice('sqlite:'.length));
    other.pragma('busy_timeout = 0');
    other.exec('begin immediate');
    try {
      s1.close();
      await sleep(1000); // the server notices the close and tries to delete the lease meanwhile
    } finally {
      other.exec('commit');
      other.close();
    }
    // The lease lasts 30 s: a slot that frees within 10 s was given back when the lock was let go.
    const again = await openOnceFree(() => stream(token));
    assert.equal(again.status, 200, again.text);
  });
});

forEachBackend('change events: limits on open streams across instances', (backend) => {
  let database: TestDatabase;
  const servers: ServerProcess[] = [];
  const open: SseStream[] = [];
  before(async () => {
    database = await createTestDatabase(backend);
  });
  after(async () => {
    for (const s of open) s.close();
    await Promise.all(servers.map((s) => s.stop('SIGKILL')));
    await database?.drop();
  });

  it('stream limits: they hold across instances: a token with its one stream open on instance A is refused on instance B until that stream ends; six opened at once on both, one is accepted', async () => {
    const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'), UGS_EVENT_STREAMS_PER_TOKEN: '1' };
    const [a, b] = await spawnServers(2, env);
    servers.push(a, b);
    const { token } = await issueTokenWithCli(env, ['--account', 'two-instances']);
    const onA = await openSse(a.baseUrl, '/api/events/stream', { token });
    open.push(onA);
    assert.equal(onA.status, 200);
    const onB = await openSse(b.baseUrl, '/api/events/stream', { token });
    open.push(onB);
    assertRefused(onB, /the most one token may have \(1\)/);
    onA.close();
    const later = await openOnceFree(() => openSse(b.baseUrl, '/api/events/stream', { token }));
    open.push(later);
    assert.equal(later.status, 200, later.text);

    // Opened at once on both instances, at the limit: one is accepted, never two.
    const { token: racing } = await issueTokenWithCli(env, ['--account', 'two-instances']);
    const raced = await Promise.all([a, b, a, b, a, b].map((server) => openSse(server.baseUrl, '/api/events/stream', { token: racing })));
    open.push(...raced);
    assert.deepEqual(raced.map((s) => s.status).sort(), [200, 429, 429, 429, 429, 429]);
  });
});
