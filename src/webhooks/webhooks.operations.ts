// Webhook endpoints as the OpenAPI document describes them (docs/api.md, "Webhooks"), and
// their code samples.
import { apiTokenAccess } from '../auth/route-access.ts';
import { AUTH_ERRORS, BODY_ERRORS, errorResponses } from '../http/envelope.schemas.ts';
import type { CodeSample } from '../http/openapi.ts';
import * as schemas from './webhooks.schemas.ts';

const tags = ['Webhooks'];
const ADMIN =
  "Needs an API token with the `admin` scope, and touches only its own account's endpoints; a token restricted to one environment only the endpoints of that environment (others are `404 webhook_endpoint_not_found`).";

export const listWebhookEndpointsOperation = {
  tags,
  operationId: 'listWebhookEndpoints',
  summary: "List the account's webhook endpoints",
  description: `${ADMIN} Oldest first, each with its status (a disabled endpoint failed for 3 days); never a secret.`,
  ...apiTokenAccess('admin', 'token', "managing the account's webhook endpoints"),
  response: {
    200: { ...schemas.WebhookEndpointListResponse, 'x-response-description': "The account's webhook endpoints." },
    ...errorResponses(...AUTH_ERRORS),
  },
};

export const createWebhookEndpointOperation = {
  tags,
  operationId: 'createWebhookEndpoint',
  summary: 'Create a webhook endpoint; its secret is shown once',
  description: [
    ADMIN,
    'Every change event of the account from now on (of `types`, if given) is POSTed to `url`, signed as the Standard Webhooks specification says, in order and at least once.',
    'An endpoint created by a token restricted to one environment receives only the events of that environment.',
    'The URL must be http(s) and its host must resolve to public addresses only: loopback, private, link-local (metadata), CGNAT, documentation and reserved addresses, and the IPv6 forms that carry them, are `400 webhook_url_forbidden`.',
    'A user name or password in the URL is `400 validation_failed`: put credentials in the path or a query parameter.',
    "At most `UGS_WEBHOOK_MAX_ENDPOINTS` (16) endpoints receive one environment's events (an endpoint of no environment counts for both): one more is `409 webhook_endpoint_limit_reached`.",
    'The secret is in this answer only: the service keeps it sealed.',
  ].join(' '),
  ...apiTokenAccess('admin', 'token', "managing the account's webhook endpoints"),
  body: schemas.CreateWebhookEndpointBody,
  response: {
    201: { ...schemas.CreatedWebhookEndpointResponse, 'x-response-description': 'The new endpoint, with its secret (shown once).' },
    ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, 'webhook_url_forbidden', 'webhook_endpoint_limit_reached'),
  },
};

export const deleteWebhookEndpointOperation = {
  tags,
  operationId: 'deleteWebhookEndpoint',
  summary: 'Delete a webhook endpoint',
  description: `${ADMIN} Nothing more is sent to it; its pending deliveries and their history go with it.`,
  ...apiTokenAccess('admin', 'token', "managing the account's webhook endpoints"),
  params: schemas.WebhookEndpointIdParams,
  response: {
    200: { ...schemas.DeletedWebhookEndpointResponse, 'x-response-description': 'The endpoint as it was.' },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed', 'webhook_endpoint_not_found'),
  },
};

export const rotateWebhookSecretOperation = {
  tags,
  operationId: 'rotateWebhookSecret',
  summary: "Rotate a webhook endpoint's secret; the new one is shown once",
  description: `${ADMIN} For 24 hours the old secret also signs: each delivery carries both signatures, space-separated in \`webhook-signature\`, so the receiver can switch at any time.`,
  ...apiTokenAccess('admin', 'token', "managing the account's webhook endpoints"),
  params: schemas.WebhookEndpointIdParams,
  response: {
    200: { ...schemas.CreatedWebhookEndpointResponse, 'x-response-description': 'The endpoint, with its new secret (shown once).' },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed', 'webhook_endpoint_not_found'),
  },
};

export const enableWebhookEndpointOperation = {
  tags,
  operationId: 'enableWebhookEndpoint',
  summary: 'Enable a webhook endpoint that was disabled',
  description: `${ADMIN} For an endpoint disabled after 3 days of failures, once its receiver works again: the deliveries still pending are sent again at once, and new events go to it. The events made while it was disabled were not queued for it: read them from the feed (\`GET /api/events?after=\`). An enabled endpoint is answered as it is.`,
  ...apiTokenAccess('admin', 'token', "managing the account's webhook endpoints"),
  params: schemas.WebhookEndpointIdParams,
  response: {
    200: { ...schemas.EnabledWebhookEndpointResponse, 'x-response-description': 'The endpoint, enabled.' },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed', 'webhook_endpoint_not_found'),
  },
};

