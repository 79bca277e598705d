// Delivers change events to webhook endpoints (docs/api.md, "Webhooks").
//
// Deliveries are rows: the sequencer's hook (makeDeliveries) adds one per event and matching
// endpoint in the transaction that numbers the events, so an acknowledged change has its
// deliveries as soon as it is in the feed, and they survive restarts and kill -9.
//
// An endpoint gets its deliveries one at a time, in the order of the feed (head of line): the
// next waits until the one before is delivered or given up. One instance works on an endpoint
// at a time: it takes the endpoint with a compare-and-swap lease (claimEndpoint), renewed
// while it works; a dead instance's lease runs out and another takes over. The outcomes of
// a batch of attempts are committed together. A delivery
// is retried, with the same webhook-id, after each wait of the retry schedule; then it is
// given up (failed) and the next one goes. An endpoint whose deliveries have been failing
// for 3 days is disabled.
import { AsyncResource } from 'node:async_hooks';
import { backgroundWork } from '../background-work.ts';
import crypto from 'node:crypto';
import type { Kysely } from 'kysely';
import type { DatabaseHandle } from '../db/database.ts';
import type { Database, EventRow, WebhookDeliveryRow, WebhookEndpointRow } from '../db/schema.ts';
import { inTransaction } from '../db/transaction.ts';
import type { Keyring } from '../crypto/keyring.ts';
import type { AccountSlugs } from '../accounts/accounts.repository.ts';
import type { EventSequencer } from '../events/sequencer.ts';
import { eventJson } from '../events/events.json.ts';
import { sendWebhook, type AttemptOutcome } from './webhook-sender.ts';
import { secretsThatSign, webhookIdOf } from './webhook-secrets.ts';
import { auditEndpoint } from './webhook-audit.ts';
import { NO_TOKEN_ACTOR } from '../audit/audit.repository.ts';
import {
  claimEndpoint,
  dueEndpoints,
  enabledEndpointsOf,
  endpointById,
  eventsOf,
  headDeliveries,
  insertDeliveries,
  markDue,
  markIdleIfEmpty,
  oldestPendingDelivery,
  pruneDeliveries,
  markDelivered,
  recordAttempts,
  releaseLease,
  renewLease,
  updateDelivery,
  updateEndpointHealth,
} from './webhooks.repository.ts';

/** A lease outlives one attempt (15 s at most) with room to spare, and is renewed every third of it. */
const LEASE_MS = 30_000;
/** Deliveries sent to one endpoint between two commits of their outcomes. */
const BATCH = 100;
/** Endpoints one instance delivers to at once. */
const MAX_CONCURRENT = 8;
/**
 * A wake-up waits this long for more: under a stream of single-event commits, each wake-up
 * would otherwise claim the endpoint, send one event and give it back (a dozen statements
 * for one delivery); 10 ms gathers several.
 */
const COALESCE_MS = 10;
/** How often to look for due deliveries (retries, other instances' events) without being woken. */
const POLL_MS = 1000;
/** An endpoint failing this long is disabled. */
export const DISABLE_AFTER_MS = 3 * 86_400_000;
const PRUNE_EVERY_MS = 60_000;

export type DeliveryOutcome = 'delivered' | 'retry' | 'failed';

export interface DispatcherOptions {
  now: () => Date;
  retryScheduleMs: readonly number[];
  allowPrivate: boolean;
  /** Finished deliveries are kept as long as events (UGS_EVENT_RETENTION). */
  retentionMs: number;
  onError: (err: unknown, what: string) => void;
  /** A pass worked: after failures, the log says that the outage is over (throttled-log.ts). */
  onSuccess?: () => void;
  /** Counts each attempt's outcome (metrics). */
  onOutcome?: (outcome: DeliveryOutcome) => void;
  /** The attempt timeout (15 s); shorter in tests. */
  timeoutMs?: number;
}

/**
 * The sequencer hook: one pending delivery per event and enabled endpoint of its account that
 * takes its type and environment; an endpoint with nothing pending becomes due now.
 */
