// Counts every response (by the route pattern, never the raw URL, so ids in paths or query
// strings cannot create series) and serves GET /metrics. Business events (tokens issued,
// requests rate limited) are counted where they happen (ServiceEvents in metrics.ts). /metrics takes no API token, like
// /healthz: keep it off the public network (bind a private port or block it at the proxy).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Metrics } from './metrics.ts';

/** The label for requests no route matched (404 and 405): one series, whatever the URL. */
const UNMATCHED_ROUTE = 'unmatched';

function routeOf(request: FastifyRequest): string {
  return request.is404 ? UNMATCHED_ROUTE : (request.routeOptions.url ?? UNMATCHED_ROUTE);
}

const IN_FLIGHT = Symbol('counted in flight');
type Counted = FastifyRequest & { [IN_FLIGHT]?: boolean };

/**
 * Requests in flight: counted from their headers (onRequest) to their end (countRequest
 * below), or to their client's going away first (onRequestAbort), once either way.
 */
export function countRequestsInFlight(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onRequest', (request, _reply, done) => {
    (request as Counted)[IN_FLIGHT] = true;
    metrics.httpInFlight.inc();
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    requestLeft(request, metrics);
    done();
  });
}

function requestLeft(request: FastifyRequest, metrics: Metrics): void {
  if ((request as Counted)[IN_FLIGHT] !== true) return;
  (request as Counted)[IN_FLIGHT] = false;
  metrics.httpInFlight.dec();
}

/** Counts a request when it ends (http/request-end.ts), its client still there or not. */
export function countRequest(metrics: Metrics): (request: FastifyRequest, reply: FastifyReply) => void {
  return (request, reply) => {
    requestLeft(request, metrics);
    const route = routeOf(request);
    metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  };
}

/** `text`: the series of every worker together, when this process is one of several (process/cluster/shared-metrics.ts). */
export function registerMetrics(app: FastifyInstance, metrics: Metrics, text: () => Promise<string> = () => metrics.registry.metrics()): void {
  app.get(
    '/metrics',
    {
      schema: {
        tags: ['Operations'],
        operationId: 'metrics',
        summary: 'Prometheus metrics',
        description: 'Prometheus text exposition format. Needs no API token: keep it off the public network. The series are listed in docs/metrics.md.',
        response: {
          200: {
            description: 'The metrics.',
            content: { 'text/plain': { schema: { type: 'string' } } },
          },
        },
      },
    },
    async (_request, reply) => {
      return reply.type(metrics.registry.contentType).send(await text());
    },
  );
}
