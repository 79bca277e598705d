// One realistic answer per error code, for the OpenAPI document: what a caller sees, in the
// words the service uses (docs/api.md, "Errors").
import type { ErrorCode, ErrorDetail } from '../foundations/errors.ts';

interface ErrorExample {
  summary: string;
  message: string;
  details?: ErrorDetail[];
}

export const ERROR_EXAMPLES: Record<ErrorCode, ErrorExample> = {
  bad_request: { summary: 'The request is not valid HTTP', message: 'the request is not valid HTTP/1.1' },
  invalid_json: { summary: 'The body is not JSON', message: 'request body is not valid JSON' },
  validation_failed: {
    summary: 'A field breaks its rule',
    message: 'user_group_id must be at most 256 characters',
    details: [{ field: 'user_group_id', issue: 'too_long' }],
  },
  ambiguous_request: {
    summary: 'Identified in both body and query string',
    message: 'identify the user group in the JSON body or in the query string, not both',
  },
  parent_not_found: {
    summary: 'The parent does not exist here',
    message: 'no user group with user_group_id "acme" in Customer to be the parent',
    details: [{ field: 'parent_user_group_id', issue: 'not_found' }],
  },
  hierarchy_too_deep: {
    summary: 'The hierarchy would be too deep',
    message: 'a hierarchy is at most 3 levels deep (UGS_MAX_HIERARCHY_DEPTH); this change would make it 4',
    details: [{ field: 'parent_user_group_id', issue: 'too_deep' }],
  },
  webhook_endpoint_limit_reached: {
    summary: 'The account has as many webhook endpoints as allowed',
    message:
      "this account has 16 webhook endpoints receiving Customer's events, the most allowed (UGS_WEBHOOK_MAX_ENDPOINTS=16): delete one before adding another",
  },
  webhook_endpoint_busy: {
    summary: "The account's webhook requests are all in flight",
    message:
      'this endpoint has a test event in flight, or this account has 4 webhook requests in flight on this instance (UGS_WEBHOOK_ACCOUNT_CONCURRENCY): try again when they end',
  },
  webhook_url_forbidden: {
    summary: 'The webhook URL is not allowed',
    message:
      'the webhook URL\'s host "10.0.0.7" is not a public address, or does not resolve to one: webhooks go to public addresses only (UGS_WEBHOOK_ALLOW_PRIVATE)',
    details: [{ field: 'url', issue: 'forbidden_address' }],
  },
  missing_api_token: { summary: 'No Authorization header', message: 'send the API token as Authorization: Token <API token>' },
  invalid_api_token: { summary: 'Unknown, revoked or expired API token', message: 'the API token is not valid (unknown, malformed, revoked or expired)' },
  wrong_token_kind: {
    summary: 'A user group token where an API token is needed, or the reverse',
    message:
      'a user group token (ugs_grp_…) was sent where an API token is needed: it is for the embed side (/api/embed/…, as Authorization: Bearer <token>); the management API takes an API token (ugs_api_…): send the API token as Authorization: Token <API token>',
  },
  invalid_token: {
    summary: 'The token is not (or no longer) valid',
    message: 'the token is not valid (unknown, malformed, expired, rotated, or its user group was deleted)',
  },
  insufficient_scope: { summary: 'A read-only token', message: 'creating a user group (it does not exist yet) needs an API token with the write scope' },
  environment_forbidden: {
    summary: 'The token is restricted to the other environment',
    message: 'this API token may only be used in the Customer environment',
  },
  origin_forbidden: {
    summary: 'The embed token is bound to another origin',
    message: "this embed token is bound to another origin (the request's Origin header must match the one it was issued for)",
  },
  embed_id_forbidden: {
    summary: 'The embed token is bound to another dashboard',
    message: 'this embed token is bound to another dashboard (send the embed_id it was issued for as the embed_id query parameter)',
  },
  user_group_not_found: { summary: 'No such user group', message: 'no user group with user_group_id "example_1" in Customer' },
  api_token_not_found: { summary: 'No such API token in this account', message: 'no API token with id 42 in this account' },
  webhook_endpoint_not_found: { summary: 'No such webhook endpoint in this account', message: 'no webhook endpoint with id 3 in this account' },
  group_tag_not_found: { summary: 'No such tag in this environment', message: 'no tag "beta" in Customer' },
  api_token_revoked: { summary: 'The API token was revoked before', message: 'API token 42 was already revoked at 2026-11-24T10:00:00.000Z' },
  last_admin_token: {
    summary: "The account's last admin token",
    message: "API token 1 is the account's last active token with the admin scope: create another admin token before revoking it",
  },
  idempotency_key_in_use: {
    summary: 'A request with this Idempotency-Key is still running',
    message: 'a request with this Idempotency-Key is still running: retry it once that one has answered',
  },
  idempotency_key_reused: {
    summary: 'The Idempotency-Key was used for another request',
    message: 'this Idempotency-Key was used in the last 24 h for another request (another method, path or body): use a new key for a new request',
  },
  token_not_found: { summary: 'Not a current token of this account', message: 'current_token is not the current token of any user group of this account' },
  not_found: { summary: 'No such path', message: 'no route GET /api/usr' },
  method_not_allowed: { summary: 'Another method', message: 'PATCH is not allowed on /api/user; use GET, POST, PUT, DELETE' },
  request_timeout: {
    summary: 'The request did not arrive in time',
    message: 'the request did not arrive in time: send the headers and the body without pausing',
  },
  cursor_expired: {
    summary: 'The cursor is older than the events kept',
    message:
      'events after 41 are no longer kept (events are kept for the retention period): resynchronise, then read on from next_cursor of a read without "after"',
  },
  user_group_exists: { summary: 'The id is taken', message: 'a user group with user_group_id "example_1" already exists in Customer' },
  group_tag_exists: { summary: 'The tag exists', message: 'the tag "beta" already exists in Customer' },
  tag_limit_reached: {
    summary: 'The environment has as many tags as allowed',
    message:
      'Customer has 10000 tags, the most an environment may have (UGS_MAX_TAGS_PER_ENVIRONMENT=10000): nothing was changed; give groups tags it has, or delete tags no longer needed (DELETE /api/group_tags)',
  },
  hierarchy_cycle: {
    summary: 'The group would be its own ancestor',
    message: 'user group "acme" cannot be placed under "jane": "jane" is "acme" or one of its descendants',
    details: [{ field: 'parent_user_group_id', issue: 'cycle' }],
  },
  user_group_has_children: {
    summary: 'The group has children',
    message: 'user group "acme" has children: delete or move them first, or delete the whole subtree with cascade=true',
  },
  payload_too_large: { summary: 'A body over 256 KiB', message: 'request body is larger than 262144 bytes' },
  embed_token_too_large: {
    summary: 'The token would not fit in a header',
    message:
      "the embed token would be 74,211 bytes, over the limit of 8,192 bytes (what proxies accept in one header); its variables are the group's computed properties: keep large data out of properties, or use the user group token, whose context is read from the service",
  },
  unsupported_media_type: { summary: 'Not application/json', message: 'a request body must be sent as Content-Type: application/json' },
  rate_limited: { summary: 'Over the rate limit', message: 'this API token made more than 60000 requests in 60 s; retry in 12 s' },
  too_many_heavy_operations: {
    summary: "The account's heavy operations are all running",
    message:
      'this account already runs 2 heavy operations at once (bulk upserts, tag renames and deletes, exports), the most it may, and none ended within 15 s; nothing was changed: retry when one has ended',
  },
  lock_timeout: {
    summary: 'Other requests held a lock too long',
    message: 'other calls held these user groups for 15 s; nothing was changed: retry shortly',
  },
  too_many_streams: {
    summary: 'Too many event streams open',
    message: 'this API token has 20 event streams open, the most one token may have (20): close one before opening another (one stream per process is enough)',
  },
  headers_too_large: { summary: 'Headers over 16 KiB', message: 'the request headers are larger than the server accepts (16 KiB)' },
  internal_error: { summary: 'A fault of the service', message: 'internal error; quote the request id when reporting it' },
  unavailable: { summary: 'The database cannot be reached', message: 'the database is unavailable; retry shortly' },
  storage_unavailable: {
    summary: 'The database cannot write: its storage is full or failing',
    message: 'the database cannot write right now (its storage is full or failing); nothing was changed: retry later',
  },
};
