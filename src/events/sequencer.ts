// Moves committed events from the outbox into the feed, numbering each account's events in
// the order they are moved (docs/api.md, "Change events"; how ids are chosen: event-ids.ts),
// and tells this instance's readers (the stream, the webhook dispatcher) when an account has
// new events. Where it sits on the path from a change to its webhook: docs/architecture.md,
// "The path of a change".
//
// One sequencer runs at a time across every instance: on PostgreSQL a transaction-level
// advisory lock (tried, never waited for: an instance that finds it taken runs again
// shortly); on SQLite the write lock. Because an account's numbers are handed out only
// there, and only for rows already committed, a reader that has read up to seq n never later
// finds a new event below n. Rows committed out of order (a transaction that inserted
// earlier but committed later) are simply numbered later.
//
// When it runs: right after a write of this instance commits (DatabaseHandle.onCommit), and
// every pollMs for what other instances wrote. Other instances' readers learn of new events
// by watching the newest event id (one indexed read per pollMs): it works through PgBouncer's
// transaction pooling, where LISTEN cannot.
//
// With several workers (process/cluster/), only one of them watches and polls (setWatching): the
// others sequence right after their own commits, and learn of new events from the workers
// that numbered them or watched them come (onEventsFound, expectEvents).
import { BackgroundLoop } from '../foundations/background-loop.ts';
import type { Kysely } from 'kysely';
import { sql } from '../db/kysely.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { Database, EventRow } from '../db/schema.ts';
import { inTransaction } from '../db/transaction.ts';
import { givingTurns } from '../db/between-statements.ts';
import { nextEventId } from './event-ids.ts';
import { committedOutbox, deleteOutboxRows, insertEvents, lastSeqs, newestEventId, outboxIsEmpty, pruneEvents, setLastSeq } from './events.repository.ts';

const SEQUENCER_LOCK_KEY = 726_415_006; // arbitrary, fixed: "ugs event sequencer"
/** Outbox rows moved per transaction: few commits for a bulk upsert's events. */
const BATCH = 1000;
/**
 * Of them, one account's at most: when one account's bulk work has filled the outbox, every
 * other account's events still go in the next transaction instead of waiting behind them all.
 */
const BATCH_PER_ACCOUNT = 500;
/** How soon to try again when another instance is sequencing. */
const BUSY_RETRY_MS = 10;
/** How often retention removes old events: every minute, or more often under a shorter retention. */
const PRUNE_EVERY_MS = 60_000;

/**
 * Runs inside the sequencer's transaction with the events it numbered (the webhook endpoints
 * they are for are marked due here). An event is known by (account_id, seq); its `id` there is
 * the outbox row's.
 */
export type SequencedHook = (trx: Kysely<Database>, events: EventRow[], now: Date) => Promise<void>;

/** Which accounts have new events; null: any may (another instance sequenced them). */
export type NewEventsListener = (accounts: ReadonlySet<number> | null) => void;

/**
 * Events this sequencer numbered itself (for which accounts, and how many), or, with null and
 * 0, events of other instances that its watch found.
 */
export type EventsFoundListener = (accounts: ReadonlySet<number> | null, count: number) => void;

export interface SequencerOptions {
  now: () => Date;
  /** Events are kept this long (UGS_EVENT_RETENTION). */
  retentionMs: number;
  /** How often to look for other instances' events. */
  pollMs: number;
  onError: (err: unknown, what: string) => void;
  /** A pass worked: after failures, the log says that the outage is over (throttled-log.ts). */
  onSuccess?: () => void;
}

export class EventSequencer {
  private readonly listeners = new Set<NewEventsListener>();
  private readonly foundListeners = new Set<EventsFoundListener>();
  /** Polls for other instances' events (and prunes); off in all workers of an instance but one. */
  private watching = true;
  /** Events other workers of this instance numbered since the last watch: no news to it. */
  private expected = 0;
  private readonly hooks: SequencedHook[] = [];
  /** Runs a pass after each kick, and every pollMs while watching. */
  private readonly loop: BackgroundLoop;
  /** The last pass found another instance sequencing: the next comes soon. */
  private busy = false;
  private newestSeen = 0;
  private lastPrune = 0;
  private readonly onCommit = () => this.kick();

  constructor(
    private readonly handle: DatabaseHandle,
    private readonly options: SequencerOptions,
  ) {
    this.loop = new BackgroundLoop({
      name: 'event sequencer',
      what: 'sequencing events',
      pass: () => this.pass(),
      next: () => {
        const delay = this.busy ? BUSY_RETRY_MS : this.watching ? this.options.pollMs : undefined;
        this.busy = false;
        return delay;
      },
      onError: options.onError,
      onSuccess: options.onSuccess,
    });
  }

  private get stopped(): boolean {
    return this.loop.stopped;
  }

  private get pruneEveryMs(): number {
    return Math.min(PRUNE_EVERY_MS, Math.max(this.options.retentionMs / 2, this.options.pollMs));
  }

  addHook(hook: SequencedHook): void {
    this.hooks.push(hook);
  }

