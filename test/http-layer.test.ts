// What the HTTP layer does with clients that misbehave, over real sockets against the server
// as deployed: no connection is held forever (stalled headers, stalled bodies, bodies a
// route never reads), under the open-files limit that made 260 stalled sockets take the
// service down, and a shutdown is not held up by them. Errors raised before a request
// reaches a route (400, 408, 431) carry the API's envelope and an X-Request-Id.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { httpRequest, requestsInFlight, spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';

interface RawExchange {
  /** Everything the server wrote. */
  received(): string;
  /** Resolves when the server (or anything) closed the socket. */
  closed: Promise<void>;
  isClosed(): boolean;
  /** Sends more of the request. */
  write(text: string): void;
}

/** Opens a connection and writes `text` (and nothing more): a client that stalls there. */
function stall(baseUrl: string, text: string): Promise<RawExchange> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    let data = '';
    let closed = false;
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(text);
      resolve({ received: () => data, closed: closing, isClosed: () => closed, write: (more) => socket.write(more) });
    });
    const closing = new Promise<void>((done) =>
      socket.on('close', () => {
        closed = true;
        done();
      }),
    );
    socket.on('data', (chunk) => (data += chunk));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (!closed && data === '') reject(err);
    });
  });
}

/** Status, headers and JSON body of a raw HTTP/1.1 response. */
// biome-ignore lint/suspicious/noExplicitAny: the tests read whatever field they check
function parseResponse(raw: string): { status: number; headers: Record<string, string>; body: any } {
  const [head, ...rest] = raw.split('\r\n\r\n');
  const [statusLine, ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(rest.join('\r\n')) };
}

function assertEnvelope(raw: string, status: number, code: string) {
  const response = parseResponse(raw);
  assert.equal(response.status, status, raw);
  assert.match(response.headers['content-type'], /^application\/json/);
  assert.equal(response.headers['cache-control'], 'no-store');
  assert.equal(response.headers.connection, 'close');
  assert.equal(response.body.success, 0);
  assert.equal(response.body.error.code, code);
  assert.ok(response.headers['x-request-id']?.startsWith('req_'));
  assert.equal(response.body.error.request_id, response.headers['x-request-id']);
}

const withTimeout = <T>(promise: Promise<T>, ms: number, what: string) =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms))]);

