// The stream of change events (docs/api.md, "Change events", "The stream"): the same events,
// filters and rules as the feed, written as Server-Sent Events while the connection lasts
// (where the events come from: docs/architecture.md, "The path of a change").
//
// Each open stream keeps its own cursor (the seq of the last event it wrote) and reads the
// feed after it, always naming its account and its token's environment (eventsAfter): a
// wake-up only says "look now", it carries no rows, so one account's events never pass
// through another account's stream. It looks when the sequencer says its account (or any
// account, for other instances' events) has new events, and every SAFETY_READ_MS anyway.
//
// Backpressure: a stream reads the next events only while its reader wants more (Node
// calls _read() when the response has room again); a client that stops reading stops the
// reads, holds at most a page of events, and is disconnected once stalled for stallMs.
//
// Each open stream holds a lease (stream-leases.ts): a token and an account may have only so
// many streams open at once, on all instances together. And an account's streams read the
// feed at most READS_PER_ACCOUNT at a time on this instance (the others wait their turn): one
// account's many streams, woken at every batch of its events, held most of the database
// connections. The streams that read the same page share one read of it (SharedPages), and
// they read committed rows only (DatabaseHandle.committedReads: on SQLite a connection of
// their own, never the one every write of the process waits for).
import { Readable } from 'node:stream';
import type { ServerResponse } from 'node:http';
import type { DatabaseHandle } from '../db/database.ts';
import type { EventRow } from '../db/schema.ts';
import type { EventType } from '../outbox/outbox.ts';
import type { Principal } from '../auth/principal.ts';
import { eventJson } from './events.json.ts';
import { parseEventTypes, startingPoint } from './events.service.ts';
import { eventsAfter } from './events.repository.ts';
import type { NewEventsListener } from './sequencer.ts';
import { BoundedMap } from '../foundations/bounded-map.ts';
import { StreamLeases, type StreamLease, type StreamLimits } from './stream-leases.ts';

/** Events read per query: also the most a stalled stream holds beyond its buffer. */
const PAGE = 100;
/** Reads of the feed one account's streams make at once on this instance. */
const READS_PER_ACCOUNT = 2;
/** Every stream reads its feed this often even without a wake-up. */
const SAFETY_READ_MS = 1000;
/** How long a shutdown waits for streams to flush their last frame before it cuts them. */
const SHUTDOWN_FLUSH_MS = 1000;
/** What a reader (EventSource) waits before reconnecting after the stream ends. */
const RETRY_MS = 1000;

export interface EventStreamOptions {
  heartbeatMs: number;
  stallMs: number;
  onError: (err: unknown, what: string) => void;
  /** A stream read its feed: after failures, the log says that the outage is over (throttled-log.ts). */
  onSuccess?: () => void;
  /** A stream was closed because its client stopped reading. */
  onStalled: (accountId: number) => void;
  limits: StreamLimits;
}

export interface StreamRequest {
  /** The `after` query parameter. */
  after?: string;
  /** The Last-Event-ID header: wins over `after` (a reconnecting EventSource sends it with the first URL). */
  lastEventId?: string;
  types?: string;
}

/** One SSE event: `id`, `event` and the event object as `data` (one line: JSON has no raw newline). */
export function sseFrame(row: EventRow, accountSlug: string): string {
  return `id: ${Number(row.seq)}\nevent: ${row.type}\ndata: ${JSON.stringify(eventJson(row, accountSlug))}\n\n`;
}

/** Every open stream of this instance: wakes them, ticks them, and ends them on shutdown. */
export class EventStreams {
  private readonly streams = new Set<AccountEventStream>();
  private readonly readTurns = new ReadTurns(READS_PER_ACCOUNT);
  private readonly pages = new SharedPages();
  private readonly leases: StreamLeases;
  private readonly leaseOf = new WeakMap<AccountEventStream, StreamLease>();
  private readonly ticker: NodeJS.Timeout;
  private closing = false;

  constructor(
    private readonly database: DatabaseHandle,
    onNewEvents: (listener: NewEventsListener) => unknown,
    private readonly options: EventStreamOptions,
  ) {
    onNewEvents((accounts) => {
      for (const stream of this.streams) if (accounts === null || accounts.has(stream.accountId)) stream.wake();
    });
    this.ticker = setInterval(() => this.tick(), Math.min(SAFETY_READ_MS, options.heartbeatMs));
    this.ticker.unref();
    this.leases = new StreamLeases(database, options.limits, options);
    this.leases.start();
  }

  get size(): number {
    return this.streams.size;
  }