export const webhookDeliveriesOperation = {
  tags,
  operationId: 'listWebhookDeliveries',
  summary: "A webhook endpoint's latest deliveries and their attempts",
  description: `${ADMIN} Newest first: each event's delivery, its status, and every attempt with the status code, duration and error. Finished deliveries are kept as long as events (\`UGS_EVENT_RETENTION\`).`,
  ...apiTokenAccess('admin', 'token', "managing the account's webhook endpoints"),
  params: schemas.WebhookEndpointIdParams,
  querystring: schemas.WebhookDeliveriesQuery,
  response: {
    200: { ...schemas.WebhookDeliveriesResponse, 'x-response-description': 'The latest deliveries.' },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed', 'webhook_endpoint_not_found'),
  },
};

export const testWebhookEndpointOperation = {
  tags,
  operationId: 'testWebhookEndpoint',
  summary: 'Send a test event to a webhook endpoint',
  description: `${ADMIN} Sends one signed \`webhook_endpoint.test\` event now (event id 0, not in the feed, never retried) and answers how it went. It counts against the account's webhook requests in flight, like deliveries, one test at a time per endpoint: beyond, \`429 webhook_endpoint_busy\` with \`Retry-After\`.`,
  ...apiTokenAccess('admin', 'token', "managing the account's webhook endpoints"),
  params: schemas.WebhookEndpointIdParams,
  response: {
    200: { ...schemas.WebhookTestResponse, 'x-response-description': "The attempt's outcome (delivered: the endpoint answered 2xx)." },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed', 'webhook_endpoint_not_found', 'webhook_endpoint_busy'),
  },
};

const client =
  "import { UserGroupServiceClient } from '@ugs/client';\nconst ugs = new UserGroupServiceClient({ baseUrl: process.env.UGS!, apiToken: process.env.ADMIN_TOKEN! });\n";

export const webhookCodeSamples: Record<string, CodeSample[]> = {
  listWebhookEndpoints: [
    { lang: 'Shell', label: 'curl', source: 'curl "$UGS/api/webhook_endpoints" -H "Authorization: Token $ADMIN_TOKEN"' },
    { lang: 'TypeScript', label: '@ugs/client', source: `${client}const { webhook_endpoints } = await ugs.listWebhookEndpoints();` },
  ],
  createWebhookEndpoint: [
    {
      lang: 'Shell',
      label: 'curl',
      source:
        'curl -X POST "$UGS/api/webhook_endpoints" -H "Authorization: Token $ADMIN_TOKEN" -H "Content-Type: application/json" \\\n  -d \'{"url": "https://example.com/ugs-webhooks", "types": ["user_group.deleted"]}\'',
    },
    {
      lang: 'TypeScript',
      label: '@ugs/client',
      source: `${client}const { webhook_endpoint } = await ugs.createWebhookEndpoint({ url: 'https://example.com/ugs-webhooks' });\n// webhook_endpoint.secret is shown this once`,
    },
  ],
  deleteWebhookEndpoint: [
    { lang: 'Shell', label: 'curl', source: 'curl -X DELETE "$UGS/api/webhook_endpoints/3" -H "Authorization: Token $ADMIN_TOKEN"' },
    { lang: 'TypeScript', label: '@ugs/client', source: `${client}await ugs.deleteWebhookEndpoint(3);` },
  ],
  rotateWebhookSecret: [
    { lang: 'Shell', label: 'curl', source: 'curl -X POST "$UGS/api/webhook_endpoints/3/rotate_secret" -H "Authorization: Token $ADMIN_TOKEN"' },
    { lang: 'TypeScript', label: '@ugs/client', source: `${client}const { webhook_endpoint } = await ugs.rotateWebhookSecret(3);` },
  ],
  enableWebhookEndpoint: [
    { lang: 'Shell', label: 'curl', source: 'curl -X POST "$UGS/api/webhook_endpoints/3/enable" -H "Authorization: Token $ADMIN_TOKEN"' },
    { lang: 'TypeScript', label: '@ugs/client', source: `${client}const { webhook_endpoint } = await ugs.enableWebhookEndpoint(3);` },
  ],
  listWebhookDeliveries: [
    { lang: 'Shell', label: 'curl', source: 'curl "$UGS/api/webhook_endpoints/3/deliveries?limit=20" -H "Authorization: Token $ADMIN_TOKEN"' },
    { lang: 'TypeScript', label: '@ugs/client', source: `${client}const { deliveries } = await ugs.listWebhookDeliveries(3, { limit: 20 });` },
  ],
  testWebhookEndpoint: [
    { lang: 'Shell', label: 'curl', source: 'curl -X POST "$UGS/api/webhook_endpoints/3/test" -H "Authorization: Token $ADMIN_TOKEN"' },
    { lang: 'TypeScript', label: '@ugs/client', source: `${client}const { delivered, attempt } = await ugs.testWebhookEndpoint(3);` },
  ],
};
