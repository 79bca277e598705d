export type { EmbedSession, EmbedTokenAnswer } from './answer.js';
export { EmbedTokenError } from './errors.js';
export {
  EmbedTokenSource,
  embedFetch,
  type EmbedFetchOptions,
  type EmbedTokenRequest,
  type EmbedTokenRetry,
  type EmbedTokenSourceOptions,
  type EmbedTokenStats,
} from './token-source.js';
