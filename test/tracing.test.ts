// Traces: with OTEL_EXPORTER_OTLP_ENDPOINT set, the server exports a span per request (route,
// status) joined to the caller's W3C traceparent, with a child span per database statement
// and per Redis command, to an OTLP/HTTP receiver running inside the test; the request's log
// line carries the span's trace_id and span_id. Without it, nothing is exported and the log
// line carries the caller's ids from traceparent. Spans are read after a SIGTERM, which
// exports everything still buffered: nothing here waits for a timer.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { forEachBackend, LogCapture, useTestApp } from './helpers/harness.ts';
import { httpRequest, issueTokenWithCli, spawnServer } from './helpers/processes.ts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './helpers/otlp-receiver.ts';
import { redisAnswers } from './helpers/services.ts';
import { skippedPart } from './helpers/skips.ts';

const SERVER = 2;
const CLIENT = 3;
const REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';
// As in the rate-limit suite: CI has Redis and must use it; elsewhere its absence is in the run's list of skips.
const withRedis = (await redisAnswers(REDIS_URL)) || Boolean(process.env.CI);

const hex = (bytes: number) => crypto.randomBytes(bytes).toString('hex');

interface LogLine {
  msg?: string;
  route?: string;
  status?: number;
  method?: string;
  trace_id?: string;
  span_id?: string;
}

function requestLines(output: string): LogLine[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine)
    .filter((line) => line.msg === 'request');
}

function childrenOf(spans: ReceivedSpan[], parent: ReceivedSpan): ReceivedSpan[] {
  return spans.filter((span) => span.parentSpanId === parent.spanId && span.traceId === parent.traceId);
}

