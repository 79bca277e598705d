// A rolling upgrade on PostgreSQL, as docs/operations.md ("Upgrades, migrations and rollback")
// tells an operator to run it: two instances of the previous release (release/previous.json,
// built from its commit) serve; one of this code starts beside them and expands the database;
// then each old one is taken out of the load balancer and stopped, and replaced by a new one.
// Writes go through every serving instance all along, a webhook endpoint and an event stream
// follow the feed. Nothing answers 5xx, and no event is lost, skipped or delivered twice.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { POSTGRES_URL, createTestDatabase } from './helpers/backends.ts';
import { httpRequest, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { PREVIOUS, runPreviousUgs, spawnPreviousServer } from './helpers/previous-release.ts';
import { PUBLIC_URL, recordedExpandChanges } from './helpers/historical-data.ts';
import { openSse, type SseStream } from './helpers/sse.ts';
import { Receiver, sleep } from './helpers/webhook-receiver.ts';
import { eventually } from './helpers/wait.ts';
import { expandChanges } from '../src/db/migrate.ts';

const WRITERS = 4;

describe(`[postgres] a rolling upgrade from release ${PREVIOUS.version}: both versions serve one database`, {
  skip: POSTGRES_URL ? false : 'SKIPPED: TEST_POSTGRES_URL is not set',
}, () => {
  it('writes through every serving instance, a webhook endpoint and an event stream: no 5xx, every event delivered once, none skipped', async () => {
    const database = await createTestDatabase('postgres');
    const receiver = await new Receiver().start();
    const env = {
      DATABASE_URL: database.url,
      UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'),
      UGS_PUBLIC_URL: PUBLIC_URL,
      UGS_WEBHOOK_ALLOW_PRIVATE: 'true',
    };
    const running: ServerProcess[] = [];
    try {
      running.push(await spawnPreviousServer(env), await spawnPreviousServer(env));
      /** What the load balancer sends traffic to. */
      const serving = [...running];
      const issued = await runPreviousUgs(['token', 'create', '--account', 'acme', '--scopes', 'read,write,admin', '--json'], env);
      assert.equal(issued.code, 0, issued.stderr);
      const token = JSON.parse(issued.stdout).token as string;
      const endpoint = await httpRequest(serving[0].baseUrl, 'POST', '/api/webhook_endpoints', { token, body: { url: receiver.url } });
      assert.equal(endpoint.status, 201, endpoint.text);
      type FeedEvent = { id: number; type: string; data: { user_group_id?: string } };
      const feedAfter = async (baseUrl: string, after: number) => {
        const events: FeedEvent[] = [];
        for (let cursor = after; ; ) {
          const page = await httpRequest(baseUrl, 'GET', `/api/events?after=${cursor}&limit=500`, { token });
          assert.equal(page.status, 200, page.text);
          const more = (page.body as unknown as { events: FeedEvent[] }).events;
          if (more.length === 0) return events;
          events.push(...more);
          cursor = events.at(-1)!.id;
        }
      };
      // The endpoint's own event, once numbered (a moment after its commit): where the stream starts.
      const start = await eventually(
        "the endpoint's event in the feed",
        async () => (await feedAfter(serving[0].baseUrl, 0)).find((event) => event.type === 'webhook_endpoint.created')?.id,
      );

      // The stream: when its instance stops, the client reconnects to a serving one with Last-Event-ID, as EventSource does.
      const streamed: number[] = [];
      const reconnections: string[] = [];
      let stream: SseStream | undefined;
      let following = true;
      const follow = (async () => {
        let at = 0;
        while (following) {
          const baseUrl = serving[at++ % serving.length].baseUrl;
          const last = streamed.at(-1) ?? start;
          // A connection that fails is tried again elsewhere, as EventSource does; what counts is that no event is lost or repeated.
          const opened = await openSse(baseUrl, '/api/events/stream', { token, lastEventId: String(last) }).catch((err: Error) => {
            reconnections.push(`${baseUrl}: ${err.message}`);
            return undefined;
          });
          if (!opened) continue;
          stream = opened;
          assert.equal(stream.status, 200, stream.text);
          let seen = 0;
          const taking = (async () => {
            while (!(await Promise.race([stream!.ended.then(() => true), sleep(20).then(() => false)]))) {
              for (; seen < stream!.events.length; seen++) streamed.push(Number(stream!.events[seen].id));
            }
            for (; seen < stream!.events.length; seen++) streamed.push(Number(stream!.events[seen].id));
          })();
          await taking;
        }
      })();

      const send = (baseUrl: string, method: string, body: unknown) =>
        httpRequest(baseUrl, method, '/api/user', { token, body, newConnection: true }).catch((err: Error) => {
          throw new Error(`${method} ${baseUrl} (${serving.map((s) => s.baseUrl).join(', ')} serving): ${err.message}`);
        });
      // The writers: each write to the next serving instance, on a connection of its own (a load balancer's).
      const statuses: number[] = [];
      let writing = true;
      /** The event each acknowledged write must have: its type and group. */
      const acknowledged: string[] = [];
      const writers = Array.from({ length: WRITERS }, async (_, w) => {
        for (let i = 0; writing; i++) {
          const baseUrl = serving[(w + i) % serving.length].baseUrl;
          const id = `g-${w}-${i}`;
          const created = await send(baseUrl, 'POST', { user_group_id: id, group_tags: [`t${i % 3}`] });
          statuses.push(created.status);
          const next = serving[(w + i + 1) % serving.length].baseUrl;
          const updated = await send(next, 'PUT', { user_group_id: id, properties: { step: i } });
          statuses.push(updated.status);
          if (created.status === 201) acknowledged.push(`user_group.created ${id}`);
          if (updated.status === 200) acknowledged.push(`user_group.updated ${id}`);
        }
      });

      // The rollout.
      const takeOut = async (server: ServerProcess) => {
        serving.splice(serving.indexOf(server), 1);
        await sleep(1000); // the load balancer's deregistration delay: requests already sent to it finish
        stream?.close();
        assert.deepEqual(await server.stop(), { code: 0, signal: null }, server.output());
      };
      await sleep(1000);
      const [old1, old2] = running;
      const new1 = await spawnServer(env);
      running.push(new1);
      assert.deepEqual(
        await recordedExpandChanges(database.url),
        expandChanges('postgres').map((change) => change.name),
        'the first new instance expands the database while the old ones serve',
      );
      serving.push(new1);
      await sleep(1500);
      await takeOut(old1);
      const new2 = await spawnServer(env);
      running.push(new2);
      serving.push(new2);
      await sleep(1500);
      await takeOut(old2);
      await sleep(1000);
      writing = false;
      await Promise.all(writers);

      assert.ok(acknowledged.length >= 40, `writes went through: ${acknowledged.length}`);
      const failures = statuses.filter((status) => status >= 500);
      assert.deepEqual(failures, [], 'no 5xx during the rollout');
      assert.deepEqual(
        statuses.filter((status) => status !== 200 && status !== 201),
        [],
        'every write answered 200 or 201',
      );

      // Events are numbered after their commit (docs/api.md, "Change events"): the last ones come a moment later.
      const written = (event: FeedEvent) => `${event.type} ${event.data.user_group_id}`;
      let events: FeedEvent[] = [];
      await eventually(
        () => `every acknowledged write has its event: ${acknowledged.length}, the feed has ${events.length}`,
        async () => {
          events = await feedAfter(new1.baseUrl, start);
          const inFeed = new Set(events.map(written));
          return acknowledged.every((write) => inFeed.has(write));
        },
      );
      const writes = events.map(written).filter((write) => write.startsWith('user_group.'));
      assert.equal(new Set(writes).size, writes.length, 'each write has one event');
      const others = events.filter((event) => !event.type.startsWith('user_group.'));
      if (others.length > 0) console.log(`upgrade-rollout: events besides the writes: ${others.map(written).join(', ')}`);
      // What the feed holds once nothing more comes: what the stream and the webhook must have given.
      await sleep(500);
      const feed = (await feedAfter(new1.baseUrl, start)).map((event) => event.id);
      await eventually('the stream has every event', () => streamed.length >= feed.length);
      following = false;
      stream?.close();
      await follow;
      assert.deepEqual(streamed, feed, 'the stream, across reconnections to other instances and versions, gives each event once, in order');

      await eventually('the webhook endpoint has every event', () =>
        feed.every((id) => receiver.received.some((request) => JSON.parse(request.body).id === id)),
      );
      await sleep(500); // a second delivery of anything would show now
      // Delivery is at least once (docs/api.md, "Webhooks"): an instance stopped while a receiver
      // answers sends that event again under the same webhook-id, which the receiver deduplicates
      // by. Delivered twice would be one event under two webhook-ids, or in two places of the order.
      const received = receiver.received.map((request) => ({ webhookId: String(request.headers['webhook-id']), id: JSON.parse(request.body).id as number }));
      const byEvent = new Map<number, Set<string>>();
      for (const { id, webhookId } of received) byEvent.set(id, (byEvent.get(id) ?? new Set()).add(webhookId));
      assert.deepEqual(
        [...byEvent].filter(([, ids]) => ids.size > 1),
        [],
        'each event under one webhook-id',
      );
      const deduplicated = received.filter(({ webhookId }, i) => received.findIndex((r) => r.webhookId === webhookId) === i);
      const resent = received.length - deduplicated.length;
      if (reconnections.length > 0) console.log(`upgrade-rollout: the stream's connection failed and was opened again: ${reconnections.join('; ')}`);
      if (resent > 0) console.log(`upgrade-rollout: ${resent} delivery sent again after an instance stopped (same webhook-id)`);
      assert.deepEqual(
        deduplicated.map(({ id }) => id).filter((id) => id > start),
        feed,
        `the webhook got every event after the endpoint was made, in order; not in the feed: ${receiver.received
          .map((request) => request.body)
          .filter((body) => !feed.includes(JSON.parse(body).id) && JSON.parse(body).id > start)
          .join(' ')}`,
      );
    } finally {
      await Promise.all(running.map((server) => server.stop('SIGKILL')));
      await receiver.stop();
      await database.drop();
    }
  });
});
