// Following the service's change events as they happen (GET /api/events/stream, Server-Sent
// Events), and what an offline verifier of embed tokens makes of them: a revocation list of
// deleted groups and rotated token generations. Needs only the global fetch with streamed
// bodies (Node 18+, browsers, Deno, Bun).
import { UserGroupServiceClient } from './client.js';
import { UserGroupServiceError, type UserGroupServiceErrorCode } from './errors.js';
import type { ChangeEvent, EmbedViewer } from './types.js';

export interface FollowEventsOptions {
  /** Where the service runs, e.g. `https://ugs.internal.example.com`. */
  baseUrl: string;
  /** An API token with the `read` scope: the events of its account (and of its environment, when it is restricted to one). */
  apiToken: string;
  /** Only these event types (all when absent). */
  types?: readonly string[];
  /** Start after this event id; absent: with the next event the account gets. */
  after?: string;
  /** Stops following: the iteration ends. */
  signal?: AbortSignal;
  /** How long to wait before reconnecting after the stream ended or failed (default 1000 ms). */
  reconnectDelayMs?: number;
  /** Told of every failure that a reconnect follows (a dropped connection, a 503). */
  onDisconnect?: (err: unknown) => void;
  /** Told once the stream is open (again): from then on no event is missed. */
  onConnect?: () => void;
  fetch?: typeof fetch;
}

/** Answers that reconnecting cannot change: the iteration throws them. */
const FATAL_STATUSES = new Set([400, 401, 403, 404, 410]);

/**
 * The account's change events as they happen, in order, for ever (until `signal` aborts).
 * Reconnects after a dropped connection or a server's shutdown with `Last-Event-ID`, so that
 * no event is lost or repeated. Throws a UserGroupServiceError for an answer a retry cannot
 * change: `cursor_expired` (410: resynchronise, then follow again without `after`), a refused
 * token (401, 403), a malformed filter (400).
 */
export async function* followEvents(options: FollowEventsOptions): AsyncGenerator<ChangeEvent, void, undefined> {
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const base = options.baseUrl.replace(/\/+$/, '');
  const query = options.types?.length ? `?types=${encodeURIComponent(options.types.join(','))}` : '';
  let lastEventId = options.after;
  while (!options.signal?.aborted) {
    try {
      const headers: Record<string, string> = { accept: 'text/event-stream', authorization: `Token ${options.apiToken}` };
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      const response = await fetchImpl(`${base}/api/events/stream${query}`, { headers, signal: options.signal });
      if (response.status !== 200 || !response.body) {
        const error = await errorOf(response);
        if (FATAL_STATUSES.has(response.status)) throw error;
        throw Object.assign(error, { retry: true });
      }
      options.onConnect?.();
      for await (const frame of sseFrames(response.body)) {
        if (frame.event === 'shutdown' || frame.data === undefined) continue;
        const event = JSON.parse(frame.data) as ChangeEvent;
        if (frame.id !== undefined) lastEventId = frame.id;
        yield event;
      }
      options.onDisconnect?.(new Error('the stream ended'));
    } catch (err) {
      if (options.signal?.aborted) return;
      if (err instanceof UserGroupServiceError && !(err as { retry?: boolean }).retry) throw err;
      options.onDisconnect?.(err);
    }
    await sleep(options.reconnectDelayMs ?? 1000, options.signal);
  }
}

interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
}

