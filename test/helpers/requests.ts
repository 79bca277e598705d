// Requests over real sockets that the suites on real processes share: a request surely in
// flight, a bare connection attempt, and every group of a token through the list.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { HttpResult } from './harness.ts';
import { httpRequest } from './processes.ts';

/** Every group of the token's default environment, through the list endpoint (which never creates). */
export async function listAll(baseUrl: string, token: string): Promise<Map<string, { team_id: number; name: string }>> {
  const groups = new Map<string, { team_id: number; name: string }>();
  let cursor: string | null = null;
  do {
    const query: string = `/api/users?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = await httpRequest(baseUrl, 'GET', query, { token });
    assert.equal(page.status, 200, JSON.stringify(page.body));
    for (const g of page.body.user_groups) groups.set(g.provided_id, g);
    cursor = page.body.next_cursor;
  } while (cursor);
  return groups;
}

/** A new TCP connection to the server: resolves with the error code, or 'connected'. */
export function tryConnect(baseUrl: string): Promise<string> {
  return new Promise((resolve) => {
    const req = http.request(new URL('/healthz', baseUrl), { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(`answered ${res.statusCode}`));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end();
  });
}

/**
 * A POST on a connection of its own, whose headers are sent now and whose body is sent only
 * when `finish()` is called: a request that is surely in flight on the server while the test
 * does something else.
 */
export function slowPost(baseUrl: string, token: string, body: unknown) {
  const payload = Buffer.from(JSON.stringify(body));
  const req = http.request(new URL('/api/user', baseUrl), {
    method: 'POST',
    agent: false,
    headers: { authorization: `Token ${token}`, 'content-type': 'application/json', 'content-length': String(payload.length) },
  });
  const response = new Promise<Pick<HttpResult, 'status' | 'body'> & { requestId: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text), requestId: String(res.headers['x-request-id']) }));
    });
    req.on('error', reject);
  });
  req.flushHeaders();
  req.write(payload.subarray(0, 5)); // part of the body: the request has begun
  return {
    response,
    finish() {
      req.end(payload.subarray(5));
      return response;
    },
  };
}
