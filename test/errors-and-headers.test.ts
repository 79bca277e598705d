// The error envelope, body framing (size, media type, JSON), methods and paths, and the
// headers every response carries (docs/api.md, "Requests", "Errors").
import { it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { forEachBackend, useTestApp, startTestApp, LogCapture, type AnyAnswer, type HttpResult, BODY_METHODS } from './helpers/harness.ts';

const LIMIT = 256 * 1024;

/** A valid create body padded with JSON white space to exactly `size` bytes. */
function paddedBody(id: string, size: number): string {
  const core = JSON.stringify({ user_group_id: id });
  assert.ok(size >= core.length);
  return core.slice(0, -1) + ' '.repeat(size - core.length) + '}';
}

function assertErrorEnvelope(res: HttpResult<AnyAnswer>, status: number, code: string) {
  assert.equal(res.status, status, `expected ${status} ${code}, got ${res.status} ${res.text.slice(0, 300)}`);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  assert.equal(res.body.success, 0);
  assert.equal(res.body.error.code, code);
  assert.equal(typeof res.body.error.message, 'string');
  assert.ok(res.body.error.message.length > 0);
  const requestId = res.headers['x-request-id'];
  assert.ok(typeof requestId === 'string' && requestId.length > 0, 'X-Request-Id header');
  assert.equal(res.body.error.request_id, requestId, 'error.request_id repeats X-Request-Id');
}

forEachBackend('errors, body framing and response headers', (backend) => {
  const t = useTestApp(backend);
  let n = 0;
  const uid = (label: string) => `eh-${label}-${++n}`;

  async function exists(id: string) {
    const res = await t.request('GET', '/api/users', { token: t.token, query: { q: id } });
    assert.equal(res.status, 200);
    return res.body.user_groups.some((g: { provided_id: string }) => g.provided_id === id);
  }

  // ---- body size ----

  it('body size: exactly 256 KiB is accepted', async () => {
    const id = uid('exact');
    const raw = paddedBody(id, LIMIT);
    assert.equal(Buffer.byteLength(raw), LIMIT);
    const res = await t.request('POST', '/api/user', { token: t.token, rawBody: raw });
    assert.equal(res.status, 201);
    const get = await t.request('GET', '/api/user', { token: t.token, rawBody: raw });
    assert.equal(get.status, 200);
  });

  it('body size: one byte over 256 KiB, on create or on a get-or-create of a missing group, answers 413 payload_too_large and creates nothing', async () => {
    for (const method of ['POST', 'GET']) {
      const id = uid(`over-${method}`);
      const res = await t.request(method, '/api/user', { token: t.token, rawBody: paddedBody(id, LIMIT + 1) });
      assertErrorEnvelope(res, 413, 'payload_too_large');
      assert.equal(await exists(id), false, method);
    }
  });

  it('body size: an oversized body on GET, PUT, DELETE and the method override answers 413 payload_too_large', async () => {
    const id = uid('over-all');
    assert.equal((await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id, name: 'Small' } })).status, 201);
    const big = JSON.stringify({ user_group_id: id, name: 'Big', properties: { pad: 'x'.repeat(LIMIT) } });
    for (const [method, headers] of [
      ['GET', {}],
      ['PUT', {}],
      ['DELETE', {}],
      ['POST', { 'x-http-method-override': 'GET' }],
    ] as const) {
      const res = await t.request(method, '/api/user', { token: t.token, rawBody: big, headers });
      assertErrorEnvelope(res, 413, 'payload_too_large');
    }
    const still = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(still.status, 200);
    assert.equal(still.body.user_group.name, 'Small');
  });

  it('body size: a chunked GET body (no Content-Length) over 256 KiB gets the 413 envelope back on the socket and creates nothing', async () => {
    const id = uid('get-chunked');
    const address = await t.app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const url = new URL('/api/user', address);
      const res = await new Promise<HttpResult>((resolve, reject) => {
        const req = http.request(
          url,
          { method: 'GET', headers: { authorization: `Token ${t.token}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
          (response) => {
            let text = '';
            response.setEncoding('utf8');
            response.on('data', (chunk: string) => (text += chunk));
            response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, text, body: JSON.parse(text) }));
          },
        );
        req.on('error', reject);
        const body = paddedBody(id, LIMIT + 64 * 1024);
        for (let offset = 0; offset < body.length; offset += 16 * 1024) req.write(body.slice(offset, offset + 16 * 1024));
        req.end();
      });
      assertErrorEnvelope(res, 413, 'payload_too_large');
    } finally {
      await t.app.server.close();
    }
    assert.equal(await exists(id), false);
  });

  // ---- media type ----

  it('media type: a body sent as anything but application/json answers 415 unsupported_media_type and creates nothing', async () => {
    for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x', 'application/jsonx']) {
      const id = uid('ctype');
      const raw = JSON.stringify({ user_group_id: id });
      for (const [method, headers] of BODY_METHODS) {
        const res = await t.request(method, '/api/user', { token: t.token, rawBody: raw, headers: { ...headers, 'content-type': contentType } });
        assertErrorEnvelope(res, 415, 'unsupported_media_type');
      }
      assert.equal(await exists(id), false, contentType);
    }
  });

  it('media type: application/json with parameters or in another letter case is accepted', async () => {
    for (const contentType of ['application/json; charset=utf-8', 'Application/JSON']) {
      const res = await t.request('POST', '/api/user', {
        token: t.token,
        rawBody: JSON.stringify({ user_group_id: uid('ctype-ok') }),
        headers: { 'content-type': contentType },
      });
      assert.equal(res.status, 201, contentType);
    }
  });

  it('media type: a body without a Content-Type answers 415 unsupported_media_type', async () => {
    const id = uid('no-ctype');
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/user',
      headers: { authorization: `Token ${t.token}` },
      payload: Buffer.from(JSON.stringify({ user_group_id: id })),
    });
    assert.equal(res.statusCode, 415);
    assert.equal(res.json().error.code, 'unsupported_media_type');
    assert.equal(await exists(id), false);
  });

  // ---- malformed JSON ----

  it('malformed JSON answers 400 invalid_json on every method, and creates nothing', async () => {
    const id = uid('bad-json');
    for (const raw of [`{"user_group_id":"${id}"`, `{"user_group_id":'${id}'}`, `{"user_group_id":"${id}"} trailing`, '{,}', `{user_group_id:"${id}"}`]) {
      for (const [method, headers] of BODY_METHODS) {
        const res = await t.request(method, '/api/user', { token: t.token, rawBody: raw, headers });
        assertErrorEnvelope(res, 400, 'invalid_json');
      }
    }
    assert.equal(await exists(id), false);
  });

  it('an empty body with Content-Type application/json on POST or PUT answers 400, not 500', async () => {
    for (const method of ['POST', 'PUT']) {
      const res = await t.request(method, '/api/user', { token: t.token, rawBody: '' });
      assert.equal(res.status, 400, method);
      assert.equal(res.body.success, 0);
      assert.ok(['invalid_json', 'validation_failed'].includes(res.body.error.code), res.body.error.code);
    }
  });

  // ---- methods and paths ----

  it('PATCH /api/user answers 405 method_not_allowed with an Allow header listing the methods', async () => {
    const res = await t.request('PATCH', '/api/user', { token: t.token, body: { user_group_id: uid('patch'), name: 'x' } });
    assertErrorEnvelope(res, 405, 'method_not_allowed');
    const allow = String(res.headers.allow).split(/,\s*/).sort();
    assert.deepEqual(allow, ['DELETE', 'GET', 'POST', 'PUT']);
  });

  it('HEAD /api/user answers 405 with an Allow header (it must not create groups)', async () => {
    const id = uid('head');
    const res = await t.request('HEAD', '/api/user', { token: t.token, query: { user_group_id: id } });
    assert.equal(res.status, 405);
    assert.ok(String(res.headers.allow).includes('GET'));
    assert.ok(!String(res.headers.allow).includes('HEAD'));
    assert.ok(res.headers['x-request-id']);
    assert.equal(await exists(id), false);
  });

  it('a method not served on /api/users answers 405 with Allow: GET', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'HEAD']) {
      const res = await t.request(method, '/api/users', { token: t.token });
      assert.equal(res.status, 405, method);
      assert.equal(res.headers.allow, 'GET', method);
      if (method !== 'HEAD') assert.equal(res.body.error.code, 'method_not_allowed');
    }
  });

  it('every path of /openapi.json, its parameters filled with their examples: each method it lacks answers 405 with Allow naming exactly the methods it has', async () => {
    const doc = (await t.request('GET', '/openapi.json')).body as unknown as {
      paths: Record<string, Record<string, { parameters?: { in: string; name: string; example?: unknown }[] }>>;
    };
    const templates = Object.entries(doc.paths).map(([template, item]) => ({
      template,
      pattern: new RegExp(`^${template.replace(/\{\w+\}/g, '[^/]+')}$`),
      methods: Object.keys(item).map((method) => method.toUpperCase()),
      parameters: Object.values(item).flatMap((operation) => (operation.parameters ?? []).filter((parameter) => parameter.in === 'path')),
    }));
    let refused = 0;
    for (const { template, parameters } of templates) {
      const path = template.replace(/\{(\w+)\}/g, (_, name) => String(parameters.find((parameter) => parameter.name === name)?.example));
      assert.doesNotMatch(path, /undefined|\{/, template);
      // What the URL has: its own methods, and those of a path with a parameter that the URL
      // also fills (DELETE /api/api_tokens/current is the revocation of the id "current", a 400).
      const methods = [...new Set(templates.filter(({ pattern }) => pattern.test(path)).flatMap((other) => other.methods))].sort();
      // HEAD is never served (docs/api.md, "Requests"); OPTIONS on the embed context and the
      // public keys is their CORS preflight.
      const preflighted = path === '/api/embed/context' || path.startsWith('/.well-known/');
      const lacking = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'].filter(
        (method) => !methods.includes(method) && !(method === 'OPTIONS' && preflighted),
      );
      for (const method of lacking) {
        const res = await t.request(method, path, {});
        assert.equal(res.status, 405, `${method} ${path}: ${res.text}`);
        assert.deepEqual(String(res.headers.allow).split(', ').sort(), methods, `${method} ${path}: Allow`);
        if (method !== 'HEAD') assertErrorEnvelope(res, 405, 'method_not_allowed');
        refused++;
      }
    }
    assert.ok(refused >= 150, `${refused} wrong methods`);
  });

  it('an unknown path answers 404 not_found with the error envelope, with or without a token', async () => {
    for (const path of ['/api/nope', '/api/user/extra', '/api/v1/user', '/api/User']) {
      assertErrorEnvelope(await t.request('GET', path, { token: t.token }), 404, 'not_found');
      assertErrorEnvelope(await t.request('POST', path, {}), 404, 'not_found');
    }
    // GET / is the front page, and nothing else is served there.
    assertErrorEnvelope(await t.request('POST', '/', {}), 405, 'method_not_allowed');
  });

  it('a URL that is not valid UTF-8 (bad percent-escapes, in the path or the query) answers 400 validation_failed in the envelope, with X-Request-Id, no-store and its one log line', async () => {
    const log = new LogCapture();
    const app = await startTestApp(backend, { log });
    try {
      const { token } = await app.issueToken();
      // In the path: nothing can route it, so it is answered before authentication, like a 404.
      const paths = ['/api/%FF', '/api/%', '/api/user%E0%A4%A', '/api/user%C0%AF', '/api/%ED%A0%80', '/%FF', '/api/user/%FFhistory'];
      for (const path of paths) {
        for (const method of ['GET', 'POST']) {
          const res = await app.request(method, path, { token, body: method === 'POST' ? { user_group_id: 'x' } : undefined });
          assertErrorEnvelope(res, 400, 'validation_failed');
          assert.deepEqual(res.body.error.details, [{ field: 'path', issue: 'invalid_encoding' }], path);
          assert.equal(res.headers['cache-control'], 'no-store', path);
          const lines = log.lines.filter((l) => l.request_id === res.headers['x-request-id']);
          assert.deepEqual(
            lines.map((l) => [l.msg, l.method, l.route, l.status]),
            [['request', method, '(no route)', 400]],
            `${method} ${path}: one log line`,
          );
        }
      }
      // In the query: the route is known, so authentication comes first, then the same 400.
      for (const path of ['/api/user?user_group_id=%FF', '/api/users?q=%', '/api/user?user_group_id=%E0%A4%A']) {
        const res = await app.request('GET', path, { token });
        assertErrorEnvelope(res, 400, 'validation_failed');
        assert.deepEqual(res.body.error.details, [{ field: 'querystring', issue: 'invalid_encoding' }], path);
        assert.equal(log.lines.filter((l) => l.request_id === res.headers['x-request-id'] && l.msg === 'request').length, 1, path);
      }
      // A path parameter too long for the router gets the envelope too.
      const long = await app.request('GET', `/api/webhook_endpoints/${'9'.repeat(120)}/deliveries`, { token });
      assertErrorEnvelope(long, 400, 'validation_failed');
    } finally {
      await app.close();
    }
  });

  // ---- headers and envelope ----

  it('every response carries X-Request-Id, successes and failures alike, and each request gets its own', async () => {
    const id = uid('rid');
    const responses = [
      await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id } }),
      await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } }),
      await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, name: 'x' } }),
      await t.request('GET', '/api/users', { token: t.token }),
      await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: id } }),
      await t.request('GET', '/api/users', {}),
      await t.request('GET', '/nowhere', {}),
      await t.request('PATCH', '/api/user', { token: t.token }),
      await t.request('GET', '/healthz', {}),
    ];
    const ids = responses.map((r) => r.headers['x-request-id']);
    for (const [i, rid] of ids.entries()) assert.ok(typeof rid === 'string' && rid.length > 0, `response ${i}`);
    assert.equal(new Set(ids).size, ids.length);
  });

  it('error bodies repeat the request id as error.request_id (validation, auth, not found, conflict)', async () => {
    const id = uid('rid-err');
    assert.equal((await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id } })).status, 201);
    assertErrorEnvelope(await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id } }), 409, 'user_group_exists');
    assertErrorEnvelope(await t.request('POST', '/api/user', { token: t.token, body: { bogus: 1 } }), 400, 'validation_failed');
    assertErrorEnvelope(await t.request('POST', '/api/user', { body: { user_group_id: id } }), 401, 'missing_api_token');
    assertErrorEnvelope(await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: uid('none'), name: 'x' } }), 404, 'user_group_not_found');
  });

  it("a caller's plain X-Request-Id is kept; an unsafe one is replaced", async () => {
    const kept = await t.request('GET', '/api/users', { token: t.token, headers: { 'x-request-id': 'trace-abc.123:xyz' } });
    assert.equal(kept.headers['x-request-id'], 'trace-abc.123:xyz');
    const keptError = await t.request('GET', '/api/users', { headers: { 'x-request-id': 'trace-err-1' } });
    assert.equal(keptError.body.error.request_id, 'trace-err-1');
    const replaced = await t.request('GET', '/api/users', { token: t.token, headers: { 'x-request-id': 'bad id <script>' } });
    assert.notEqual(replaced.headers['x-request-id'], 'bad id <script>');
    assert.ok(replaced.headers['x-request-id']);
  });

  it('every success body carries success: 1 and is JSON', async () => {
    const id = uid('ok');
    const responses = [
      await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id } }),
      await t.request('GET', '/api/user', { token: t.token, query: { user_group_id: id } }),
      await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, is_demo_group: true } }),
      await t.request('GET', '/api/users', { token: t.token }),
      await t.request('DELETE', '/api/user', { token: t.token, query: { user_group_id: id } }),
    ];
    for (const res of responses) {
      assert.ok(res.status === 200 || res.status === 201, `${res.status} ${res.text}`);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      assert.equal(res.body.success, 1);
    }
  });

  it('responses that carry a user group token are sent with Cache-Control: no-store', async () => {
    const id = uid('cache');
    const created = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: id } });
    const got = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } });
    const made = await t.request('GET', '/api/user', { token: t.token, query: { user_group_id: uid('cache-goc') } });
    const overridden = await t.request('POST', '/api/user', { token: t.token, headers: { 'x-http-method-override': 'GET' }, body: { user_group_id: id } });
    const updated = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, name: 'n' } });
    const rotated = await t.request('POST', '/api/user', { token: t.token, body: { current_token: created.body.user_group.token } });
    for (const [label, res] of Object.entries({ created, got, made, overridden, updated, rotated })) {
      assert.ok(res.status === 200 || res.status === 201, label);
      assert.match(res.text, /"token":"ugs_grp_/, label);
      assert.match(String(res.headers['cache-control']), /no-store/, label);
    }
  });

  it('error responses never carry a stack trace or SQL', async () => {
    const res = await t.request('POST', '/api/user', { token: t.token, rawBody: '{"user_group_id": ' });
    assert.equal(res.status, 400);
    assert.doesNotMatch(res.text, /at .*\.ts:\d+|node_modules|SELECT|INSERT/i);
    const error: Record<string, unknown> = res.body.error; // stack is not a documented field: read the error as an open record
    assert.equal(error.stack, undefined);
  });

  it('pages: /, /docs, /console and their files forbid framing (CSP and X-Frame-Options: DENY) and send no Referer elsewhere', async () => {
    for (const path of ['/', '/docs', '/docs/', '/docs/assets/docs.js', '/console', '/console/']) {
      const res = await t.app.inject({ method: 'GET', url: path });
      assert.equal(res.statusCode, path === '/docs/' ? 301 : 200, path);
      assert.match(String(res.headers['content-security-policy']), /frame-ancestors 'none'/, path);
      assert.equal(res.headers['x-frame-options'], 'DENY', path);
      assert.equal(res.headers['referrer-policy'], 'no-referrer', path);
      assert.equal(res.headers['x-content-type-options'], 'nosniff', path);
    }
  });
});
