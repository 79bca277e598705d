// What every request gets from distributed tracing, whether or not spans are exported: the
// W3C `traceparent` a caller sent (https://www.w3.org/TR/trace-context/#traceparent-header)
// is read, so that the request's log line carries its trace_id and span_id and can be found
// from the caller's trace. Exporting spans (otel.ts) is optional and loaded only when it is
// configured; this file loads nothing.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { LogEvent } from 'kysely';
import type { Redis } from 'ioredis';

/** version 00 (and, as the spec asks, any later version read as 00): version-traceid-parentid-flags. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-|$)/;
const INVALID_TRACE_ID = '0'.repeat(32);
const INVALID_SPAN_ID = '0'.repeat(16);

export interface TraceIds {
  trace_id: string;
  span_id: string;
}

/** The trace and parent span of a valid `traceparent`, or undefined (absent, malformed, version ff, all-zero ids). */
export function parseTraceparent(header: string | string[] | undefined): TraceIds | undefined {
  if (typeof header !== 'string') return undefined;
  const match = TRACEPARENT.exec(header.trim());
  if (!match || match[1] === 'ff' || (match[1] === '00' && header.trim().length !== 55)) return undefined;
  if (match[2] === INVALID_TRACE_ID || match[3] === INVALID_SPAN_ID) return undefined;
  return { trace_id: match[2], span_id: match[3] };
}

/** The hot path's view of tracing: statements become spans of the request that asked for them. */
export interface QueryTracing {
  /**
   * The caller's trace context, to hand to statement() later: a batched read runs after the
   * turn that asked for it, in whichever request's context happened to schedule the batch.
   */
  capture(): unknown;
  /** Records a statement that has just finished (Kysely's log event) as a span, a child of `captured` or of the active context. */
  statement(event: LogEvent, captured?: unknown): void;
}

/** Spans exported over OTLP (otel.ts); absent when tracing is off. */
export interface Tracing extends QueryTracing {
  /** onRequest: starts the request's span, joined to its `traceparent`; `next` runs in its context, and so does everything after it. */
  startRequest(request: FastifyRequest, next: () => void): void;
  /** onResponse: names the span after the route, sets the status and ends it; the ids go on the log line. */
  endRequest(request: FastifyRequest, reply: FastifyReply): TraceIds | undefined;
  /** Every Redis command becomes a span of the request that sent it. */
  instrumentRedis(redis: Redis): void;
  /** Exports what is still buffered, within `timeoutMs`. */
  shutdown(timeoutMs: number): Promise<void>;
}