forEachBackend('traces exported over OTLP', (backend) => {
  let database: TestDatabase;
  let receiver: OtlpReceiver;
  before(async () => {
    database = await createTestDatabase(backend);
    receiver = await startOtlpReceiver();
  });
  after(async () => {
    await receiver?.close();
    await database?.drop();
  });

  it('tracing (http/json): a span per request joined to the traceparent, children for statements and Redis; the log line carries its ids', async (t) => {
    const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    const { token } = await issueTokenWithCli(env);
    // Under the open-files limit of the "stalled sockets" test: OpenTelemetry is loaded file by file.
    const server = await spawnServer(
      { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', ...(withRedis ? { REDIS_URL } : {}) },
      { openFiles: 256 },
    );
    const traceId = hex(16);
    const [createParent, lookupParent, unsampledParent] = [hex(8), hex(8), hex(8)];
    const unsampledTrace = hex(16);
    try {
      const traceparent = (trace: string, parent: string, flags = '01') => ({ traceparent: `00-${trace}-${parent}-${flags}` });
      const created = await httpRequest(server.baseUrl, 'POST', '/api/user', {
        token,
        body: { user_group_id: 'traced' },
        headers: traceparent(traceId, createParent),
      });
      assert.equal(created.status, 201, created.text);
      const found = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=traced', { token, headers: traceparent(traceId, lookupParent) });
      assert.equal(found.status, 200, found.text);
      const untraced = await httpRequest(server.baseUrl, 'GET', '/api/users', { token });
      assert.equal(untraced.status, 200, untraced.text);
      const unsampled = await httpRequest(server.baseUrl, 'GET', '/api/users', { token, headers: traceparent(unsampledTrace, unsampledParent, '00') });
      assert.equal(unsampled.status, 200, unsampled.text);
    } finally {
      assert.equal((await server.stop()).code, 0, server.output());
    }

    const spans = receiver.spans();
    const system = backend === 'sqlite' ? 'sqlite' : 'postgresql';
    const create = spans.find((s) => s.kind === SERVER && s.parentSpanId === createParent);
    assert.ok(create, `a server span whose parent is the caller's span: ${JSON.stringify(spans.map((s) => s.name))}`);
    assert.equal(create.traceId, traceId, 'it joins the caller’s trace');
    assert.equal(create.name, 'POST /api/user');
    assert.equal(create.attributes['http.route'], '/api/user');
    assert.equal(create.attributes['http.response.status_code'], 201);
    const createStatements = childrenOf(spans, create).filter((s) => s.attributes['db.system.name'] === system);
    assert.ok(
      createStatements.some(
        (s) => s.kind === CLIENT && s.name === `INSERT ${system}` && /insert into "user_groups"/.test(String(s.attributes['db.query.text'])),
      ),
      `the insert is a child span: ${JSON.stringify(createStatements.map((s) => s.name))}`,
    );

    const lookup = spans.find((s) => s.kind === SERVER && s.parentSpanId === lookupParent);
    assert.ok(lookup, 'the lookup has its span');
    assert.equal(lookup.name, 'GET /api/user');
    assert.equal(lookup.attributes['http.response.status_code'], 200);
    assert.ok(
      childrenOf(spans, lookup).some((s) => s.name === `SELECT ${system}` && s.attributes['db.system.name'] === system),
      'the hot read of the group is a child span of the request that asked for it',
    );
    if (withRedis) {
      for (const request of [create, lookup]) {
        assert.ok(
          childrenOf(spans, request).some((s) => s.kind === CLIENT && s.attributes['db.system.name'] === 'redis'),
          `${request.name}: the rate limit's Redis command is a child span`,
        );
      }
    } else {
      skippedPart(t, "the rate limit's Redis command spans", `no Redis answered PING at ${REDIS_URL} in 5 tries (set TEST_REDIS_URL)`);
    }

    const root = spans.find((s) => s.kind === SERVER && s.name === 'GET /api/users' && s.parentSpanId === '');
    assert.ok(root, 'a request without traceparent starts a trace of its own');
    assert.equal(
      spans.filter((s) => s.traceId === unsampledTrace).length,
      0,
      'a caller that did not sample its trace gets no exported span (its decision is kept)',
    );
    for (const { body } of receiver.exports) assert.ok(!body.includes(token), 'no exported span holds the API token');

    const lines = requestLines(server.output());
    const createLine = lines.find((l) => l.method === 'POST' && l.route === '/api/user');
    assert.deepEqual([createLine?.trace_id, createLine?.span_id], [traceId, create.spanId], 'the log line carries the span’s ids');
    const lookupLine = lines.find((l) => l.method === 'GET' && l.route === '/api/user');
    assert.deepEqual([lookupLine?.trace_id, lookupLine?.span_id], [traceId, lookup.spanId]);
    const unsampledLine = lines.find((l) => l.trace_id === unsampledTrace);
    assert.ok(unsampledLine?.span_id && unsampledLine.span_id !== unsampledParent, 'an unsampled request still logs its trace and its own span id');
  });
});

describe('traces over OTLP http/protobuf', () => {
  let database: TestDatabase;
  let receiver: OtlpReceiver;
  before(async () => {
    database = await createTestDatabase('sqlite');
    receiver = await startOtlpReceiver();
  });
  after(async () => {
    await receiver?.close();
    await database?.drop();
  });

  it('tracing (http/protobuf, the default protocol): the request span and its statements arrive as protobuf', async () => {
    const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    const { token } = await issueTokenWithCli(env);
    const server = await spawnServer({ ...env, OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/` });
    const traceId = hex(16);
    try {
      const created = await httpRequest(server.baseUrl, 'POST', '/api/user', {
        token,
        body: { user_group_id: 'protobuf' },
        headers: { traceparent: `00-${traceId}-${hex(8)}-01` },
      });
      assert.equal(created.status, 201, created.text);
    } finally {
      assert.equal((await server.stop()).code, 0, server.output());
    }
    assert.ok(receiver.exports.length > 0, 'something was exported');
    for (const { contentType } of receiver.exports) assert.equal(contentType, 'application/x-protobuf');
    const spans = receiver.spans();
    const request = spans.find((s) => s.traceId === traceId && s.kind === SERVER);
    assert.equal(request?.name, 'POST /api/user');
    assert.equal(request?.attributes['http.response.status_code'], 201);
    assert.ok(childrenOf(spans, request!).some((s) => s.name === 'INSERT sqlite'));
  });
});

describe('trace ids in the log line with tracing off', () => {
  const log = new LogCapture();
  const t = useTestApp('sqlite', { log });

  it('tracing off: the log line carries the caller’s trace_id and span_id from a valid traceparent, and no ids without one', async () => {
    const [traceId, parent] = [hex(16), hex(8)];
    const cases: [traceparent: string | undefined, expected: { trace_id: string; span_id: string } | undefined][] = [
      [`00-${traceId}-${parent}-01`, { trace_id: traceId, span_id: parent }],
      [`00-${traceId}-${parent}-00`, { trace_id: traceId, span_id: parent }], // unsampled: still the caller's trace
      [undefined, undefined],
      [`00-${'0'.repeat(32)}-${parent}-01`, undefined], // an all-zero trace id is invalid
      [`00-${traceId}-${'0'.repeat(16)}-01`, undefined],
      [`ff-${traceId}-${parent}-01`, undefined], // version ff is forbidden
      [`00-${traceId.toUpperCase()}-${parent}-01`, undefined], // upper-case hex is not the format
      [`00-${traceId}-${parent}-01-extra`, undefined], // version 00 has exactly four parts
      [`01-${traceId}-${parent}-01-future`, { trace_id: traceId, span_id: parent }], // a later version is read as 00
    ];
    for (const [index, [traceparent, expected]] of cases.entries()) {
      const res = await t.request('GET', `/api/users?q=case${index}`, { token: t.token, headers: traceparent ? { traceparent } : {} });
      assert.equal(res.status, 200);
      const line = log.lines.at(-1) as Record<string, unknown>;
      assert.equal(line.msg, 'request');
      assert.deepEqual(
        line.trace_id === undefined && line.span_id === undefined ? undefined : { trace_id: line.trace_id, span_id: line.span_id },
        expected,
        `traceparent ${traceparent}`,
      );
    }
  });
});