/** The frames of an SSE body (comments, heartbeats included, are skipped). */
async function* sseFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const frame: SseFrame = {};
        for (const line of block.split('\n')) {
          if (line === '' || line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon === -1 ? line : line.slice(0, colon);
          const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'data') frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`;
          else if (field === 'id' || field === 'event') frame[field] = value;
        }
        if (frame.data !== undefined) yield frame;
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}

async function errorOf(response: Response): Promise<UserGroupServiceError> {
  const requestId = response.headers.get('x-request-id') ?? undefined;
  try {
    const body = (await response.json()) as { error?: { code?: string; message?: string } };
    if (body.error?.code) {
      return new UserGroupServiceError({
        code: body.error.code as UserGroupServiceErrorCode,
        message: body.error.message ?? body.error.code,
        status: response.status,
        requestId,
      });
    }
  } catch {
    // not the service's envelope
  }
  return new UserGroupServiceError({ code: 'invalid_response', message: `HTTP ${response.status} from the event stream`, status: response.status, requestId });
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** The claims of an embed token that its revocation depends on, and the viewer it may name. */
export interface EmbedTokenClaims {
  ugs_team_id?: unknown;
  ugs_generation?: unknown;
  /** The person viewing, when the token was issued with a `viewer` (docs/api.md, "The viewer"). */
  ugs_viewer?: EmbedViewer;
  [claim: string]: unknown;
}

export type EmbedRevocation = 'group_deleted' | 'token_rotated';

export interface EmbedRevocationListOptions extends Omit<FollowEventsOptions, 'types' | 'after'> {
  /** Told of a failure the list recovers from by itself (a reconnect, a resynchronisation). */
  onError?: (err: unknown) => void;
}

const REVOKING_TYPES = ['user_group.created', 'user_group.updated', 'user_group.token_rotated', 'user_group.deleted'];

/**
 * What an offline verifier of embed tokens cannot learn from a signature (docs/api.md, "What
 * an offline verifier can and cannot know"), learnt from the change events: which groups were
 * deleted, and each group's current token generation. An embed token ends, as the service
 * treats it, with its group's deletion or the next rotation of its group's token, grace
 * periods or not (those keep the group's old *token* working, never its embed tokens).
 *
 * It first reads every event the feed keeps (UGS_EVENT_RETENTION, longer than any embed token
 * lives), then follows the stream, reconnecting with Last-Event-ID; away so long that its
 * cursor expired, it reads the feed again. Use one list per account (its API token's). It
 * says nothing about whose a token is: check that `ugs_account` is yours first (docs/api.md,
 * "The subject"), since a token of another account is unknown here, so never revoked.
 */
export class EmbedRevocationList {
  /** Resolves once the feed has been read and the stream is open: from then on, `check` knows every revocation up to a moment ago. */
  readonly ready: Promise<void>;
  readonly #deleted = new Set<number>();
  /** team_id → the newest generation seen: embed tokens of older generations are refused. */
  readonly #generations = new Map<number, number>();
  readonly #abort = new AbortController();
  readonly #options: EmbedRevocationListOptions;
  #lastEventId: string | undefined;
  #markReady: () => void = () => undefined;

  constructor(options: EmbedRevocationListOptions) {
    this.#options = options;
    options.signal?.addEventListener('abort', () => this.close(), { once: true });
    this.ready = new Promise((resolve) => (this.#markReady = resolve));
    void this.#run();
  }

  /** Why the token must be refused, or null when nothing seen revokes it. */
  check(claims: EmbedTokenClaims): EmbedRevocation | null {
    const teamId = Number(claims.ugs_team_id);
    const generation = Number(claims.ugs_generation);
    if (!Number.isSafeInteger(teamId) || !Number.isSafeInteger(generation)) return 'token_rotated'; // not an embed token of this service
    if (this.#deleted.has(teamId)) return 'group_deleted';
    const current = this.#generations.get(teamId);
    return current !== undefined && generation < current ? 'token_rotated' : null;
  }

  isRevoked(claims: EmbedTokenClaims): boolean {
    return this.check(claims) !== null;
  }

  /** The id of the last event taken in. */
  get lastEventId(): string | undefined {
    return this.#lastEventId;
  }

  close(): void {
    this.#abort.abort();
  }

  #apply(event: ChangeEvent): void {
    const teamId = Number(event.data.team_id);
    const generation = Number(event.data.generation);
    if (!Number.isSafeInteger(teamId)) return;
    if (event.type === 'user_group.deleted') this.#deleted.add(teamId);
    if (Number.isSafeInteger(generation) && generation > (this.#generations.get(teamId) ?? -1)) this.#generations.set(teamId, generation);
  }

  async #catchUp(): Promise<void> {
    const client = new UserGroupServiceClient({ baseUrl: this.#options.baseUrl, apiToken: this.#options.apiToken, fetch: this.#options.fetch });
    let after: string | undefined;
    for (;;) {
      const page = await client.listEvents({ after, limit: 500, types: REVOKING_TYPES.join(',') }, { signal: this.#abort.signal });
      for (const event of page.events) this.#apply(event);
      this.#lastEventId = page.next_cursor;
      if (page.events.length < 500) return;
      after = page.next_cursor;
    }
  }

  async #run(): Promise<void> {
    const signal = this.#abort.signal;
    while (!signal.aborted) {
      try {
        await this.#catchUp();
        const events = followEvents({
          ...this.#options,
          types: REVOKING_TYPES,
          after: this.#lastEventId,
          signal,
          onConnect: () => this.#markReady(),
          onDisconnect: (err) => this.#options.onError?.(err),
        });
        for await (const event of events) {
          this.#apply(event);
          this.#lastEventId = String(event.id);
        }
      } catch (err) {
        if (signal.aborted) return;
        // cursor_expired: away longer than the retention; read the feed again. Anything else
        // (the service unreachable at start, a refused token): said, and tried again.
        this.#options.onError?.(err);
        await sleep(this.#options.reconnectDelayMs ?? 1000, signal);
      }
    }
  }
}

/** Starts an EmbedRevocationList: `const revoked = followRevocations({ baseUrl, apiToken }); await revoked.ready;`. */
export function followRevocations(options: EmbedRevocationListOptions): EmbedRevocationList {
  return new EmbedRevocationList(options);
}
