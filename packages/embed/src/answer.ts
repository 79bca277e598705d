// Reading the backend's answer: the embed token, when it expires, and the server's time, so
// that the lifetime is measured on the server's clock and then counted on the browser's own.

/** What the customer's backend answers: the service's `POST /api/embed_token` answer, or a superset of it. */
export interface EmbedTokenAnswer {
  embed_token: string;
  /** The token's `exp`: an ISO 8601 date (as the service answers) or seconds since the epoch. */
  expires_at: string | number;
  [field: string]: unknown;
}

/** An embed token as the source holds it. */
export interface EmbedSession {
  token: string;
  /**
   * When the source counts the token expired, in milliseconds on the source's `now()` clock:
   * the moment it asked plus the lifetime the server gave, less a second for the whole
   * seconds of `Date` and `expires_at`. A browser clock minutes off moves both ends alike.
   */
  expiresAt: number;
  /** The lifetime the server gave, in milliseconds, as measured (`expires_at` less the server's time). */
  lifetimeMs: number;
  /** `expires_at`, in milliseconds since the epoch, on the server's clock. */
  serverExpiresAt: number;
  /**
   * Which clock measured the lifetime: the answer's `Date` header, the token's `iat` (when the
   * header is not readable, e.g. a cross-origin answer without `Access-Control-Expose-Headers:
   * Date`), or, neither being readable, the browser's own.
   */
  clock: 'date' | 'iat' | 'local';
  /** The whole answer (the fields beside the token, such as `embed_id`, are the backend's). */
  answer: EmbedTokenAnswer;
}

/** The whole seconds of `Date` and `expires_at` may make a lifetime look up to this much longer. */
const ROUNDING_MS = 1000;

export function parseExpiresAt(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value * 1000;
  if (typeof value === 'string') {
    const at = Date.parse(value);
    if (!Number.isNaN(at)) return at;
  }
  return undefined;
}

/** The `iat` claim of a compact JWS, in milliseconds; undefined when the token is not one. */
export function issuedAt(token: string): number | undefined {
  const payload = token.split('.')[1];
  if (!payload) return undefined;
  try {
    const base64 = payload.replace(/-/g, '+').replace(/_/g, '/');
    const claims: unknown = JSON.parse(atob(base64 + '='.repeat((4 - (base64.length % 4)) % 4)));
    const iat = (claims as { iat?: unknown }).iat;
    return typeof iat === 'number' && Number.isFinite(iat) ? iat * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/** Retry-After as milliseconds: delta-seconds, or an HTTP date counted from the server's time. */
export function parseRetryAfter(value: string | null, serverNow: number): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - serverNow);
}

export function isEmbedTokenAnswer(value: unknown): value is EmbedTokenAnswer {
  if (typeof value !== 'object' || value === null) return false;
  const answer = value as Record<string, unknown>;
  return typeof answer.embed_token === 'string' && answer.embed_token !== '' && parseExpiresAt(answer.expires_at) !== undefined;
}

/**
 * The session an answer gives. `askedAt` is the source's clock when it sent the request:
 * the server's time lies between asking and receiving, so counting from the asking never
 * overestimates what is left. `serverDate` is the answer's `Date` header, if readable.
 */
export function sessionFromAnswer(answer: EmbedTokenAnswer, askedAt: number, serverDate: number | undefined, localNow: number): EmbedSession {
  const serverExpiresAt = parseExpiresAt(answer.expires_at) as number;
  const iat = serverDate === undefined ? issuedAt(answer.embed_token) : undefined;
  if (serverDate !== undefined || iat !== undefined) {
    const lifetimeMs = serverExpiresAt - (serverDate ?? (iat as number));
    return {
      token: answer.embed_token,
      expiresAt: askedAt + lifetimeMs - ROUNDING_MS,
      lifetimeMs,
      serverExpiresAt,
      clock: serverDate !== undefined ? 'date' : 'iat',
      answer,
    };
  }
  return {
    token: answer.embed_token,
    expiresAt: serverExpiresAt - ROUNDING_MS,
    lifetimeMs: serverExpiresAt - localNow,
    serverExpiresAt,
    clock: 'local',
    answer,
  };
}
