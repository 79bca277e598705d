// Writes and change events through two workers of one server (UGS_WORKERS=2; docs/operations.md,
// "Workers"), on real processes: a worker killed with SIGKILL loses no write it acknowledged
// and is replaced, and an event stream gets every change whichever worker holds it and
// whichever worker made the change. (The concurrency promises with two workers are in
// concurrency.test.ts.)
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { forEachBackend } from './helpers/harness.ts';
import { httpRequest, issueTokenWithCli, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { listAll } from './helpers/requests.ts';
import { openSse } from './helpers/sse.ts';
import { answeredBy, answeredSoFar, logLines, waitUntil, workerPids } from './helpers/workers.ts';

forEachBackend('writes through two workers', (backend) => {
  let database: TestDatabase;
  let server: ServerProcess;
  let env: Record<string, string>;

  before(async () => {
    database = await createTestDatabase(backend);
    env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    server = await spawnServer({ ...env, UGS_WORKERS: '2' });
  });

  after(async () => {
    await server?.stop('SIGKILL');
    await database?.drop();
  });

  it('workers: kill -9 of one worker loses no acknowledged write, and the primary logs it and starts another', async () => {
    const { token } = await issueTokenWithCli(env, ['--account', 'killed']);
    const [victim] = await workerPids(server, 2);
    const acknowledged = new Map<string, { teamId: number; requestId: string }>();
    let killed = false;
    let afterKill = 0;
    // 16 writers, each creating groups one after the other on its own keep-alive connection
    // (so both workers have writers), until the kill is well behind them. A connection the
    // primary was handing to the killed worker at that moment is never answered (Node's cluster
    // keeps it): its request is given up after a while, as a client's timeout would.
    const writer = async (n: number) => {
      for (let i = 0; afterKill < 100; i++) {
        const id = `killed-${n}-${i}`;
        const answer = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id }, timeoutMs: 15_000 }).catch(() => null);
        if (answer?.status === 201) {
          acknowledged.set(id, { teamId: answer.body.user_group.team_id, requestId: String(answer.headers['x-request-id']) });
          if (killed) afterKill++;
        }
      }
    };
    const writing = Promise.all(Array.from({ length: 16 }, (_, n) => writer(n)));
    await waitUntil(() => acknowledged.size >= 100, '100 acknowledged creates');
    const beforeKill = [...acknowledged.values()].map((a) => a.requestId);
    process.kill(victim, 'SIGKILL');
    killed = true;
    await writing;

    // (Its log lines of the last moments before the kill were still batched, and are lost.)
    await waitUntil(() => beforeKill.some((id) => answeredSoFar(server).get(id) === victim), 'the killed worker’s log line of a write it acknowledged');
    const stored = await listAll(server.baseUrl, token);
    const lost = [...acknowledged].filter(([id, { teamId }]) => stored.get(id)?.team_id !== teamId).map(([id]) => id);
    assert.deepEqual(lost, [], `of ${acknowledged.size} acknowledged creates`);

    const replaced = await workerPids(server, 2);
    assert.equal(replaced.includes(victim), false, 'a new worker in place of the killed one');
    const died = logLines(server).find((line) => line.msg === 'a worker died; starting another');
    assert.equal(died?.pid, server.child.pid, 'the primary logs it');
    assert.equal(died?.signal, 'SIGKILL');
  });

  it('workers: an event stream gets every change, whichever worker holds it and whichever worker made the change', async () => {
    const { token } = await issueTokenWithCli(env, ['--account', 'streamed']);
    await workerPids(server, 2);
    // Each stream is a connection of its own: the primary hands them to the workers in turn.
    const streams = await Promise.all(Array.from({ length: 4 }, () => openSse(server.baseUrl, '/api/events/stream?types=user_group.created', { token })));
    for (const stream of streams) assert.equal(stream.status, 200);
    const ids = Array.from({ length: 12 }, (_, i) => `streamed-${i}`);
    const creates = await Promise.all(
      ids.map((id) => httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id }, newConnection: true })),
    );
    assert.ok(creates.every((r) => r.status === 201));
    const writers = await answeredBy(
      server,
      creates.map((r) => String(r.headers['x-request-id'])),
    );
    assert.equal(new Set(writers.values()).size, 2, 'both workers made changes');

    for (const stream of streams) {
      const events = await stream.waitForEvents(ids.length);
      assert.deepEqual(events.map((e) => e.data.data.user_group_id).sort(), [...ids].sort());
      stream.close();
    }
    // Each stream's one log line comes when it ends: which worker held it.
    await waitUntil(() => logLines(server).filter((line) => line.route === '/api/events/stream').length === streams.length, 'the streams’ log lines');
    const holders = new Set(
      logLines(server)
        .filter((line) => line.route === '/api/events/stream')
        .map((line) => line.pid),
    );
    assert.equal(holders.size, 2, 'both workers held streams');
  });
});
