// When and how long to wait before trying a call again.

export interface RetryOptions {
  /** Attempts in all, the first included (default 3; 1 turns retries off). */
  maxAttempts?: number;
  /** The first backoff; doubled on every further attempt (default 250 ms). */
  baseDelayMs?: number;
  /** The longest wait: a Retry-After longer than this ends the retries at once (default 10 s). */
  maxDelayMs?: number;
}

export const DEFAULT_RETRY: Required<RetryOptions> = { maxAttempts: 3, baseDelayMs: 250, maxDelayMs: 10_000 };

/** Retry-After as milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The wait before attempt `attempt + 1` (attempt counts from 1): the server's Retry-After
 * when it gave one, else exponential backoff with "equal jitter" (half fixed, half random),
 * so that many clients refused at once do not come back at once.
 */
export function retryDelayMs(attempt: number, retryAfterMs: number | undefined, options: Required<RetryOptions>, random = Math.random): number {
  if (retryAfterMs !== undefined) return retryAfterMs;
  const ceiling = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** (attempt - 1));
  return ceiling / 2 + random() * (ceiling / 2);
}
