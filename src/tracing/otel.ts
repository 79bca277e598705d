// OpenTelemetry traces, exported over OTLP/HTTP (http/protobuf or http/json) when
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set: a span per
// request (method, route, status), joined to an incoming W3C traceparent, with a child span
// per database statement and per Redis command.
//
// Loaded only then (server.ts imports this file dynamically), and its packages through
// require(), one file at a time: Node's ESM loader opens every file of a module graph at
// once, which under a low open-files limit kills the start (see db/kysely.ts). With tracing
// off, nothing here is loaded and the hot path pays for nothing but a header lookup.
import { createRequire } from 'node:module';
import type * as Api from '@opentelemetry/api';
import type * as Core from '@opentelemetry/core';
import type * as ContextAsyncHooks from '@opentelemetry/context-async-hooks';
import type * as Resources from '@opentelemetry/resources';
import type * as SdkTrace from '@opentelemetry/sdk-trace';
import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { LogEvent } from 'kysely';
import type { Redis } from 'ioredis';
import type { Config } from '../config.ts';
import type { TraceIds, Tracing } from './trace-context.ts';

type TracingSettings = Pick<Config, 'otlpTracesUrl' | 'otlpProtocol' | 'otlpHeaders' | 'serviceName' | 'traceSampler' | 'traceSamplerRatio'> & {
  serviceVersion: string;
  /** `sqlite` or `postgresql`, as OpenTelemetry's db.system.name spells them. */
  dbSystem: string;
};

const requireCjs = createRequire(import.meta.url);

/** The span of each request in flight, from onRequest to onResponse. */
const requestSpans = new WeakMap<FastifyRequest, Api.Span>();

/** `select`, `insert`, … : the statement's operation, for its span's name. */
function operationOf(sqlText: string): string {
  const match = /^\s*([a-z]+)/i.exec(sqlText);
  return match ? match[1].toUpperCase() : 'QUERY';
}

export function startTracing(settings: TracingSettings): Tracing {
  const api = requireCjs('@opentelemetry/api') as typeof Api;
  const { W3CTraceContextPropagator } = requireCjs('@opentelemetry/core') as typeof Core;
  const { AsyncLocalStorageContextManager } = requireCjs('@opentelemetry/context-async-hooks') as typeof ContextAsyncHooks;
  const { resourceFromAttributes } = requireCjs('@opentelemetry/resources') as typeof Resources;
  const { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider } = requireCjs(
    '@opentelemetry/sdk-trace',
  ) as typeof SdkTrace;
  // Both packages export the same class name; their options are the same too.
  const exporterPackage = settings.otlpProtocol === 'http/json' ? '@opentelemetry/exporter-trace-otlp-http' : '@opentelemetry/exporter-trace-otlp-proto';
  const { OTLPTraceExporter } = requireCjs(exporterPackage) as typeof OtlpHttp;

  const contextManager = new AsyncLocalStorageContextManager().enable();
  api.context.setGlobalContextManager(contextManager);
  const propagator = new W3CTraceContextPropagator();
  api.propagation.setGlobalPropagator(propagator);
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.serviceName, 'service.version': settings.serviceVersion }),
    sampler: samplerOf(settings),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: settings.otlpTracesUrl, headers: settings.otlpHeaders }) })],
  });
  api.trace.setGlobalTracerProvider(provider);
  const tracer = provider.getTracer('user-group-service', settings.serviceVersion);

  /** OTEL_TRACES_SAMPLER's names. By default a caller's decision is kept and new traces are all recorded. */
  function samplerOf({ traceSampler, traceSamplerRatio }: TracingSettings): SdkTrace.Sampler {
    const own = traceSampler.endsWith('always_off')
      ? new AlwaysOffSampler()
      : traceSampler.endsWith('traceidratio')
        ? new TraceIdRatioBasedSampler(traceSamplerRatio)
        : new AlwaysOnSampler();
    return traceSampler.startsWith('parentbased_') ? new ParentBasedSampler({ root: own }) : own;
  }
  const headerGetter: Api.TextMapGetter<FastifyRequest['headers']> = {
    keys: (headers) => Object.keys(headers),
    get: (headers, key) => headers[key],
  };

  const statement = (event: LogEvent, captured?: unknown) => {
    const end = performance.timeOrigin + performance.now();
    const parent = (captured as Api.Context | undefined) ?? api.context.active();
    // A statement outside any request (migrations, the signing-key refresh) starts no trace.
    if (!api.trace.getSpan(parent)) return;
    const sqlText = event.query.sql;
    const system = settings.dbSystem;
    const span = tracer.startSpan(
      `${operationOf(sqlText)} ${system}`,
      {
        kind: api.SpanKind.CLIENT,
        startTime: end - event.queryDurationMillis,
        // The text has placeholders, never the values: no token or id reaches the trace.
        attributes: { 'db.system.name': system, 'db.operation.name': operationOf(sqlText), 'db.query.text': sqlText },
      },
      parent,
    );
    if (event.level === 'error') {
      const code = (event.error as { code?: unknown }).code;
      span.setAttribute('error.type', typeof code === 'string' ? code : 'error');
      span.setStatus({ code: api.SpanStatusCode.ERROR });
    }
    span.end(end);
  };

  return {
    capture: () => api.context.active(),
    statement,

    startRequest(request: FastifyRequest, next: () => void) {
      const parent = propagator.extract(api.ROOT_CONTEXT, request.headers, headerGetter);
      const span = tracer.startSpan(
        request.method,
        {
          kind: api.SpanKind.SERVER,
          attributes: { 'http.request.method': request.method, 'url.scheme': request.protocol, 'ugs.request_id': request.id },
        },
        parent,
      );
      requestSpans.set(request, span);
      api.context.with(api.trace.setSpan(parent, span), next);
    },

    endRequest(request: FastifyRequest, reply: FastifyReply): TraceIds | undefined {
      const span = requestSpans.get(request);
      if (!span) return undefined;
      const route = request.routeOptions.url;
      if (route) {
        span.updateName(`${request.method} ${route}`);
        span.setAttribute('http.route', route);
      }
      span.setAttribute('http.response.status_code', reply.statusCode);
      if (reply.statusCode >= 500) span.setStatus({ code: api.SpanStatusCode.ERROR });
      span.end();
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },

    instrumentRedis(redis: Redis) {
      const send = redis.sendCommand.bind(redis);
      redis.sendCommand = ((command: Parameters<Redis['sendCommand']>[0], stream?: unknown) => {
        const parent = api.context.active();
        if (!api.trace.getSpan(parent)) return send(command, stream as never);
        const span = tracer.startSpan(
          command.name,
          { kind: api.SpanKind.CLIENT, attributes: { 'db.system.name': 'redis', 'db.operation.name': command.name } },
          parent,
        );
        command.promise.then(
          () => span.end(),
          (err: { name?: string }) => {
            span.setAttribute('error.type', err?.name ?? 'error');
            span.setStatus({ code: api.SpanStatusCode.ERROR });
            span.end();
          },
        );
        return send(command, stream as never);
      }) as Redis['sendCommand'];
    },

    async shutdown(timeoutMs: number) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([provider.shutdown().catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
      clearTimeout(timer);
      contextManager.disable();
    },
  };
}
