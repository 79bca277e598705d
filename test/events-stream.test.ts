// The stream of change events (docs/api.md, "Change events", "The stream"): Server-Sent
// Events over real sockets. It gives the feed's events in order, resumes after Last-Event-ID
// without losing or repeating one, shows a token only its account and environment, writes
// heartbeats, ends cleanly when the server shuts down, and carries events made on another
// instance of the same database.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { forEachBackend, useTestApp, createGroup, LogCapture, type SuiteApp } from './helpers/harness.ts';
import type { ChangeEventJson } from '../src/events/events.schemas.ts';
import { openSse, useStreams } from './helpers/sse.ts';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { spawn } from 'node:child_process';
import { ROOT, UGS_ENTRY, httpRequest, reapOnExit, issueTokenWithCli, spawnServer, spawnServers, type ServerProcess } from './helpers/processes.ts';
import { GENEROUS_WAIT_MS, eventually } from './helpers/wait.ts';

const GROUP_EVENTS = 'user_group.created,user_group.updated,user_group.token_rotated,user_group.deleted';

/** The feed of user groups' events, once it holds at least `count` (up to 5 s). */
async function feedUntil(t: Pick<SuiteApp, 'request'>, token: string, count: number): Promise<ChangeEventJson[]> {
  const deadline = Date.now() + GENEROUS_WAIT_MS;
  for (;;) {
    const res = await t.request('GET', '/api/events', { token, query: { limit: '500', types: GROUP_EVENTS } });
    assert.equal(res.status, 200, res.text);
    if (res.body.events.length >= count || Date.now() > deadline) return res.body.events;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

forEachBackend('change events: the stream', (backend) => {
  const log = new LogCapture();
  const t = useTestApp(backend, { config: { eventHeartbeatMs: 100, requestTimeoutMs: 1000, headersTimeoutMs: 1000 }, log });
  const { open: stream } = useStreams(t);

  it('stream: four changes to a group arrive in order, as id / event / data frames holding the event object', async () => {
    const { token } = await t.issueToken({ account: 'stream-four' });
    const sse = await stream(`/api/events/stream?types=${GROUP_EVENTS}`, { token });
    assert.equal(sse.status, 200);
    assert.match(String(sse.headers['content-type']), /^text\/event-stream/);
    const group = await createGroup(t, { user_group_id: 's4', properties: { plan: 'a' } }, token);
    assert.equal((await t.request('PUT', '/api/user', { token, body: { user_group_id: 's4', properties: { plan: 'b' } } })).status, 200);
    assert.equal((await t.request('POST', '/api/user', { token, body: { current_token: group.token } })).status, 200);
    assert.equal((await t.request('DELETE', '/api/user', { token, query: { user_group_id: 's4' } })).status, 200);

    const events = await sse.waitForEvents(4);
    assert.deepEqual(
      events.map((e) => e.event),
      ['user_group.created', 'user_group.updated', 'user_group.token_rotated', 'user_group.deleted'],
    );
    const feed = await t.request('GET', '/api/events', { token, query: { types: GROUP_EVENTS } });
    assert.deepEqual(
      events.map((e) => e.data),
      feed.body.events,
      'the same objects as the feed',
    );
    assert.deepEqual(
      events.map((e) => e.id),
      feed.body.events.map((e) => String(e.id)),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(sse.events.length, 4, 'nothing more, nothing twice');
  });

  it('stream: without a cursor it starts at the head; with Last-Event-ID (or after) it resumes with the next event, none lost or repeated', async () => {
    const { token } = await t.issueToken({ account: 'stream-resume' });
    await createGroup(t, { user_group_id: 'before-0' }, token);
    // The head is what is sequenced: wait until the create is.
    const head = (await feedUntil(t, token, 1)).at(-1)!.id;
    const first = await stream(`/api/events/stream?types=${GROUP_EVENTS}`, { token });
    for (let i = 1; i <= 3; i++) await createGroup(t, { user_group_id: `r-${i}` }, token);
    const seen = await first.waitForEvents(3);
    assert.deepEqual(
      seen.map((e) => e.data.data.user_group_id),
      ['r-1', 'r-2', 'r-3'],
      'only events after the head',
    );
    assert.ok(Number(seen[0].id) > Number(head));
    first.close();
    for (let i = 4; i <= 5; i++) await createGroup(t, { user_group_id: `r-${i}` }, token);

    // Resume after the second: the third, fourth and fifth, each once.
    const resumed = await stream('/api/events/stream?after=1', { token, lastEventId: seen[1].id });
    const rest = await resumed.waitForEvents(3);
    await createGroup(t, { user_group_id: 'r-6' }, token);
    const all = await resumed.waitForEvents(4);
    assert.deepEqual(
      all.map((e) => e.data.data.user_group_id),
      ['r-3', 'r-4', 'r-5', 'r-6'],
      'Last-Event-ID wins over after',
    );
    assert.equal(rest[0].id, seen[2].id, 'the event after Last-Event-ID comes first');
    assert.ok(Number(rest[0].id) < Number(rest[1].id) && Number(rest[1].id) < Number(rest[2].id), 'in order');

    const byQuery = await stream(`/api/events/stream?after=${seen[2].id}`, { token });
    assert.deepEqual(
      (await byQuery.waitForEvents(3)).map((e) => e.data.data.user_group_id),
      ['r-4', 'r-5', 'r-6'],
    );
  });

  it('stream: a cursor the feed does not have is 410 before the stream starts; a malformed one or an unknown type 400; no token 401', async () => {
    const { token } = await t.issueToken({ account: 'stream-refused' });
    const beyond = await stream('/api/events/stream', { token, lastEventId: String(Number.MAX_SAFE_INTEGER) });
    assert.equal(beyond.status, 410);
    assert.equal(JSON.parse(beyond.text).error.code, 'cursor_expired');
    const malformed = await stream('/api/events/stream', { token, lastEventId: 'abc' });
    assert.equal(malformed.status, 400);
    const unknownType = await stream('/api/events/stream?types=user_group.exploded', { token });
    assert.equal(unknownType.status, 400);
    assert.equal(JSON.parse(unknownType.text).error.code, 'validation_failed');
    const anonymous = await stream('/api/events/stream');
    assert.equal(anonymous.status, 401);
  });

  it("stream: an account's stream never shows another account's events; a token restricted to an environment sees only that environment's", async () => {
    const { token: a } = await t.issueToken({ account: 'stream-iso-a' });
    const { token: aTesting } = await t.issueToken({ account: 'stream-iso-a', env: 'Testing' });
    const { token: b } = await t.issueToken({ account: 'stream-iso-b' });
    const ofA = await stream(`/api/events/stream?types=${GROUP_EVENTS}`, { token: a });
    const ofATesting = await stream(`/api/events/stream?types=${GROUP_EVENTS}`, { token: aTesting });
    const ofB = await stream(`/api/events/stream?types=${GROUP_EVENTS}`, { token: b });
    await createGroup(t, { user_group_id: 'same', api_environment_tag: 'Customer' }, a);
    await createGroup(t, { user_group_id: 'same', api_environment_tag: 'Customer' }, b);
    await createGroup(t, { user_group_id: 'same', api_environment_tag: 'Testing' }, a);
    await createGroup(t, { user_group_id: 'b-marker', api_environment_tag: 'Testing' }, b);

    assert.deepEqual(
      (await ofA.waitForEvents(2)).map((e) => [e.data.account, e.data.data.api_environment_tag]),
      [
        ['stream-iso-a', 'Customer'],
        ['stream-iso-a', 'Testing'],
      ],
    );
    assert.deepEqual(
      (await ofB.waitForEvents(2)).map((e) => [e.data.account, e.data.data.user_group_id]),
      [
        ['stream-iso-b', 'same'],
        ['stream-iso-b', 'b-marker'],
      ],
    );
    assert.deepEqual(
      (await ofATesting.waitForEvents(1)).map((e) => [e.data.account, e.data.data.api_environment_tag]),
      [['stream-iso-a', 'Testing']],
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(ofA.events.length, 2);
    assert.equal(ofB.events.length, 2);
    assert.equal(ofATesting.events.length, 1);
  });

  it('stream: a heartbeat comment comes while nothing happens, and the connection outlives the request timeout', async () => {
    const { token } = await t.issueToken({ account: 'stream-heartbeat' });
    const sse = await stream(`/api/events/stream?types=${GROUP_EVENTS}`, { token });
    await sse.waitForComment('heartbeat');
    await new Promise((resolve) => setTimeout(resolve, 1500)); // requestTimeoutMs is 1000 here
    const count = sse.comments.filter((c) => c === 'heartbeat').length;
    await eventually('heartbeats go on', () => sse.comments.filter((c) => c === 'heartbeat').length > count);
    await createGroup(t, { user_group_id: 'late' }, token);
    assert.equal((await sse.waitForEvents(1))[0].data.data.user_group_id, 'late');
  });

  it('stream: a stream the client closes gets its one log line when it ends', async () => {
    const { token } = await t.issueToken({ account: 'stream-log' });
    const sse = await stream('/api/events/stream', { token });
    await sse.waitForComment('heartbeat');
    const requestId = String(sse.headers['x-request-id']);
    sse.close();
    const deadline = Date.now() + GENEROUS_WAIT_MS;
    let lines = log.lines.filter((line) => line.request_id === requestId && line.msg === 'request');
    while (lines.length === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      lines = log.lines.filter((line) => line.request_id === requestId && line.msg === 'request');
    }
    assert.equal(lines.length, 1, log.text());
    assert.equal(lines[0].status, 200);
    assert.equal(lines[0].client_gone, true);
  });
});

forEachBackend('change events: the stream of a server process', (backend) => {
  let database: TestDatabase;
  const servers: ServerProcess[] = [];

  before(async () => {
    database = await createTestDatabase(backend);
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop('SIGKILL')));
    await database?.drop();
  });

  const env = () => ({ DATABASE_URL: database.url, UGS_SECRET_KEY: secretKey });
  const secretKey = crypto.randomBytes(32).toString('base64');

  it('stream: SIGTERM with an open stream writes event: shutdown, ends the stream and exits 0 well within the shutdown timeout', async () => {
    const server = await spawnServer({ ...env(), UGS_SHUTDOWN_TIMEOUT_MS: '20000' });
    servers.push(server);
    const { token } = await issueTokenWithCli(env(), ['--account', 'shutdown']);
    const sse = await openSse(server.baseUrl, '/api/events/stream', { token });
    assert.equal(sse.status, 200);
    assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'before-stop' } })).status, 201);
    await sse.waitForEvents(1);
    const started = Date.now();
    const exit = await server.stop('SIGTERM');
    await sse.ended;
    assert.deepEqual(exit, { code: 0, signal: null }, server.output());
    // The server ended it, with the last frame; not a cut after the shutdown timeout (20 s).
    assert.equal(sse.events.at(-1)?.event, 'shutdown');
    assert.ok(Date.now() - started < 10_000, `exited after ${Date.now() - started} ms`);
    const line = server
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
      .find((l) => l.msg === 'request' && l.route === '/api/events/stream');
    assert.ok(line, `no request line for the stream:\n${server.output()}`);
  });

  /** `ugs events tail <args>` running: the JSON lines it printed so far, and a stop that sends SIGINT and resolves with its exit code. */
  function startTail(args: string[]) {
    const tail = reapOnExit(spawn(process.execPath, [UGS_ENTRY, 'events', 'tail', ...args], { cwd: ROOT, env: { ...process.env, ...env() } }));
    let out = '';
    tail.stdout.on('data', (chunk) => (out += chunk));
    tail.stderr.on('data', (chunk) => (out += chunk));
    const exited = new Promise<number | null>((resolve) => tail.once('exit', (code) => resolve(code)));
    const lines = () =>
      out
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line));
    return {
      output: () => out,
      async waitForLines(count: number) {
        await eventually(`${count} lines from ugs events tail`, () => lines().length >= count).catch(() => undefined);
        return lines();
      },
      waitForOutput: (pattern: RegExp) =>
        eventually(
          () => `${pattern} from ugs events tail; its output:\n${out}`,
          () => pattern.exec(out),
        ),
      stop() {
        tail.kill('SIGINT');
        return exited;
      },
    };
  }

  it('ugs events tail: prints the events as JSON lines as they come (--types, --after), and stops on SIGINT', async () => {
    const server = await spawnServer(env());
    servers.push(server);
    const { token } = await issueTokenWithCli(env(), ['--account', 'tail']);
    const tail = startTail(['--account', 'tail', '--types', 'user_group.created,user_group.deleted']);
    await tail.waitForOutput(/^following the events of tail after event \d+/m); // it starts at the head: changes only after it read it
    for (const id of ['tail-1', 'tail-2'])
      assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id } })).status, 201);
    assert.equal((await httpRequest(server.baseUrl, 'PUT', '/api/user', { token, body: { user_group_id: 'tail-1', name: 'renamed' } })).status, 200);
    assert.equal((await httpRequest(server.baseUrl, 'DELETE', '/api/user?user_group_id=tail-1', { token })).status, 200);
    const printed = await tail.waitForLines(3);
    assert.deepEqual(
      printed.map((event) => [event.type, event.data.user_group_id, event.account]),
      [
        ['user_group.created', 'tail-1', 'tail'],
        ['user_group.created', 'tail-2', 'tail'],
        ['user_group.deleted', 'tail-1', 'tail'],
      ],
      tail.output(),
    );
    assert.equal(await tail.stop(), 0, tail.output());

    const resumed = startTail(['--account', 'tail', '--after', String(printed[0].id)]);
    const again = await resumed.waitForLines(3);
    assert.deepEqual(
      again.map((event) => [event.type, event.data.user_group_id]),
      [
        ['user_group.created', 'tail-2'],
        ['user_group.updated', 'tail-1'],
        ['user_group.deleted', 'tail-1'],
      ],
      resumed.output(),
    );
    assert.equal(await resumed.stop(), 0, resumed.output());
  });

  if (backend === 'postgres') {
    it('stream: two instances on one database: a change made through instance A arrives on a stream of instance B', async () => {
      const [a, b] = await spawnServers(2, env());
      servers.push(a, b);
      const { token } = await issueTokenWithCli(env(), ['--account', 'two-instances']);
      const onB = await openSse(b.baseUrl, `/api/events/stream?types=${GROUP_EVENTS}`, { token });
      assert.equal(onB.status, 200);
      for (const id of ['via-a-1', 'via-a-2']) {
        assert.equal((await httpRequest(a.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id } })).status, 201);
      }
      const events = await onB.waitForEvents(2);
      assert.deepEqual(
        events.map((e) => [e.event, e.data.data.user_group_id]),
        [
          ['user_group.created', 'via-a-1'],
          ['user_group.created', 'via-a-2'],
        ],
      );
      onB.close();
    });
  }
});

