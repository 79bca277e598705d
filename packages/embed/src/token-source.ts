// The token source: one embed token at a time, renewed before it expires, one renewal shared
// by every caller, failures retried and never kept. How it counts time: docs/embedding.md, "Clocks".
import { type EmbedSession, type EmbedTokenAnswer, isEmbedTokenAnswer, parseRetryAfter, sessionFromAnswer } from './answer.js';
import { EmbedTokenError, RETRYABLE_STATUSES } from './errors.js';

/** A function that gets an embed token from your backend: a `Response` of it, or its JSON answer. */
export type EmbedTokenRequest = (init: { signal: AbortSignal }) => Promise<Response | EmbedTokenAnswer>;

export interface EmbedTokenSourceOptions {
  /** Your backend's URL that answers `{embed_token, expires_at, …}`, or a function that asks it. */
  backend: string | URL | EmbedTokenRequest;
  /** With a URL: the request's method, headers, credentials… (default a plain GET). */
  requestInit?: RequestInit;
  /** Renew when less than this is left (default a quarter of the token's lifetime, at most 5 minutes). */
  renewBeforeMs?: number;
  /** Never hand out a token with less than this left: wait for the renewal instead (default 5 s). */
  minValidityMs?: number;
  /** Renew on a timer, so the token is fresh before anyone asks (default true). */
  autoRenew?: boolean;
  /** Requests per renewal, the first included (default 5). */
  maxAttempts?: number;
  /** The first backoff, doubled at each further attempt, half of it random (default 500 ms). */
  baseDelayMs?: number;
  /** The longest wait between attempts: a Retry-After longer than this ends the renewal at once (default 30 s). */
  maxDelayMs?: number;
  /** One request's deadline (default 15 s). */
  attemptTimeoutMs?: number;
  /** A token to start with, e.g. one kept in sessionStorage from `source.current`. */
  initial?: EmbedSession;
  /** The clock, in milliseconds (default `Date.now`). Only differences of it are used, with the server's lifetimes. */
  now?: () => number;
  fetch?: typeof fetch;
  setTimeout?: (callback: () => void, ms: number) => unknown;
  clearTimeout?: (handle: unknown) => void;
  random?: () => number;
  /** Called after each renewal (also the `renew` event). */
  onRenew?: (session: EmbedSession) => void;
  /** Called before each retry (also the `retry` event). */
  onRetry?: (retry: EmbedTokenRetry) => void;
  /** Called when a renewal failed for good (also the `error` event); `getToken` rejects with the same error when no valid token is left. */
  onError?: (error: EmbedTokenError) => void;
}

export interface EmbedTokenRetry {
  /** The attempt that failed (from 1). */
  attempt: number;
  /** The wait before the next: the backend's Retry-After when it sent one, else backoff. */
  delayMs: number;
  error: EmbedTokenError;
}

export interface EmbedTokenStats {
  /** Tokens received. */
  renewals: number;
  /** Requests that failed and were tried again. */
  retries: number;
  /** Renewals that gave up. */
  failedRenewals: number;
}

const DEFAULTS = { minValidityMs: 5_000, maxAttempts: 5, baseDelayMs: 500, maxDelayMs: 30_000, attemptTimeoutMs: 15_000 };
const MAX_RENEW_BEFORE_MS = 5 * 60_000;

function isResponse(value: unknown): value is Response {
  return typeof value === 'object' && value !== null && 'headers' in value && 'status' in value && typeof (value as Response).json === 'function';
}

/**
 * Embed tokens from your backend for a page that outlives them. Events: `renew`
 * (`CustomEvent<EmbedSession>`), `retry` (`CustomEvent<EmbedTokenRetry>`), `error`
 * (`CustomEvent<EmbedTokenError>`: a renewal gave up).
 */
export class EmbedTokenSource extends EventTarget {
  readonly stats: EmbedTokenStats = { renewals: 0, retries: 0, failedRenewals: 0 };
  #session: EmbedSession | undefined;
  #inFlight: Promise<EmbedSession> | undefined;
  #timer: unknown;
  #closed = false;
  /** Renewals that gave up in a row, and when the next one behind a still valid token may start. */
  #failuresInRow = 0;
  #backgroundNotBefore = -Infinity;
  readonly #options: EmbedTokenSourceOptions;
  readonly #now: () => number;
  readonly #fetch: typeof fetch;
  readonly #setTimeout: (callback: () => void, ms: number) => unknown;
  readonly #clearTimeout: (handle: unknown) => void;
  readonly #random: () => number;
  readonly #minValidityMs: number;

  constructor(options: EmbedTokenSourceOptions) {
    super();
    this.#options = options;
    this.#now = options.now ?? (() => Date.now());
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#setTimeout = options.setTimeout ?? ((callback, ms) => setTimeout(callback, ms));
    this.#clearTimeout = options.clearTimeout ?? ((handle) => clearTimeout(handle as ReturnType<typeof setTimeout>));
    this.#random = options.random ?? Math.random;
    this.#minValidityMs = options.minValidityMs ?? DEFAULTS.minValidityMs;
    if (options.initial) {
      this.#session = options.initial;
      this.#schedule(options.initial);
    }
  }