export async function makeDeliveries(trx: Kysely<Database>, events: EventRow[], now: Date): Promise<void> {
  if (events.length === 0) return;
  const endpoints = await enabledEndpointsOf(trx, [...new Set(events.map((event) => Number(event.account_id)))]);
  if (endpoints.length === 0) return;
  const at = now.toISOString();
  const rows: Parameters<typeof insertDeliveries>[1] = [];
  const due = new Set<number>();
  for (const endpoint of endpoints) {
    const types: string[] | null = endpoint.types === null ? null : JSON.parse(endpoint.types);
    for (const event of events) {
      if (Number(event.account_id) !== Number(endpoint.account_id)) continue;
      if (types !== null && !types.includes(event.type)) continue;
      if (endpoint.environment !== null && event.environment !== endpoint.environment) continue;
      rows.push({
        endpoint_id: endpoint.id,
        account_id: endpoint.account_id,
        event_seq: event.seq,
        event_type: event.type,
        status: 'pending',
        next_attempt_at: at,
        created_at: at,
      });
      due.add(Number(endpoint.id));
    }
  }
  if (rows.length === 0) return;
  await insertDeliveries(trx, rows);
  await markDue(trx, [...due], at);
}

export class WebhookDispatcher {
  /** This instance, in the lease columns. */
  readonly owner = `${process.pid}-${crypto.randomBytes(6).toString('hex')}`;
  private readonly active = new Map<number, Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  /** Wakes the dispatcher when a retry sooner than the next poll is due. */
  private retryTimer: NodeJS.Timeout | undefined;
  private stopped = true;
  /** Looks for due deliveries every POLL_MS; off in all workers of an instance but one (cluster/). */
  private polling = true;
  private running: Promise<void> | undefined;
  /** When the next pass is due (Infinity: none is scheduled, or it is running). */
  private dueAt = Infinity;
  private again = false;
  private lastPrune = 0;
  private unsubscribe: (() => void) | undefined;
  /**
   * The dispatcher's own async context: start() runs in the request that made the app ready,
   * and work it started there would otherwise belong to that request (its trace, its request id).
   */
  private readonly scope = new AsyncResource('WebhookDispatcher');
  /** Aborted by stop(): attempts in flight end at once instead of waiting for their receiver. */
  private shutdown = new AbortController();

  constructor(
    private readonly handle: DatabaseHandle,
    private readonly keyring: Keyring,
    private readonly accountSlugs: AccountSlugs,
    private readonly options: DispatcherOptions,
  ) {}

  /** Registers the hook that makes deliveries, and wakes on new events. */
  attach(sequencer: EventSequencer): void {
    sequencer.addHook(makeDeliveries);
    this.unsubscribe = sequencer.onNewEvents(() => this.kick());
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.shutdown = new AbortController();
    this.lastPrune = Date.now() - PRUNE_EVERY_MS + 5000;
    this.schedule(0);
  }

  /** Stops taking endpoints, cuts the attempts in flight short (they stay pending), and hands the endpoints back. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.shutdown.abort();
    this.unsubscribe?.();
    clearTimeout(this.timer);
    clearTimeout(this.retryTimer);
    await this.running;
    await Promise.allSettled(this.active.values());
  }

  /** Whether to look for due deliveries every POLL_MS (the default), or only when woken by new events and retries. */
  setPolling(polling: boolean): void {
    const started = polling && !this.polling;
    this.polling = polling;
    if (started) this.kick();
  }

  kick(): void {
    if (this.stopped) return;
    if (this.running) this.again = true;
    // A pass due sooner is not pushed back: under a stream of wake-ups it would never come.
    else if (this.dueAt > Date.now() + COALESCE_MS) this.schedule(COALESCE_MS);
  }

  /** The age in seconds of the oldest delivery still waiting (0 when none waits): a metric. */
  async oldestPendingAgeSeconds(): Promise<number> {
    const oldest = await oldestPendingDelivery(this.handle.db);
    return oldest === null ? 0 : Math.max(0, (this.options.now().getTime() - Date.parse(oldest)) / 1000);
  }

  private schedule(delayMs: number): void {
    this.scope.runInAsyncScope(() => backgroundWork.run('webhook dispatcher', () => this.setTimer(delayMs)));
  }