  onNewEvents(listener: NewEventsListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Called when this sequencer numbered events (after their transaction committed), or its watch found others' (null). */
  onEventsFound(listener: EventsFoundListener): void {
    this.foundListeners.add(listener);
  }

  /**
   * Whether this sequencer also runs every pollMs, watching for other instances' events and
   * pruning (the default). One that does not runs only when kicked: after a commit of this process.
   */
  setWatching(watching: boolean): void {
    const started = watching && !this.watching;
    this.watching = watching;
    if (started) this.kick();
  }

  /** Another worker of this instance numbered `count` events: the watch need not wake anyone for them. */
  expectEvents(count: number): void {
    if (this.watching) this.expected += count;
  }

  start(): void {
    if (!this.loop.stopped) return;
    this.lastPrune = Date.now() - this.pruneEveryMs + Math.min(1000, this.pruneEveryMs); // a first pass soon after start
    this.handle.onCommit.add(this.onCommit);
    this.loop.start(0);
  }

  async stop(): Promise<void> {
    this.handle.onCommit.delete(this.onCommit);
    await this.loop.stop();
  }

  /** Sequence soon: a write committed. */
  kick(): void {
    this.loop.wake();
  }

  /** One pass now (tests, and `ugs events` on a stopped service). */
  async runOnce(): Promise<void> {
    await this.loop.idle();
    await this.pass();
  }

  private async pass(): Promise<void> {
    let ownCount = 0;
    for (;;) {
      const outcome = await this.sequenceBatch();
      if (outcome === 'busy') {
        this.busy = true; // another instance holds the lock: try again shortly
        break;
      }
      if (outcome.accounts.size === 0) break;
      // Ids this instance gave out itself are no news to the watch below.
      ownCount += outcome.count;
      this.notify(outcome.accounts);
      this.tellFound(outcome.accounts, outcome.count);
      if (this.stopped) break;
      // A turn of the event loop between two batches: on SQLite a batch never waits for I/O,
      // and a long backlog moved batch after batch held up every request of this process.
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (!this.watching) return;
    await this.watchOtherInstances(ownCount);
    if (Date.now() - this.lastPrune >= this.pruneEveryMs) {
      this.lastPrune = Date.now();
      await this.prune();
    }
  }

  /** Moves one batch: the accounts that got events and how many, or 'busy' when another instance is sequencing. */
  private async sequenceBatch(): Promise<{ accounts: Set<number>; count: number } | 'busy'> {
    if (await outboxIsEmpty(this.handle.db)) return { accounts: new Set(), count: 0 };
    return inTransaction(this.handle, async (transaction) => {
      // On SQLite, a turn of the event loop after each statement (db/between-statements.ts).
      const trx = givingTurns(transaction, this.handle.dialect);
      if (!(await this.lock(trx))) return 'busy';
      const outbox = await committedOutbox(trx, BATCH, BATCH_PER_ACCOUNT);
      if (outbox.length === 0) return { accounts: new Set<number>(), count: 0 };
      const accounts = [...new Set(outbox.map((row) => Number(row.account_id)))];
      const seqs = await lastSeqs(trx, accounts);
      const events: EventRow[] = outbox.map((row) => {
        const accountId = Number(row.account_id);
        const seq = nextEventId(seqs.get(accountId) ?? 0, row.occurred_at);
        seqs.set(accountId, seq);
        return { ...row, account_id: accountId, seq };
      });
      const count = outbox.length;
      await insertEvents(
        trx,
        events.map(({ id: _id, ...event }) => event),
      );
      for (const accountId of accounts) await setLastSeq(trx, accountId, seqs.get(accountId)!);
      await deleteOutboxRows(
        trx,
        outbox.map((row) => Number(row.id)),
      );
      const now = this.options.now();
      for (const hook of this.hooks) await hook(trx, events, now);
      return { accounts: new Set(accounts), count };
    });
  }

  private async lock(trx: Kysely<Database>): Promise<boolean> {
    if (this.handle.dialect === 'sqlite') return true; // BEGIN IMMEDIATE took the write lock
    const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_xact_lock(${SEQUENCER_LOCK_KEY}) as locked`.execute(trx);
    return rows[0]?.locked === true;
  }

  /**
   * New events that another instance sequenced wake this instance's readers: the newest id
   * moved further than by the events this instance inserted itself in this pass (a gap in
   * the ids wakes them for nothing, never the other way round).
   */
  private async watchOtherInstances(ownCount: number): Promise<void> {
    const newest = await newestEventId(this.handle.db);
    // A notice that comes after the read that saw its events makes the next watch miss as many
    // of another instance's: the streams' own reads every second still find them.
    const others = newest - this.newestSeen > ownCount + this.expected;
    this.expected = 0;
    this.newestSeen = Math.max(this.newestSeen, newest);
    if (others) {
      this.notify(null);
      this.tellFound(null, 0);
    }
  }

  private tellFound(accounts: ReadonlySet<number> | null, count: number): void {
    for (const listener of this.foundListeners) {
      try {
        listener(accounts, count);
      } catch (err) {
        this.options.onError(err, 'telling other workers of new events');
      }
    }
  }

  private notify(accounts: ReadonlySet<number> | null): void {
    for (const listener of this.listeners) {
      try {
        listener(accounts);
      } catch (err) {
        this.options.onError(err, 'waking event readers');
      }
    }
  }

  private async prune(): Promise<void> {
    const cutoff = new Date(this.options.now().getTime() - this.options.retentionMs).toISOString();
    for (;;) {
      const removed = await inTransaction(this.handle, async (trx) => ((await this.lock(trx)) ? pruneEvents(trx, cutoff, 1000) : 0));
      if (removed < 1000 || this.stopped) return;
    }
  }
}
