import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from '../src/db/kysely.ts';
import {
  buildTestApp,
  forEachBackend,
  issueTestToken,
  LogCapture,
  newSecretKey,
  openTestDatabase,
  type AnyAnswer,
  type HttpResult,
  type OpenDatabase,
} from './helpers/harness.ts';

const GENERIC_MESSAGE = 'internal error; quote the request id when reporting it';

/** The body is the generic envelope and nothing else: no stack, no SQL, no driver text. */
function assertGeneric500(res: HttpResult<AnyAnswer>): string {
  assert.equal(res.status, 500, res.text);
  const requestId = res.headers['x-request-id'] as string;
  assert.ok(requestId);
  assert.deepEqual(res.body, { success: 0, error: { code: 'internal_error', message: GENERIC_MESSAGE, request_id: requestId } });
  for (const leak of [/user_groups/i, /select/i, /sqlite/i, /relation/i, /\bat .*\.ts:\d+/, /no secret key/i, /ugs_grp_/]) {
    assert.doesNotMatch(res.text, leak);
  }
  return requestId;
}

/** The log has the details of the failure under the request id the caller saw. */
function assertLogged(log: LogCapture, requestId: string, detail: RegExp): void {
  const errorLines = log.lines.filter((l) => l.request_id === requestId && l.level === 50);
  assert.equal(errorLines.length, 1, `expected one error line for ${requestId} in:\n${log.text()}`);
  const err = errorLines[0].err as { message?: string; stack?: string };
  assert.match(String(err?.message), detail);
  assert.ok(err?.stack, 'the logged error has its stack');
  const requestLine = log.lines.find((l) => l.request_id === requestId && l.msg === 'request');
  assert.equal(requestLine?.status, 500);
}

forEachBackend('5xx bodies are generic, the log keeps the details', (backend) => {
  let db: OpenDatabase;
  before(async () => {
    db = await openTestDatabase(backend);
  });
  after(() => db.close());

  // (A whole table missing is the data gone, not a bug: 503 storage_unavailable, test/postgres-outage.test.ts.)
  it('a column missing under the app: 500 internal_error, the SQL error only in the log', async () => {
    const log = new LogCapture();
    const t = await buildTestApp(db, { log });
    await t.app.ready();
    try {
      const { token } = await issueTestToken(db.handle);
      assert.equal((await t.request('POST', '/api/user', { token, body: { user_group_id: 'g1' } })).status, 201);
      await sql`alter table user_groups rename column mapping to mapping_gone`.execute(db.handle.db);
      try {
        const res = await t.request('GET', '/api/user', { token, query: { user_group_id: 'g1' }, headers: { 'x-request-id': 'trace-123' } });
        assert.equal(assertGeneric500(res), 'trace-123');
        assertLogged(log, 'trace-123', /mapping/);
        const listed = await t.request('GET', '/api/users', { token });
        assertLogged(log, assertGeneric500(listed), /mapping/);
      } finally {
        await sql`alter table user_groups rename column mapping_gone to mapping`.execute(db.handle.db);
      }
      assert.ok(!log.text().includes(token), 'the log holds an API token');
    } finally {
      await t.app.close();
    }
  });

  it('a table missing under the app (its data gone): 503 storage_unavailable with Retry-After, one error line, no SQL in the body', async () => {
    const log = new LogCapture();
    const t = await buildTestApp(db, { log });
    await t.app.ready();
    try {
      const { token } = await issueTestToken(db.handle);
      await sql`alter table user_groups rename to user_groups_gone`.execute(db.handle.db);
      try {
        const res = await t.request('GET', '/api/user', { token, query: { user_group_id: 'g1' } });
        assert.equal(res.status, 503, res.text);
        assert.equal(res.body.error.code, 'storage_unavailable');
        assert.ok(Number(res.headers['retry-after']) > 0);
        for (const leak of [/user_groups/i, /select/i, /sqlite/i, /relation/i]) assert.doesNotMatch(res.text, leak);
        assert.equal((await t.request('GET', '/api/users', { token })).status, 503);
        const alarms = log.lines.filter((l) => l.level === 50);
        assert.equal(alarms.length, 1, log.text());
        assert.match(String(alarms[0].msg), /database missing/);
      } finally {
        await sql`alter table user_groups_gone rename to user_groups`.execute(db.handle.db);
      }
    } finally {
      await t.app.close();
    }
  });

  it('a token sealed under a key that is not configured: 500, the key id only in the log, no token anywhere', async () => {
    const { token } = await issueTestToken(db.handle);
    const before = await buildTestApp(db);
    const created = await before.request('POST', '/api/user', { token, body: { user_group_id: 'sealed-elsewhere' } });
    assert.equal(created.status, 201);
    await before.app.close();

    const log = new LogCapture();
    const t = await buildTestApp(db, { log, keys: [newSecretKey()] });
    await t.app.ready();
    try {
      const res = await t.request('GET', '/api/user', { token, query: { user_group_id: 'sealed-elsewhere' } });
      assertLogged(log, assertGeneric500(res), /no secret key with id/);
      assert.ok(!log.text().includes(created.body.user_group.token), 'the log holds the user group token');
    } finally {
      await t.app.close();
    }
  });
});
