// One account's backlog of change events does not hold back another account's (docs/api.md,
// "Change events"): the sequencer numbers a batch's events at most 500 per account, so an
// event of another account goes in the next batch, not behind every event already waiting.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, forEachBackend, issueTestToken, openTestDatabase } from './helpers/harness.ts';
import { appendEvents } from '../src/outbox/outbox.ts';
import { inTransaction } from '../src/db/transaction.ts';
import { eventually } from './helpers/wait.ts';

const BACKLOG = 20_000;

forEachBackend('change events: one account against another', (backend) => {
  it(`sequencing: another account's change reaches its feed while one account's ${BACKLOG.toLocaleString('en-US')} waiting events are still being numbered`, async () => {
    const database = await openTestDatabase(backend);
    try {
      await issueTestToken(database.handle, { account: 'backlog' });
      const other = await issueTestToken(database.handle, { account: 'other' });
      const account = await database.handle.db.selectFrom('accounts').select('id').where('slug', '=', 'backlog').executeTakeFirstOrThrow();
      const backlogId = Number(account.id);
      // What a large bulk write leaves in the outbox, committed before the other account's change.
      const occurredAt = new Date();
      await inTransaction(database.handle, (trx) =>
        appendEvents(
          trx,
          Array.from({ length: BACKLOG }, (_, i) => ({
            accountId: backlogId,
            environment: 'Customer' as const,
            type: 'user_group.updated' as const,
            occurredAt,
            data: { user_group_id: `backlog-${i}`, api_environment_tag: 'Customer', changes: { name: { old: 'a', new: 'b' } } },
          })),
        ),
      );
      const { app, request } = await buildTestApp(database);
      try {
        const created = await request('POST', '/api/user', { token: other.token, body: { user_group_id: 'other-1' } });
        assert.equal(created.status, 201, created.text);
        await eventually("the other account's event in its feed", async () => {
          const feed = await request('GET', '/api/events', { token: other.token, query: { types: 'user_group.created' } });
          assert.equal(feed.status, 200, feed.text);
          return feed.body.events.some((event: { data: { user_group_id?: string } }) => event.data.user_group_id === 'other-1');
        });
        // The sequencer runs in this process: at most a batch or two went by since the event was seen.
        const numbered = await database.handle.db
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<number | string>().as('count'))
          .where('account_id', '=', backlogId)
          .executeTakeFirstOrThrow();
        assert.ok(
          Number(numbered.count) < BACKLOG,
          `the other account's event came only after all ${BACKLOG} of the backlog were numbered (${numbered.count} were)`,
        );
      } finally {
        await app.close();
      }
    } finally {
      await database.close();
    }
  });
});