  /**
   * The rules first, while an error can still be an HTTP answer (the `read` scope is the
   * route's, checked before: auth/route-access.ts): known types, a cursor still kept (410
   * otherwise), then a free slot under the limits (429 too_many_streams otherwise). Without a
   * cursor the stream starts at the head: only events sequenced from now on.
   */
  async open(principal: Principal, accountSlug: string, input: StreamRequest, response: ServerResponse): Promise<Readable> {
    const types = parseEventTypes(input.types);
    const cursor = input.lastEventId ?? input.after;
    const start = await startingPoint(this.database, principal, cursor);
    const lease = this.closing ? undefined : await this.leases.acquire(principal);
    const stream = new AccountEventStream(this.database, {
      principal,
      accountSlug,
      types,
      afterSeq: cursor === undefined ? start.lastSeq : start.afterSeq,
      response,
      readTurns: this.readTurns,
      pages: this.pages,
      onError: this.options.onError,
      onSuccess: this.options.onSuccess,
    });
    if (this.closing || !lease) {
      if (lease) this.leases.release(lease);
      stream.finish();
      return stream;
    }
    this.streams.add(stream);
    this.leaseOf.set(stream, lease);
    stream.once('close', () => this.end(stream));
    // However the connection ends, the stream (and its lease) ends with it, even a connection
    // gone before the stream was handed to the response.
    if (response.destroyed) stream.destroy();
    else response.once('close', () => stream.destroy());
    stream.wake();
    return stream;
  }

  private end(stream: AccountEventStream): void {
    this.streams.delete(stream);
    const lease = this.leaseOf.get(stream);
    if (lease) this.leases.release(lease);
  }

  private tick(): void {
    const now = Date.now();
    for (const stream of this.streams) stream.tick(now, this.options);
  }

  /**
   * Shutdown (preClose, before the server waits for its connections): every stream gets
   * `event: shutdown` and ends, its connection closes once that is written; one that cannot
   * flush it within SHUTDOWN_FLUSH_MS (a stalled client) is cut.
   */
  async closeAll(): Promise<void> {
    this.closing = true;
    clearInterval(this.ticker);
    const open = [...this.streams];
    const finished = open.map((stream) => stream.finish());
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, SHUTDOWN_FLUSH_MS);
      timer.unref();
    });
    await Promise.race([Promise.all(finished), late]);
    clearTimeout(timer);
    for (const stream of open) {
      stream.cut();
      this.end(stream);
    }
    await this.leases.stop();
  }
}

/** Each account's reads of the feed on this instance, a few at a time, the others waiting in line. */
class ReadTurns {
  private readonly running = new Map<number, number>();
  private readonly waiting = new Map<number, (() => void)[]>();

  constructor(private readonly perAccount: number) {}

  async run<T>(accountId: number, read: () => Promise<T>): Promise<T> {
    if ((this.running.get(accountId) ?? 0) >= this.perAccount) {
      await new Promise<void>((resolve) => {
        const line = this.waiting.get(accountId);
        if (line) line.push(resolve);
        else this.waiting.set(accountId, [resolve]);
      });
    }
    this.running.set(accountId, (this.running.get(accountId) ?? 0) + 1);
    try {
      return await read();
    } finally {
      const left = this.running.get(accountId)! - 1;
      if (left === 0) this.running.delete(accountId);
      else this.running.set(accountId, left);
      const line = this.waiting.get(accountId);
      const next = line?.shift();
      if (line?.length === 0) this.waiting.delete(accountId);
      next?.();
    }
  }
}

/** A page of the feed as a stream writes it: its frames, and the seq of its last event. */
interface Page {
  /** The page's events as SSE frames, one string. */
  text: string;
  count: number;
  lastSeq: number;
}

/** Full pages kept for the streams that read the same stretch of the feed after the first. */
const SHARED_PAGES = 64;

/**
 * Pages of the feed read once for every stream of this instance that reads the same one (same
 * account, environment, types and cursor). One account's streams all read its events, a page
 * at a time, and each read and wrote out every page for itself: under that account's bulk work,
 * its streams' reads and frames took a large share of a SQLite process's time while another
 * account's requests waited (docs/performance.md, "Why the code is the way it is").
 * A page being read is shared by the streams that ask for it meanwhile; a full page is kept
 * (it never changes: an account's events are numbered in order, and one below a seq already
 * read never appears later; sequencer.ts), a page that is not full is not (the next event
 * may join it).
 */
class SharedPages {
  private readonly reading = new Map<string, Promise<Page>>();
  private readonly full = new BoundedMap<string, Page>(SHARED_PAGES);

  async read(key: string, read: () => Promise<Page>): Promise<Page> {
    const kept = this.full.get(key);
    if (kept) return kept;
    let pending = this.reading.get(key);
    if (!pending) {
      pending = read().finally(() => this.reading.delete(key));
      this.reading.set(key, pending);
      pending.then(
        (page) => {
          if (page.count === PAGE) this.full.set(key, page);
        },
        () => undefined,
      );
    }
    return pending;
  }
}