  private setTimer(delayMs: number): void {
    clearTimeout(this.timer);
    this.dueAt = Date.now() + delayMs;
    this.timer = setTimeout(() => {
      this.dueAt = Infinity;
      this.running = this.pass()
        .then(
          () => this.options.onSuccess?.(),
          (err) => this.options.onError(err, 'dispatching webhooks'),
        )
        .finally(() => {
          this.running = undefined;
          if (this.stopped) return;
          const delay = this.again ? COALESCE_MS : this.polling ? POLL_MS : undefined;
          this.again = false;
          if (delay !== undefined) this.schedule(delay);
        });
    }, delayMs);
    this.timer.unref();
  }

  /** Takes the due endpoints it has room for and starts delivering to each. */
  private async pass(): Promise<void> {
    const room = MAX_CONCURRENT - this.active.size;
    if (room > 0) {
      const now = this.options.now();
      const candidates = await dueEndpoints(this.handle.db, now.toISOString(), room + this.active.size);
      for (const { id } of candidates) {
        const endpointId = Number(id);
        if (this.stopped || this.active.size >= MAX_CONCURRENT) break;
        if (this.active.has(endpointId)) continue;
        if (!(await claimEndpoint(this.handle.db, endpointId, this.owner, now.toISOString(), this.leaseUntil()))) continue;
        const work = this.deliverTo(endpointId)
          .catch((err) => this.options.onError(err, `delivering to webhook endpoint ${endpointId}`))
          .finally(() => {
            this.active.delete(endpointId);
            this.kick();
          });
        this.active.set(endpointId, work);
      }
    }
    if (Date.now() - this.lastPrune >= PRUNE_EVERY_MS) {
      this.lastPrune = Date.now();
      await this.prune();
    }
  }

  private leaseUntil(): string {
    return new Date(this.options.now().getTime() + LEASE_MS).toISOString();
  }

  /** Delivers an endpoint's due deliveries in order while holding its lease; hands it back when none is due. */
  private async deliverTo(endpointId: number): Promise<void> {
    let nextAttemptAt: string | undefined;
    try {
      for (;;) {
        if (this.stopped) return;
        const pending = await headDeliveries(this.handle.db, endpointId, BATCH);
        if (pending.length === 0) {
          if (await inTransaction(this.handle, (trx) => markIdleIfEmpty(trx, endpointId))) return;
          continue;
        }
        const now = this.options.now().toISOString();
        if (pending[0].next_attempt_at > now) {
          nextAttemptAt = pending[0].next_attempt_at;
          return;
        }
        // Behind a head that is due, the others are new (a retry waits only at the head).
        const due = pending.filter((delivery) => delivery.next_attempt_at <= now);
        if (!(await renewLease(this.handle.db, endpointId, this.owner, this.leaseUntil()))) return; // deleted, or taken over
        const endpoint = await endpointById(this.handle.db, endpointId);
        if (!endpoint || endpoint.disabled_at !== null) return;
        const retryAt = await this.deliverBatch(endpoint, due);
        if (retryAt !== undefined) {
          nextAttemptAt = retryAt;
          return;
        }
      }
    } finally {
      await releaseLease(this.handle.db, endpointId, this.owner, nextAttemptAt);
      if (nextAttemptAt !== undefined) this.wakeAt(nextAttemptAt);
    }
  }

  private wakeAt(at: string): void {
    const delay = Date.parse(at) - this.options.now().getTime();
    if (delay >= POLL_MS || this.stopped) return;
    clearTimeout(this.retryTimer);
    this.retryTimer = this.scope.runInAsyncScope(() => backgroundWork.run('webhook dispatcher', () => setTimeout(() => this.kick(), Math.max(0, delay) + 5)));
    this.retryTimer.unref();
  }

