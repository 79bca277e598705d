// Webhook endpoints over HTTP, declared once: validation, the response allow-list (a listing
// never carries a secret) and the OpenAPI document (docs/api.md, "Webhooks").
import { Type, type Static } from 'typebox';
import { PLAIN_TEXT } from '../http/text.schemas.ts';
import { EnvironmentTag } from '../user-groups/user-groups.schemas.ts';
import { EventTypeName } from '../events/events.schemas.ts';

const DateTime = Type.String({ format: 'date-time' });
const NullableDateTime = Type.Union([DateTime, Type.Null()]);

export const WebhookEndpoint = Type.Object(
  {
    id: Type.Integer({ examples: [3] }),
    url: Type.String({ examples: ['https://example.com/ugs-webhooks'] }),
    types: Type.Union([Type.Array(EventTypeName), Type.Null()], { description: 'The event types it receives; null: every type.' }),
    description: Type.Union([Type.String(), Type.Null()], { examples: ['sync to the CRM'] }),
    environment: Type.Union([EnvironmentTag, Type.Null()], {
      description:
        "The only environment whose events it receives (an endpoint created by an admin token restricted to one environment); null: the account's every event.",
    }),
    status: Type.Enum(['enabled', 'disabled'], { type: 'string', description: 'disabled: its deliveries failed for 3 days; it receives nothing more.' }),
    disabled_at: Type.Union([DateTime, Type.Null()], { description: 'When it was disabled.' }),
    failing_since: Type.Union([DateTime, Type.Null()], { description: 'When its deliveries began to fail; null while they succeed.' }),
    previous_secret_expires_at: Type.Union([DateTime, Type.Null()], {
      description: 'After a rotation: until when the previous secret also signs (a second signature in webhook-signature).',
    }),
    created_at: DateTime,
  },
  { title: 'WebhookEndpoint', additionalProperties: false, description: 'A webhook endpoint as listed: never its secret.' },
);
export type WebhookEndpointJson = Static<typeof WebhookEndpoint>;

const Secret = Type.String({
  description: 'The signing secret (`whsec_` + base64): shown this once, stored sealed. Verify deliveries with it (Standard Webhooks).',
  examples: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
});

const EndpointWithSecret = Type.Object(
  { ...WebhookEndpoint.properties, secret: Secret },
  { title: 'WebhookEndpointWithSecret', additionalProperties: false, description: 'A webhook endpoint with its new secret (shown this once).' },
);

export const CreateWebhookEndpointBody = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: 2048,
      description:
        'An http(s) URL whose host is, or resolves to, public addresses only (a literal loopback, private, link-local, metadata or reserved address, and `localhost`, are `400 webhook_url_forbidden`; a name is resolved at each attempt, never here), without a user name or password (`400 validation_failed`: put credentials in the path or a query parameter, which only admins see).',
      examples: ['https://example.com/ugs-webhooks'],
    }),
    types: Type.Optional(Type.Array(EventTypeName, { minItems: 1, uniqueItems: true, description: 'Only these event types. Absent: every type.' })),
    description: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: PLAIN_TEXT, description: 'What it is for, 1-200 characters.' })),
  },
  {
    title: 'CreateWebhookEndpointRequest',
    additionalProperties: false,
    examples: [{ url: 'https://example.com/ugs-webhooks', types: ['user_group.deleted'] }],
  },
);

export const CreatedWebhookEndpointResponse = Type.Object(
  { success: Type.Literal(1), webhook_endpoint: EndpointWithSecret },
  { title: 'CreatedWebhookEndpoint' },
);

export const WebhookEndpointListResponse = Type.Object(
  { success: Type.Literal(1), webhook_endpoints: Type.Array(WebhookEndpoint) },
  { title: 'WebhookEndpointList' },
);

export const DeletedWebhookEndpointResponse = Type.Object({ success: Type.Literal(1), webhook_endpoint: WebhookEndpoint }, { title: 'DeletedWebhookEndpoint' });

export const EnabledWebhookEndpointResponse = Type.Object({ success: Type.Literal(1), webhook_endpoint: WebhookEndpoint }, { title: 'EnabledWebhookEndpoint' });

export const WebhookEndpointIdParams = Type.Object(
  { id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'The id of the webhook endpoint.', examples: [3] }) },
  { additionalProperties: false },
);

const Attempt = Type.Object(
  {
    attempted_at: DateTime,
    status_code: Type.Union([Type.Integer(), Type.Null()], { description: "The receiver's HTTP status; null when it did not answer." }),
    duration_ms: Type.Integer(),
    error: Type.Union([Type.String(), Type.Null()], {
      description: 'Why the attempt failed (e.g. `HTTP 500`, `no answer within 15 s`); null when it succeeded.',
    }),
  },
  { title: 'WebhookAttempt', additionalProperties: false },
);

const Delivery = Type.Object(
  {
    id: Type.Integer(),
    webhook_id: Type.String({ description: 'The webhook-id header of every attempt.', examples: ['evt_1_42'] }),
    event_id: Type.Integer({ description: "The event's id in the account's feed." }),
    event_type: EventTypeName,
    status: Type.Enum(['pending', 'delivered', 'failed'], { type: 'string', description: 'failed: given up after the last retry.' }),
    next_attempt_at: NullableDateTime,
    created_at: DateTime,
    finished_at: NullableDateTime,
    attempts: Type.Array(Attempt, { description: 'Every attempt, oldest first.' }),
  },
  { title: 'WebhookDelivery', additionalProperties: false },
);

export const WebhookDeliveriesQuery = Type.Object(
  { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, description: 'At most this many deliveries, 1-200 (default 50).' })) },
  { additionalProperties: false },
);

export const WebhookDeliveriesResponse = Type.Object(
  { success: Type.Literal(1), deliveries: Type.Array(Delivery, { description: 'The latest deliveries, newest first.' }) },
  { title: 'WebhookDeliveries' },
);

export const WebhookTestResponse = Type.Object(
  {
    success: Type.Literal(1),
    delivered: Type.Boolean({ description: 'Whether the endpoint answered 2xx.' }),
    attempt: Attempt,
  },
  { title: 'WebhookTest' },
);