interface StreamState {
  principal: Principal;
  accountSlug: string;
  types: EventType[] | null;
  afterSeq: number;
  response: ServerResponse;
  readTurns: ReadTurns;
  pages: SharedPages;
  onError: (err: unknown, what: string) => void;
  onSuccess?: () => void;
}

class AccountEventStream extends Readable {
  readonly accountId: number;
  private cursor: number;
  /** The reader has room: Node called _read() and no push() since said "full". */
  private wanted = false;
  /** Events may be waiting: a wake-up, or a full page, since the last read. */
  private pending = true;
  private reading = false;
  private ended = false;
  private stalledSince: number | undefined;
  private lastWrite = Date.now();
  private lastRead = Date.now();

  constructor(
    private readonly database: DatabaseHandle,
    private readonly state: StreamState,
  ) {
    super({ highWaterMark: 64 * 1024 });
    this.accountId = state.principal.accountId;
    this.cursor = state.afterSeq;
    // Sent at once, so that the reader has the answer's headers without waiting for an event.
    this.write(`retry: ${RETRY_MS}\n: events of ${state.accountSlug} after ${this.cursor}\n\n`);
  }

  override _read(): void {
    this.wanted = true;
    this.stalledSince = undefined;
    if (this.pending) void this.readFeed();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.ended = true;
    callback(err);
  }

  wake(): void {
    this.pending = true;
    if (this.wanted) void this.readFeed();
  }

  tick(now: number, options: EventStreamOptions): void {
    if (this.ended) return;
    if (this.stalledSince !== undefined && now - this.stalledSince >= options.stallMs) {
      options.onStalled(this.accountId);
      this.cut();
      return;
    }
    if (now - this.lastRead >= SAFETY_READ_MS) this.wake();
    if (this.wanted && now - this.lastWrite >= options.heartbeatMs) this.write(': heartbeat\n\n');
  }

  /** Ends the stream with `event: shutdown`; resolves when the response has been written out (or its connection is gone). */
  finish(): Promise<void> {
    const { response } = this.state;
    const done = new Promise<void>((resolve) => {
      if (response.writableFinished || response.destroyed) return resolve();
      response.once('finish', () => resolve());
      response.once('close', () => resolve());
    });
    if (!this.ended) {
      this.ended = true;
      // No id: a reader's Last-Event-ID stays the last event's, and it resumes from there.
      this.push('event: shutdown\ndata: {"reason":"the server is shutting down: reconnect with Last-Event-ID"}\n\n');
      this.push(null);
    }
    return done;
  }

  /** Closes the connection at once. */
  cut(): void {
    this.ended = true;
    const socket = this.state.response.socket;
    if (this.state.response.writableFinished) socket?.end();
    else socket?.destroy();
    this.destroy();
  }

  private write(text: string): void {
    this.lastWrite = Date.now();
    if (!this.push(text)) this.becomeFull();
  }

  private becomeFull(): void {
    this.wanted = false;
    this.stalledSince ??= Date.now();
  }

  /** Reads and writes pages after the cursor while the reader has room; one read at a time. */
  private async readFeed(): Promise<void> {
    if (this.reading) return;
    this.reading = true;
    let read = false;
    try {
      while (this.pending && this.wanted && !this.ended) {
        this.pending = false;
        this.lastRead = Date.now();
        const page = await this.readPage();
        read = true;
        if (this.ended) return;
        if (page.count > 0) {
          this.cursor = page.lastSeq;
          this.write(page.text);
        }
        if (page.count === PAGE) {
          this.pending = true;
          // A turn of the event loop before the next page. On SQLite a read never waits for
          // I/O, and the streams handed the reads to each other in microtasks: streams catching
          // up on one account's bulk work held the event loop for seconds (docs/performance.md,
          // "Why the code is the way it is").
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
      if (read) this.state.onSuccess?.();
    } catch (err) {
      this.pending = true; // read again at the next tick
      this.state.onError(err, 'reading events for a stream');
    } finally {
      this.reading = false;
    }
  }

  /** The page after the cursor, shared with the instance's other streams that read the same one. */
  private readPage(): Promise<Page> {
    const { principal, accountSlug, types } = this.state;
    const environment = principal.allowedEnvironment;
    const afterSeq = this.cursor;
    const key = JSON.stringify([principal.accountId, accountSlug, environment, types, afterSeq]);
    return this.state.pages.read(key, async () => {
      const rows = await this.state.readTurns.run(this.accountId, () =>
        eventsAfter(this.database.committedReads, { accountId: principal.accountId, environment, afterSeq, limit: PAGE, types }),
      );
      return { text: rows.map((row) => sseFrame(row, accountSlug)).join(''), count: rows.length, lastSeq: Number(rows.at(-1)?.seq ?? afterSeq) };
    });
  }
}
