// SQLite with another process writing (docs/api.md, "Concurrency and durability"): a write that
// finds the file's write lock held by another process waits for it in its place in this
// process's line, so the writes of this process that came after it do not pass it. (Letting go
// of its place sent it behind every write queued meanwhile: under one account's bulk work,
// another account's create waited seconds.)
import { it } from 'node:test';
import assert from 'node:assert/strict';
import SQLite from 'better-sqlite3';
import { buildTestApp, issueTestToken, openTestDatabase } from './helpers/harness.ts';
import { eventually } from './helpers/wait.ts';

const LATER = 10;

it("SQLite: a create that waits for another process's write lock commits before the creates that came after it", async () => {
  let busy = 0;
  const database = await openTestDatabase('sqlite', {
    onQuery: (event) => {
      if (event.level === 'error' && /^begin immediate/.test(event.query.sql)) busy++;
    },
  });
  const other = new SQLite(database.url.slice('sqlite:'.length));
  try {
    const { token } = await issueTestToken(database.handle, { account: 'order' });
    const { request } = await buildTestApp(database);
    assert.equal((await request('POST', '/api/user', { token, body: { user_group_id: 'warm-up' } })).status, 201);
    // Another process takes the write lock; the first create finds it held.
    other.exec('begin immediate');
    const first = request('POST', '/api/user', { token, body: { user_group_id: 'first' } });
    await eventually('the first create waiting for the lock', () => busy > 0);
    const later = Array.from({ length: LATER }, (_, i) => request('POST', '/api/user', { token, body: { user_group_id: `later-${i}` } }));
    await new Promise((resolve) => setTimeout(resolve, 20));
    other.exec('commit');
    const answers = await Promise.all([first, ...later]);
    for (const answer of answers) assert.equal(answer.status, 201, answer.text);
    const [firstGroup, ...laterGroups] = answers.map((answer) => answer.body.user_group!.team_id);
    assert.ok(
      laterGroups.every((teamId) => teamId > firstGroup),
      `the first create got team_id ${firstGroup}, the later ones ${laterGroups.join(', ')}`,
    );
  } finally {
    other.close();
    await database.close();
  }
});
