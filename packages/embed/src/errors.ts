/** Why the source could not get an embed token. */
export class EmbedTokenError extends Error {
  override readonly name = 'EmbedTokenError';
  /** The HTTP status of the backend's last answer; undefined when none came (network, timeout, a function that threw). */
  readonly status: number | undefined;
  /** Whether asking again may help (a 429, a 5xx, a network error); a 401 of your backend will not. */
  readonly retryable: boolean;
  /** The backend's Retry-After, in milliseconds, when it sent one. */
  readonly retryAfterMs: number | undefined;
  /** Requests made for this renewal, the failed ones included. */
  attempts: number;

  constructor(message: string, options: { status?: number; retryable: boolean; retryAfterMs?: number; attempts?: number; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status;
    this.retryable = options.retryable;
    this.retryAfterMs = options.retryAfterMs;
    this.attempts = options.attempts ?? 1;
  }
}

/** Statuses of the backend worth asking again after: it is busy, restarting or behind a proxy that is. */
export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([408, 425, 429, 500, 502, 503, 504]);
