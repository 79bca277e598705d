// An OTLP/HTTP trace receiver for tests: a real HTTP server on 127.0.0.1 that accepts what a
// collector accepts at /v1/traces, in http/json and http/protobuf, and decodes it into spans.
// The protobuf side walks the wire format itself (ExportTraceServiceRequest → ResourceSpans →
// ScopeSpans → Span), reading only the fields the tests look at.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
}

export interface Export {
  contentType: string;
  body: Buffer;
}

export interface OtlpReceiver {
  /** The base URL, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  exports: Export[];
  /** Every span received so far, decoded by its content type. */
  spans(): ReceivedSpan[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const exports: Export[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const contentType = String(req.headers['content-type'] ?? '');
      exports.push({ contentType, body: Buffer.concat(chunks) });
      // An empty ExportTraceServiceResponse, in the request's encoding: everything accepted.
      if (contentType.startsWith('application/json')) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    spans: () => exports.flatMap(decodeExport),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function decodeExport({ contentType, body }: Export): ReceivedSpan[] {
  if (contentType.startsWith('application/json')) return decodeJson(JSON.parse(body.toString('utf8')));
  if (contentType.startsWith('application/x-protobuf')) return decodeProtobuf(body);
  throw new Error(`an OTLP export with content type ${contentType}`);
}

type JsonValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: JsonValue }[];
}

function decodeJson(request: { resourceSpans?: { scopeSpans?: { spans?: JsonSpan[] }[] }[] }): ReceivedSpan[] {
  return (request.resourceSpans ?? []).flatMap((r) =>
    (r.scopeSpans ?? []).flatMap((s) =>
      (s.spans ?? []).map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? '',
        name: span.name,
        kind: span.kind,
        attributes: Object.fromEntries(
          (span.attributes ?? []).map(({ key, value }) => [
            key,
            value.stringValue ?? (value.intValue === undefined ? (value.boolValue ?? value.doubleValue ?? '') : Number(value.intValue)),
          ]),
        ),
      })),
    ),
  );
}

interface Field {
  no: number;
  /** varint (wire type 0) */
  int?: bigint;
  /** length-delimited (wire type 2) */
  bytes?: Buffer;
}

function fieldsOf(buffer: Buffer): Field[] {
  const fields: Field[] = [];
  let at = 0;
  const varint = () => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = buffer[at++];
      value |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return value;
    }
  };
  while (at < buffer.length) {
    const key = Number(varint());
    const no = key >>> 3;
    const wire = key & 7;
    if (wire === 0) fields.push({ no, int: varint() });
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = Number(varint());
      fields.push({ no, bytes: buffer.subarray(at, at + length) });
      at += length;
    } else throw new Error(`protobuf wire type ${wire} at byte ${at}`);
  }
  return fields;
}

const nested = (buffer: Buffer, no: number) =>
  fieldsOf(buffer)
    .filter((f) => f.no === no && f.bytes)
    .map((f) => f.bytes as Buffer);

/** AnyValue: string_value 1, bool_value 2, int_value 3. */
function anyValue(buffer: Buffer): string | number | boolean {
  const [field] = fieldsOf(buffer);
  if (!field) return '';
  if (field.no === 1) return field.bytes!.toString('utf8');
  if (field.no === 2) return field.int === 1n;
  if (field.no === 3) return Number(field.int);
  return '';
}

function decodeProtobuf(body: Buffer): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of nested(body, 1)) {
    for (const scopeSpans of nested(resourceSpans, 2)) {
      for (const span of nested(scopeSpans, 2)) {
        const fields = fieldsOf(span);
        const bytes = (no: number) => fields.find((f) => f.no === no)?.bytes ?? Buffer.alloc(0);
        spans.push({
          traceId: bytes(1).toString('hex'),
          spanId: bytes(2).toString('hex'),
          parentSpanId: bytes(4).toString('hex'),
          name: bytes(5).toString('utf8'),
          kind: Number(fields.find((f) => f.no === 6)?.int ?? 0n),
          // KeyValue: key 1, value 2
          attributes: Object.fromEntries(
            fields
              .filter((f) => f.no === 9 && f.bytes)
              .map((f) => [nested(f.bytes!, 1)[0]?.toString('utf8') ?? '', anyValue(nested(f.bytes!, 2)[0] ?? Buffer.alloc(0))]),
          ),
        });
      }
    }
  }
  return spans;
}
