// The stream of change events as the OpenAPI document describes it (docs/api.md, "Change
// events", "The stream"), its request declared once (validation and the document), and its
// code samples.
import { apiTokenAccess } from '../auth/route-access.ts';
import { Type } from 'typebox';
import { AUTH_ERRORS, errorResponses } from '../http/envelope.schemas.ts';
import type { CodeSample } from '../http/openapi.ts';
import * as schemas from './events.schemas.ts';

const StreamCursor = Type.String({
  pattern: '^(0|[1-9][0-9]{0,15})$',
  description: 'An event id: the stream starts after it. Absent (and no Last-Event-ID): only events from now on.',
  examples: ['1795684443220000'],
});

export const EventStreamQuery = Type.Object(
  {
    after: Type.Optional(StreamCursor),
    types: Type.Optional(schemas.EventTypesFilter),
  },
  { additionalProperties: false },
);

export const EventStreamHeaders = Type.Object({
  'last-event-id': Type.Optional(
    Type.String({
      pattern: '^(0|[1-9][0-9]{0,15})$',
      description: 'The id of the last event received: a reconnecting EventSource sends it, and it wins over `after`.',
      examples: ['1795684443220000'],
    }),
  ),
});

export const eventStreamOperation = {
  tags: ['Change events'],
  operationId: 'streamEvents',
  summary: "The account's change events as they happen (Server-Sent Events)",
  description: [
    'Needs the `read` scope. The events of the feed (`GET /api/events`), same filters, same rules, written as Server-Sent Events while the connection lasts:',
    'each event is `id: <event id>`, `event: <type>`, `data: <the event object as JSON>`. A comment `: heartbeat` comes every 15 s (UGS_EVENT_HEARTBEAT_MS).',
    'Resume with the `Last-Event-ID` header (an EventSource sends it when it reconnects) or `after`; without either, the stream starts with the next event.',
    'A cursor older than retention is `410 cursor_expired` before the stream starts. On shutdown the server writes `event: shutdown` and ends the stream: reconnect, with Last-Event-ID.',
    'A token may have 20 streams open at once and an account 100 (UGS_EVENT_STREAMS_PER_TOKEN, UGS_EVENT_STREAMS_PER_ACCOUNT), on all instances together: one more is `429 too_many_streams`.',
  ].join(' '),
  ...apiTokenAccess('read', 'token', 'reading change events'),
  querystring: EventStreamQuery,
  headers: EventStreamHeaders,
  response: {
    200: {
      description: 'The stream, until the client or the server ends it.',
      content: { 'text/event-stream': { schema: { type: 'string' } } },
    },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed', 'cursor_expired', 'too_many_streams'),
  },
};

export const eventStreamCodeSamples: Record<string, CodeSample[]> = {
  streamEvents: [
    {
      lang: 'Shell',
      label: 'curl',
      source:
        'curl -N "$UGS/api/events/stream?types=user_group.deleted,user_group.token_rotated" -H "Authorization: Token $UGS_TOKEN" -H "Last-Event-ID: 1795684443220000"',
    },
    {
      lang: 'TypeScript',
      label: '@ugs/client',
      source:
        "import { followEvents } from '@ugs/client';\nfor await (const event of followEvents({ baseUrl: process.env.UGS!, apiToken: process.env.UGS_TOKEN!, after: '1795684443220000' })) console.log(event.id, event.type);",
    },
  ],
};