forEachBackend('change events: a stalled stream client', (backend) => {
  const log = new LogCapture();
  const t = useTestApp(backend, { config: { eventStreamStallMs: 500 }, log });

  it('stream: a client that stops reading is closed after UGS_EVENT_STREAM_STALL_MS, while the service goes on', async () => {
    const baseUrl = await t.app.listen({ host: '127.0.0.1', port: 0 });
    const { token } = await t.issueToken({ account: 'stalled' });
    // A raw socket that sends the request and then never reads: the kernel's buffers fill, then the server's.
    const { port } = new URL(baseUrl);
    const net = await import('node:net');
    const socket = net.connect(Number(port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(`GET /api/events/stream?after=0 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token ${token}\r\nAccept: text/event-stream\r\n\r\n`);
    socket.pause();
    // Events of about 2 KiB each, until more than the loopback buffers can hold.
    const bigProperties = { note: 'x'.repeat(2000) };
    let made = 0;
    const deadline = Date.now() + 60_000;
    while (!log.lines.some((line) => line.msg === 'closed an event stream whose client stopped reading') && Date.now() < deadline) {
      const items = Array.from({ length: 500 }, () => ({ user_group_id: `g-${made++}`, properties: bigProperties }));
      const res = await t.request('POST', '/api/users/upsert', { token, body: { user_groups: items } });
      assert.equal(res.status, 200);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.ok(
      log.lines.some((line) => line.msg === 'closed an event stream whose client stopped reading'),
      `the stalled stream was closed (after ${made} events)`,
    );
    // The service went on: writes and the feed answer. (How much the stream holds meanwhile is
    // not measured here: this process's memory is mostly the test's own requests.)
    const feed = await t.request('GET', '/api/events', { token, query: { limit: '1' } });
    assert.equal(feed.status, 200);
    socket.destroy();
  });
});
