import type { ApiErrorCode, ErrorDetail } from './types.js';

/** Failures that happen without an error answer from the service. */
export type ClientErrorCode =
  /** The call took longer than timeoutMs (status 0). */
  | 'timeout'
  /** Aborted by the caller's signal (status 0). */
  | 'aborted'
  /** No HTTP response: connection refused, reset, DNS failure (status 0). */
  | 'network_error'
  /** An HTTP response that is not the service's JSON envelope (e.g. a proxy's HTML page). */
  | 'invalid_response';

export type UserGroupServiceErrorCode = ApiErrorCode | ClientErrorCode;

export interface UserGroupServiceErrorInit {
  code: UserGroupServiceErrorCode;
  message: string;
  status: number;
  requestId?: string;
  details?: ErrorDetail[];
  retryAfterSeconds?: number;
  cause?: unknown;
}

/**
 * Every failure of a client call. `code` is the service's `error.code` (see the API
 * documentation) or one of the client's own codes; `status` is the HTTP status (0 when
 * there was no response); `requestId` is the X-Request-Id to quote when reporting it.
 */
export class UserGroupServiceError extends Error {
  readonly code: UserGroupServiceErrorCode;
  readonly status: number;
  readonly requestId: string | undefined;
  readonly details: ErrorDetail[];
  /** From the Retry-After header of a 429 or 503, when the retries ran out. */
  readonly retryAfterSeconds: number | undefined;

  constructor(init: UserGroupServiceErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'UserGroupServiceError';
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.details = init.details ?? [];
    this.retryAfterSeconds = init.retryAfterSeconds;
  }
}

export function isUserGroupServiceError(value: unknown, code?: UserGroupServiceErrorCode): value is UserGroupServiceError {
  return value instanceof UserGroupServiceError && (code === undefined || value.code === code);
}