  /**
   * Sends deliveries one after the other, in order, until one fails (head of line), then
   * records every attempt in one transaction: one commit per batch instead of per delivery. A
   * crash before that commit sends the batch again (at least once, same webhook-ids). When the
   * last one is to be retried, returns when.
   */
  private async deliverBatch(endpoint: WebhookEndpointRow, deliveries: WebhookDeliveryRow[]): Promise<string | undefined> {
    const accountId = Number(endpoint.account_id);
    const events = await eventsOf(
      this.handle.db,
      accountId,
      deliveries.map((delivery) => Number(delivery.event_seq)),
    );
    const account = await this.accountSlugs.get(accountId);
    const sent: { delivery: WebhookDeliveryRow; outcome: AttemptOutcome; started: Date; missing: boolean }[] = [];
    let renewed = Date.now();
    for (const delivery of deliveries) {
      if (this.stopped) break;
      if (Date.now() - renewed > LEASE_MS / 3) {
        if (!(await renewLease(this.handle.db, Number(endpoint.id), this.owner, this.leaseUntil()))) break;
        renewed = Date.now();
      }
      const event = events.get(Number(delivery.event_seq));
      const started = this.options.now();
      const outcome: AttemptOutcome = event
        ? await sendWebhook(
            {
              url: endpoint.url,
              id: webhookIdOf(accountId, Number(delivery.event_seq)),
              body: JSON.stringify(eventJson(event, account)),
              secrets: secretsThatSign(this.keyring, endpoint, started),
              now: started,
            },
            { allowPrivate: this.options.allowPrivate, timeoutMs: this.options.timeoutMs, signal: this.shutdown.signal },
          )
        : { ok: false, statusCode: null, durationMs: 0, error: 'the event is no longer kept (UGS_EVENT_RETENTION)' };
      if (outcome.aborted) break; // not an attempt: nothing recorded, the delivery goes again
      sent.push({ delivery, outcome, started, missing: !event });
      if (!outcome.ok) break;
    }
    return this.record(endpoint, sent);
  }

  /** Records a batch's attempts, in one transaction; when its last delivery is to be retried, returns when. */
  private async record(
    endpoint: WebhookEndpointRow,
    sent: { delivery: WebhookDeliveryRow; outcome: AttemptOutcome; started: Date; missing: boolean }[],
  ): Promise<string | undefined> {
    if (sent.length === 0) return undefined;
    const now = this.options.now();
    const at = now.toISOString();
    const schedule = this.options.retryScheduleMs;
    const last = sent[sent.length - 1];
    const attempts = Number(last.delivery.attempts) + 1;
    const giveUp = !last.outcome.ok && (last.missing || attempts > schedule.length);
    const retryAt = last.outcome.ok || giveUp ? undefined : new Date(now.getTime() + schedule[attempts - 1]).toISOString();
    await inTransaction(this.handle, async (trx) => {
      await recordAttempts(
        trx,
        sent.map(({ delivery, outcome, started }) => ({
          delivery_id: delivery.id,
          account_id: Number(endpoint.account_id),
          attempted_at: started.toISOString(),
          status_code: outcome.statusCode,
          duration_ms: outcome.durationMs,
          error: outcome.error,
        })),
      );
      await markDelivered(
        trx,
        sent.filter(({ outcome }) => outcome.ok).map(({ delivery }) => Number(delivery.id)),
        at,
      );
      // Only the last can have failed: a batch stops at its first failure.
      if (!last.outcome.ok) {
        await updateDelivery(trx, last.delivery.id, giveUp ? { status: 'failed', attempts, finished_at: at } : { attempts, next_attempt_at: retryAt! });
      }
      if (last.outcome.ok) {
        if (endpoint.failing_since !== null) await updateEndpointHealth(trx, endpoint.id, { failing_since: null });
        endpoint.failing_since = null;
        return;
      }
      const failingSince = endpoint.failing_since ?? last.started.toISOString();
      const disable = now.getTime() - Date.parse(failingSince) >= DISABLE_AFTER_MS;
      await updateEndpointHealth(trx, endpoint.id, { failing_since: failingSince, ...(disable ? { disabled_at: at, next_attempt_at: null } : {}) });
      endpoint.failing_since = failingSince;
      if (disable) {
        endpoint.disabled_at = at;
        await auditEndpoint(trx, endpoint, 'webhook_endpoint.disable', NO_TOKEN_ACTOR, now);
      }
    });
    for (const { outcome } of sent) this.options.onOutcome?.(outcome.ok ? 'delivered' : giveUp ? 'failed' : 'retry');
    if (endpoint.disabled_at !== null) return at; // released below; dueEndpoints skips it
    return retryAt;
  }

  private async prune(): Promise<void> {
    const cutoff = new Date(this.options.now().getTime() - this.options.retentionMs).toISOString();
    for (;;) {
      const removed = await inTransaction(this.handle, (trx) => pruneDeliveries(trx, cutoff, 1000));
      if (removed < 1000 || this.stopped) return;
    }
  }
}
