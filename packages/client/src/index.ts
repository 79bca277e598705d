export { UserGroupServiceClient, jwksUrl, type UserGroupServiceClientOptions, type CallOptions } from './client.js';
export { UserGroupServiceError, isUserGroupServiceError, type ClientErrorCode, type UserGroupServiceErrorCode } from './errors.js';
export { parseRetryAfter, retryDelayMs, DEFAULT_RETRY, type RetryOptions } from './retry.js';
export type * from './types.js';
export { eventTypes, operationQueryParameters, requestFields, userGroupFields } from './openapi.js';
export {
  followEvents,
  followRevocations,
  EmbedRevocationList,
  type FollowEventsOptions,
  type EmbedRevocationListOptions,
  type EmbedTokenClaims,
  type EmbedRevocation,
} from './events.js';
