// Request ids, the headers every answer carries, and the one log line per request. A caller's X-Request-Id is kept when it is
// a plain token of characters (so ids can follow a request across services); anything else
// is replaced. Logs carry the route, never the query string, headers or bodies, so no token
// can reach them. They carry the request's trace_id and span_id: its own span's when spans
// are exported (tracing), else the caller's, from a W3C traceparent.
import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseTraceparent, type Tracing } from '../tracing/trace-context.ts';
import type { RequestEndListener } from './request-end.ts';

const CALLER_ID = /^[A-Za-z0-9._:-]{1,128}$/;
// Ids need to be unique, not secret: a random prefix per process (so instances and restarts
// do not collide) and a counter, instead of random bytes on every request.
const ISSUED_PREFIX = 'req_';
const PROCESS_PREFIX = `${ISSUED_PREFIX}${crypto.randomBytes(6).toString('hex')}`;
let sequence = 0;

export function generateRequestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  // Never one that looks like ours: a log reader must be able to tell which ids we issued.
  if (typeof given === 'string' && CALLER_ID.test(given) && !given.startsWith(ISSUED_PREFIX)) return given;
  sequence = (sequence + 1) % Number.MAX_SAFE_INTEGER;
  return `${PROCESS_PREFIX}${sequence.toString(36).padStart(6, '0')}`;
}

export function registerRequestContext(app: FastifyInstance, tracing?: Tracing): void {
  // Callback-style hooks: an async hook costs a promise per request for no gain here.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    // Every /api answer, errors included: some carry tokens, all are per caller.
    if (request.url.startsWith('/api/')) reply.header('cache-control', 'no-store');
    // The request's span: every later hook, the handler and their statements run in its context.
    if (tracing) tracing.startRequest(request, done);
    else done();
  });
  // A response ready before its request's body has (all) arrived (a route that takes no body,
  // or an error before the body is read): close the connection after it, instead of waiting
  // for a body nobody will read, which lets a stalled client hold the socket. Under inject
  // there is no socket, and `complete` is undefined.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.raw.complete === false) reply.header('connection', 'close');
    done(null, payload);
  });
}

/**
 * The one log line of a request, when it ends (request-end.ts): with its trace ids, and
 * `client_gone` when the client went away before the answer reached it (`status` is still
 * what the request did: a 201 created its group). Ends the request's span when spans are
 * exported.
 */
export function requestLogger(tracing?: Tracing): RequestEndListener {
  return (request: FastifyRequest, reply: FastifyReply, clientGone: boolean) => {
    const line: Record<string, unknown> = {
      method: request.method,
      route: request.routeOptions.url ?? '(no route)',
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 100) / 100,
    };
    const ids = tracing ? tracing.endRequest(request, reply) : parseTraceparent(request.headers.traceparent);
    if (ids) Object.assign(line, ids);
    if (clientGone) line.client_gone = true;
    request.log.info(line, 'request');
  };
}