for (const backend of BACKENDS) {
  describe(`[${backend}] the HTTP layer: timeouts and client errors on real sockets`, () => {
    let database: TestDatabase;
    let apiToken: string;
    let env: Record<string, string>;
    const servers: ServerProcess[] = [];

    before(async () => {
      database = await createTestDatabase(backend);
      env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
      const issued = await issueTokenWithCli({ DATABASE_URL: database.url });
      apiToken = issued.token;
    });
    after(async () => {
      await Promise.all(servers.map((server) => server.stop('SIGKILL')));
      await database?.drop();
    });

    async function start(extra: Record<string, string>, openFiles?: number) {
      const server = await spawnServer({ ...env, ...extra }, { openFiles });
      servers.push(server);
      return server;
    }

    it('timeouts: 300 stalled sockets under an open-files limit of 256 do not stop a real request; every one is closed, and SIGTERM exits 0', async () => {
      const server = await start({ UGS_REQUEST_TIMEOUT_MS: '3000', UGS_HEADERS_TIMEOUT_MS: '2000', UGS_SHUTDOWN_TIMEOUT_MS: '5000' }, 256);
      const created = await httpRequest(server.baseUrl, 'POST', '/api/user', { token: apiToken, body: { user_group_id: 'stall-1' } });
      assert.equal(created.status, 201);
      const bodyless: RawExchange[] = [];
      const heldBodies: RawExchange[] = [];
      const heldHeaders: RawExchange[] = [];
      for (let i = 0; i < 300; i++) {
        if (i % 3 === 0) {
          // A route that takes no body, no token needed: it answers at once and must not wait for the body.
          bodyless.push(await stall(server.baseUrl, 'GET /api/embed/context HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx'));
        } else if (i % 3 === 1) {
          const body = 'POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n';
          heldBodies.push(await stall(server.baseUrl, `${body}Authorization: Token ${apiToken}\r\n\r\n{`));
        } else {
          heldHeaders.push(await stall(server.baseUrl, `GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Token ${apiToken}\r\n`));
        }
      }
      // A real request, while the stalled ones hold their sockets.
      const real = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=stall-1', { token: apiToken });
      assert.equal(real.status, 200, JSON.stringify(real.body));
      assert.ok(heldBodies.filter((s) => s.isClosed()).length < heldBodies.length, 'it was answered while stalled bodies were still waiting');

      await withTimeout(Promise.all([...bodyless, ...heldBodies, ...heldHeaders].map((s) => s.closed)), 15_000, 'closing every stalled socket');
      for (const s of bodyless) {
        const response = parseResponse(s.received());
        assert.equal(response.status, 401);
        assert.equal(response.headers.connection, 'close', 'a body the route never reads is not waited for');
      }
      for (const s of [...heldBodies, ...heldHeaders]) assertEnvelope(s.received(), 408, 'request_timeout');

      const stopped = await withTimeout(server.stop('SIGTERM'), 5000, 'the shutdown');
      assert.equal(stopped.code, 0);
    });

    it('shutdown: SIGTERM closes stalled and idle connections, finishes an upload that completes, and exits 0 within its timeout', async () => {
      const server = await start({ UGS_REQUEST_TIMEOUT_MS: '120000', UGS_HEADERS_TIMEOUT_MS: '60000', UGS_SHUTDOWN_TIMEOUT_MS: '4000' });
      const stalled = [
        ...(await Promise.all(
          Array.from({ length: 20 }, () =>
            stall(
              server.baseUrl,
              `POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nAuthorization: Token ${apiToken}\r\n\r\n{`,
            ),
          ),
        )),
        ...(await Promise.all(Array.from({ length: 20 }, () => stall(server.baseUrl, 'GET /healthz HTTP/1.1\r\nHost: x\r\n')))),
      ];
      const idle = await stall(server.baseUrl, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      await withTimeout(
        new Promise<void>((resolve) => {
          const poll = setInterval(() => idle.received().endsWith('}') && (clearInterval(poll), resolve()), 10);
        }),
        5000,
        "the idle connection's answer",
      );
      // An upload in flight that completes soon after the signal: it is answered.
      const body = JSON.stringify({ user_group_id: 'uploaded-during-shutdown' });
      const upload = await stall(
        server.baseUrl,
        `POST /api/user HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nAuthorization: Token ${apiToken}\r\n\r\n${body.slice(0, 5)}`,
      );
      await requestsInFlight(server.baseUrl, 1); // its headers have reached the server
      const signalled = Date.now();
      const stopping = server.stop('SIGTERM');
      await server.waitForOutput(/"msg":"shutting down: finishing in-flight requests"/);
      upload.write(body.slice(5));
      const stopped = await withTimeout(stopping, 6000, 'the shutdown');
      assert.equal(stopped.code, 0, server.output());
      assert.ok(Date.now() - signalled < 4000, 'within the shutdown timeout');
      await withTimeout(Promise.all([...stalled, idle, upload].map((s) => s.closed)), 1000, 'every connection closed');
      assert.equal(parseResponse(upload.received()).status, 201, upload.received());
      assert.match(server.output(), /closed connections whose request had not arrived/);
    });

    it('client errors: a request that is not HTTP gets the 400 envelope with an X-Request-Id, and headers over 16 KiB the 431 envelope', async () => {
      const server = await start({});
      const garbage = await stall(server.baseUrl, 'THIS IS NOT HTTP\r\n\r\n');
      await withTimeout(garbage.closed, 5000, 'the answer to garbage');
      assertEnvelope(garbage.received(), 400, 'bad_request');
      const huge = await stall(server.baseUrl, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
      await withTimeout(huge.closed, 5000, 'the answer to huge headers');
      assertEnvelope(huge.received(), 431, 'headers_too_large');
    });
  });
}
