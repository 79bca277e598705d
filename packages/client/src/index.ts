export { UserGroupServiceClient, type UserGroupServiceClientOptions, type CallOptions } from './client.ts';
export { UserGroupServiceError, isUserGroupServiceError, type ClientErrorCode, type UserGroupServiceErrorCode } from './errors.ts';
export { parseRetryAfter, retryDelayMs, DEFAULT_RETRY, type RetryOptions } from './retry.ts';
export type * from './types.ts';
