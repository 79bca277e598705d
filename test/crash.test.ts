// A bug that escapes every handler (an uncaught exception, an unhandled rejection) ends the
// server with a non-zero exit, after it has logged the error and written out the log lines
// still waiting in the batch (log-stream.ts), which a crash used to lose.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { ROOT, httpRequest, issueTokenWithCli, spawnServer } from './helpers/processes.ts';

interface Line {
  level?: number;
  msg?: string;
  route?: string;
  kind?: string;
  err?: { message?: string; stack?: string };
}

const lines = (output: string): Line[] =>
  output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);

describe('a crash', () => {
  const databases: TestDatabase[] = [];
  after(async () => {
    for (const database of databases) await database.drop();
  });

  for (const [kind, crashAs] of [
    ['uncaught exception', 'exception'],
    ['unhandled rejection', 'rejection'],
  ] as const) {
    it(`crash (${kind}): the error and the batched log lines are written, and the exit is non-zero`, async () => {
      const database = await createTestDatabase('sqlite');
      databases.push(database);
      const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'), CRASH_AS: crashAs };
      const { token } = await issueTokenWithCli(env);
      const server = await spawnServer(env, { nodeArgs: ['--import', path.join(ROOT, 'test/helpers/crash-on-signal.mjs')] });
      const answered = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: `before-the-${crashAs}` } });
      assert.equal(answered.status, 201);
      // At once: the request's log line is still in the batch (written at 4 KiB or every 200 ms).
      const ended = await server.stop('SIGUSR2');
      assert.deepEqual(ended, { code: 1, signal: null }, server.output());
      const logged = lines(server.output());
      assert.ok(
        logged.some((l) => l.msg === 'request' && l.route === '/api/user'),
        `the request's line, batched before the crash, was written:\n${server.output()}`,
      );
      const fatal = logged.find((l) => l.level === 60);
      assert.equal(fatal?.kind, kind, server.output());
      assert.match(fatal?.err?.message ?? '', /^crash test: /);
      assert.ok(!server.output().includes(token), 'no token in the output');
    });
  }
});