  /** The token, valid for at least `minValidityMs`: pass `source.getToken` to Cube's client as it is. */
  readonly getToken = async (): Promise<string> => (await this.getSession()).token;

  /** The token with its expiry and the backend's whole answer. */
  async getSession(): Promise<EmbedSession> {
    const session = this.#session;
    if (session && !this.#closed) {
      if (!this.isExpiring(session)) return session;
      if (this.remainingMs(session) > this.#minValidityMs) {
        this.#renewInBackground();
        return session;
      }
    }
    return this.renew();
  }

  /** The token held now, fresh or not (undefined before the first); to keep it across a reload, store it. */
  get current(): EmbedSession | undefined {
    return this.#session;
  }

  /** What is left of a token, in milliseconds, by the source's estimate. */
  remainingMs(session: EmbedSession | undefined = this.#session): number {
    return session ? session.expiresAt - this.#now() : 0;
  }

  /** Whether a token is within its renewal window (or past it): what the source renews on its own. */
  isExpiring(session: EmbedSession): boolean {
    return this.remainingMs(session) <= this.#renewBeforeMs(session);
  }

  /**
   * A new token now, shared with every concurrent caller. With `refused` (a token a server
   * refused), a valid token other than that one is answered without asking the backend.
   */
  renew(refused?: string): Promise<EmbedSession> {
    if (this.#closed) return Promise.reject(new EmbedTokenError('the embed token source is closed', { retryable: false }));
    const held = this.#session;
    if (refused !== undefined && held && held.token !== refused && this.remainingMs(held) > this.#minValidityMs) return Promise.resolve(held);
    this.#inFlight ??= this.#renewWithRetries().finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  /**
   * `fetch` with `Authorization: <scheme> <token>`. A 401 or 403 answered for a token that had
   * expired, or was about to (by the source's estimate: another verifier's clock may run ahead),
   * renews it once and sends the request again; `renewAfterRefusal: 'always'` does so after any
   * 401 or 403 (for instance a token revoked by a rotation), `'never'` never.
   */
  fetch(input: RequestInfo | URL, init?: RequestInit, options: EmbedFetchOptions = {}): Promise<Response> {
    return embedFetch(this, options)(input, init);
  }

  /** Stops the timer; later calls reject. */
  close(): void {
    this.#closed = true;
    this.#clearTimeout(this.#timer);
  }

  #renewBeforeMs(session: EmbedSession): number {
    const before = this.#options.renewBeforeMs ?? Math.min(session.lifetimeMs / 4, MAX_RENEW_BEFORE_MS);
    return Math.max(before, this.#minValidityMs);
  }

  #renewInBackground(): void {
    // While the token in hand still works, a renewal that gave up is not started again at every
    // call (a dashboard asks many times a second): the next waits a backoff. A caller without a
    // usable token always asks at once: a failure is never kept as the answer.
    if (this.#inFlight === undefined && this.#now() < this.#backgroundNotBefore) return;
    // The failure reaches the page through the error event.
    this.renew().catch(() => {});
  }

  #schedule(session: EmbedSession): void {
    this.#clearTimeout(this.#timer);
    if (this.#options.autoRenew === false || this.#closed) return;
    const wait = Math.max(0, this.remainingMs(session) - this.#renewBeforeMs(session));
    this.#timer = this.#setTimeout(() => {
      if (!this.#closed) this.#renewInBackground();
    }, wait);
    // In Node, a timer of its own must not keep the process alive.
    (this.#timer as { unref?: () => void } | undefined)?.unref?.();
  }

  #emit<T>(type: 'renew' | 'retry' | 'error', detail: T): void {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  async #renewWithRetries(): Promise<EmbedSession> {
    const maxAttempts = this.#options.maxAttempts ?? DEFAULTS.maxAttempts;
    const baseDelayMs = this.#options.baseDelayMs ?? DEFAULTS.baseDelayMs;
    const maxDelayMs = this.#options.maxDelayMs ?? DEFAULTS.maxDelayMs;
    for (let attempt = 1; ; attempt++) {
      let error: EmbedTokenError;
      try {
        const session = await this.#requestOnce();
        if (this.#closed) throw new EmbedTokenError('the embed token source is closed', { retryable: false });
        this.#session = session;
        this.#failuresInRow = 0;
        this.#backgroundNotBefore = -Infinity;
        this.stats.renewals++;
        this.#schedule(session);
        this.#options.onRenew?.(session);
        this.#emit('renew', session);
        return session;
      } catch (err) {
        error = err instanceof EmbedTokenError ? err : new EmbedTokenError(`could not reach the backend: ${String(err)}`, { retryable: true, cause: err });
      }
      error.attempts = attempt;
      const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
      const delayMs = error.retryAfterMs ?? ceiling / 2 + this.#random() * (ceiling / 2);
      if (!error.retryable || attempt >= maxAttempts || delayMs > maxDelayMs || this.#closed) {
        this.stats.failedRenewals++;
        this.#failuresInRow++;
        this.#backgroundNotBefore = this.#now() + Math.min(maxDelayMs, baseDelayMs * 2 ** this.#failuresInRow);
        this.#options.onError?.(error);
        this.#emit('error', error);
        throw error;
      }
      this.stats.retries++;
      const retry: EmbedTokenRetry = { attempt, delayMs, error };
      this.#options.onRetry?.(retry);
      this.#emit('retry', retry);
      await new Promise<void>((resolve) => this.#setTimeout(resolve, delayMs));
    }
  }

  async #requestOnce(): Promise<EmbedSession> {
    const askedAt = this.#now();
    const controller = new AbortController();
    const timeoutMs = this.#options.attemptTimeoutMs ?? DEFAULTS.attemptTimeoutMs;
    const timer = this.#setTimeout(
      () => controller.abort(new EmbedTokenError(`the backend did not answer within ${timeoutMs} ms`, { retryable: true })),
      timeoutMs,
    );
    try {
      const { backend } = this.#options;
      const result =
        typeof backend === 'function'
          ? await backend({ signal: controller.signal })
          : await this.#fetch(backend, { ...this.#options.requestInit, signal: controller.signal });
      if (!isResponse(result)) {
        if (!isEmbedTokenAnswer(result)) throw new EmbedTokenError('the backend answered no embed_token and expires_at', { retryable: false });
        return this.#checked(sessionFromAnswer(result, askedAt, undefined, this.#now()));
      }
      const dateHeader = result.headers.get('date');
      const serverDate = dateHeader === null ? undefined : Date.parse(dateHeader);
      const serverNow = serverDate === undefined || Number.isNaN(serverDate) ? undefined : serverDate;
      if (!result.ok) {
        const retryAfterMs = parseRetryAfter(result.headers.get('retry-after'), serverNow ?? this.#now());
        await result.body?.cancel().catch(() => {});
        throw new EmbedTokenError(`the backend answered ${result.status}`, {
          status: result.status,
          retryable: RETRYABLE_STATUSES.has(result.status),
          retryAfterMs,
        });
      }
      let answer: unknown;
      try {
        answer = await result.json();
      } catch (err) {
        throw new EmbedTokenError('the backend answered something other than JSON', { status: result.status, retryable: false, cause: err });
      }
      if (!isEmbedTokenAnswer(answer))
        throw new EmbedTokenError('the backend answered no embed_token and expires_at', { status: result.status, retryable: false });
      return this.#checked(sessionFromAnswer(answer, askedAt, serverNow, this.#now()));
    } catch (err) {
      // An abort rejects with the signal's reason in browsers and Node alike.
      throw controller.signal.aborted && controller.signal.reason instanceof EmbedTokenError ? controller.signal.reason : err;
    } finally {
      this.#clearTimeout(timer);
    }
  }

  #checked(session: EmbedSession): EmbedSession {
    // A token that is already spent (a backend keeping tokens too long) would be renewed in a loop.
    if (session.lifetimeMs <= 2 * this.#minValidityMs) {
      throw new EmbedTokenError(`the backend's token has ${Math.round(session.lifetimeMs / 1000)} s left: too little to use`, { retryable: false });
    }
    return session;
  }
}

export interface EmbedFetchOptions {
  /** The Authorization scheme (default `Bearer`). */
  scheme?: string;
  /** When a 401 or 403 renews the token and sends the request again (default `'expired'`): see `EmbedTokenSource.fetch`. */
  renewAfterRefusal?: 'expired' | 'always' | 'never';
  /** The fetch to send with (default the global one). */
  fetch?: typeof fetch;
}

/** A fetch that sends the source's embed token: see `EmbedTokenSource.fetch`. */
export function embedFetch(source: EmbedTokenSource, options: EmbedFetchOptions = {}): (input: RequestInfo | URL, init?: RequestInit) => Promise<Response> {
  const scheme = options.scheme ?? 'Bearer';
  const policy = options.renewAfterRefusal ?? 'expired';
  const send = options.fetch ?? ((request: Request) => fetch(request));
  return async (input, init) => {
    const base = new Request(input, init);
    const attempt = (token: string): Promise<Response> => {
      const request = base.clone();
      request.headers.set('authorization', `${scheme} ${token}`);
      return send(request);
    };
    const session = await source.getSession();
    const response = await attempt(session.token);
    if (response.status !== 401 && response.status !== 403) return response;
    if (policy === 'never') return response;
    // "About to expire": within the renewal window, where the source renews anyway.
    if (policy === 'expired' && !source.isExpiring(session)) return response;
    const renewed = await source.renew(session.token);
    if (renewed.token === session.token) return response;
    await response.body?.cancel().catch(() => {});
    return attempt(renewed.token);
  };
}
