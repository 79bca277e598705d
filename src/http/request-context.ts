// Request ids and the one log line per request. A caller's X-Request-Id is kept when it is
// a plain token of characters (so ids can follow a request across services); anything else
// is replaced. Logs carry the route, never the query string, headers or bodies, so no token
// can reach them.
import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

const CALLER_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function generateRequestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  if (typeof given === 'string' && CALLER_ID.test(given)) return given;
  return `req_${crypto.randomBytes(12).toString('hex')}`;
}

export function registerRequestContext(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    request.log.info(
      {
        method: request.method,
        route: request.routeOptions.url ?? '(no route)',
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 100) / 100,
      },
      'request',
    );
  });
}
