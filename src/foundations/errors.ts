// The one error vocabulary of the API: a code says exactly what failed, and the code alone
// decides the HTTP status, so no handler can pick a status that disagrees with its code.

export const errorStatus = {
  bad_request: 400,
  invalid_json: 400,
  validation_failed: 400,
  ambiguous_request: 400,
  parent_not_found: 400,
  webhook_url_forbidden: 400,
  hierarchy_too_deep: 400,
  missing_api_token: 401,
  invalid_api_token: 401,
  wrong_token_kind: 401,
  invalid_token: 401,
  insufficient_scope: 403,
  environment_forbidden: 403,
  origin_forbidden: 403,
  embed_id_forbidden: 403,
  user_group_not_found: 404,
  token_not_found: 404,
  api_token_not_found: 404,
  webhook_endpoint_not_found: 404,
  group_tag_not_found: 404,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  cursor_expired: 410,
  user_group_exists: 409,
  hierarchy_cycle: 409,
  user_group_has_children: 409,
  group_tag_exists: 409,
  tag_limit_reached: 409,
  api_token_revoked: 409,
  last_admin_token: 409,
  idempotency_key_in_use: 409,
  webhook_endpoint_limit_reached: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  embed_token_too_large: 422,
  idempotency_key_reused: 422,
  headers_too_large: 431,
  rate_limited: 429,
  too_many_streams: 429,
  webhook_endpoint_busy: 429,
  too_many_heavy_operations: 429,
  lock_timeout: 429,
  internal_error: 500,
  unavailable: 503,
  storage_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof errorStatus;

export interface ErrorDetail {
  field: string;
  issue: string;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details?: ErrorDetail[];
  /** Extra response headers that belong to this error (Allow, Retry-After, WWW-Authenticate). */
  readonly headers?: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: { details?: ErrorDetail[]; headers?: Record<string, string> } = {}) {
    super(message);
    this.name = 'AppError';
    this.code = code;
    this.details = options.details;
    this.headers = options.headers;
  }

  get status(): number {
    return errorStatus[this.code];
  }
}

export function validationFailed(field: string, issue: string, message: string): AppError {
  return new AppError('validation_failed', message, { details: [{ field, issue }] });
}
