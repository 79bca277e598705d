// The types of change events (docs/api.md, "Change events"). Apart from the outbox so that
// `ugs webhooks create --help` can list them without loading the database's modules.
export const EVENT_TYPES = [
  'user_group.created',
  'user_group.updated',
  'user_group.token_rotated',
  'user_group.deleted',
  'api_token.created',
  'api_token.revoked',
  'embed_key.added',
  'embed_key.retired',
  'webhook_endpoint.created',
  'webhook_endpoint.secret_rotated',
  'webhook_endpoint.disabled',
  'webhook_endpoint.enabled',
  'webhook_endpoint.deleted',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];
