// Delivers change events to webhook endpoints (docs/api.md, "Webhooks"); the path of an
// event from its change to the attempt made here: docs/architecture.md, "The path of a change".
//
// Each endpoint follows the feed with a cursor (webhook-fan-out.ts): the sequencer's hook marks
// the endpoints that take a new event as due, and the instance that takes an endpoint makes its
// next deliveries from the feed, a batch at a time. A delivery is a row from then on, so it
// survives restarts and kill -9, and an acknowledged change is in the feed before anything else.
//
// An endpoint gets its deliveries one at a time, in the order of the feed (head of line): the
// next waits until the one before is delivered or given up. One instance works on an endpoint
// at a time: it takes the endpoint with a compare-and-swap lease (webhook-leases.ts), renewed
// while it works; a dead instance's lease runs out and another takes over. The outcomes of
// a batch of attempts are committed together. A delivery
// is retried, with the same webhook-id, after each wait of the retry schedule; then it is
// given up (failed) and the next one goes. An endpoint whose deliveries have been failing
// for 3 days is disabled.
//
// Fair between accounts (webhook-traffic.ts): an instance works on a bounded number of
// endpoints at once, and on a bounded number of one account's; the due endpoints it picks are
// the longest due, a few per account, leaving out the accounts it has as many of as it may.
// When endpoints wait for room, one that has sent a batch goes to the back of the line.
//
// Its reads outside a transaction (the due endpoints, an endpoint's pending deliveries, their
// events) read committed rows on DatabaseHandle.committedReads: on SQLite they do not wait for
// the connection every write of the process waits for, another account's bulk parts included.
import { BackgroundLoop } from '../foundations/background-loop.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { WebhookDeliveryRow, WebhookEndpointRow } from '../db/schema.ts';
import { inTransaction } from '../db/transaction.ts';
import type { Keyring } from '../crypto/keyring.ts';
import type { AccountSlugs } from '../accounts/accounts.repository.ts';
import type { EventSequencer } from '../events/sequencer.ts';
import { eventJson } from '../events/events.json.ts';
import { sendWebhook, type AttemptOutcome } from './webhook-sender.ts';
import { secretsThatSign, webhookIdOf } from './webhook-secrets.ts';
import { auditEndpoint } from './webhook-audit.ts';
import type { WebhookTraffic } from './webhook-traffic.ts';
import { SERVICE_ACTOR } from '../audit/audit.repository.ts';
import { BATCH, lastEventSeq, makeNextDeliveries, skippedFromDisabling, wakeEndpoints } from './webhook-fan-out.ts';
import { oldestWaitingEvent } from './webhook-fan-out.repository.ts';
import { EndpointLeases, LEASE_MS } from './webhook-leases.ts';
import {
  dueEndpoints,
  endpointById,
  eventsOf,
  headDeliveries,
  pruneDeliveries,
  markDelivered,
  recordAttempts,
  updateDelivery,
  updateEndpointHealth,
} from './webhooks.repository.ts';

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

export class WebhookDispatcher {
  private readonly leases: EndpointLeases;
  /** The endpoints this instance is working on, by id. */
  private readonly active = new Map<number, Promise<void>>();
  /** Runs a pass when woken (new events, a retry due, an endpoint handed back), and every POLL_MS while polling. */
  private readonly loop: BackgroundLoop;
  /** Looks for due deliveries every POLL_MS; off in all workers of an instance but one (process/cluster/). */
  private polling = true;
  private lastPrune = 0;
  private unsubscribe: (() => void) | undefined;
  /** Aborted by stop(): attempts in flight end at once instead of waiting for their receiver. */
  private shutdown = new AbortController();

  constructor(
    private readonly handle: DatabaseHandle,
    private readonly keyring: Keyring,
    private readonly accountSlugs: AccountSlugs,
    private readonly traffic: WebhookTraffic,
    private readonly options: DispatcherOptions,
  ) {
    this.leases = new EndpointLeases(handle, options.now);
    this.loop = new BackgroundLoop({
      name: 'webhook dispatcher',
      what: 'dispatching webhooks',
      pass: () => this.pass(),
      next: () => (this.polling ? POLL_MS : undefined),
      wakeMs: COALESCE_MS,
      onError: options.onError,
      onSuccess: options.onSuccess,
    });
  }

  private get stopped(): boolean {
    return this.loop.stopped;
  }

  /** Registers the hook that wakes the endpoints new events are for, and wakes on new events. */
  attach(sequencer: EventSequencer): void {
    sequencer.addHook(wakeEndpoints);
    this.unsubscribe = sequencer.onNewEvents(() => this.kick());
  }

  start(): void {
    if (!this.loop.stopped) return;
    this.shutdown = new AbortController();
    this.lastPrune = Date.now() - PRUNE_EVERY_MS + 5000;
    this.loop.start(0);
  }

  /** Stops taking endpoints, cuts the attempts in flight short (they stay pending), and hands the endpoints back. */
  async stop(): Promise<void> {
    const stopping = this.loop.stop();
    this.shutdown.abort();
    this.unsubscribe?.();
    await stopping;
    await Promise.allSettled(this.active.values());
    this.traffic.close();
  }

  /** Whether to look for due deliveries every POLL_MS (the default), or only when woken by new events and retries. */
  setPolling(polling: boolean): void {
    const started = polling && !this.polling;
    this.polling = polling;
    if (started) this.kick();
  }

  /** A pass soon (after COALESCE_MS, unless one is due sooner). */
  kick(): void {
    this.loop.wake();
  }

  /** The age in seconds of the oldest event still waiting for an enabled endpoint (0 when none waits): a metric. */
  async oldestPendingAgeSeconds(): Promise<number> {
    const oldest = await oldestWaitingEvent(this.handle.committedReads);
    return oldest === null ? 0 : Math.max(0, (this.options.now().getTime() - Date.parse(oldest)) / 1000);
  }

  /** Takes the due endpoints it has room for, fairly between accounts, and starts delivering to each. */
  private async pass(): Promise<void> {
    if (this.traffic.free > 0) {
      const now = this.options.now();
      const { perAccount, total } = this.traffic.limits;
      const candidates = await dueEndpoints(this.handle.committedReads, {
        now: now.toISOString(),
        perAccount,
        skipAccounts: this.traffic.accountsAtLimit(),
        limit: total,
        owner: this.leases.owner,
        working: [...this.active.keys()],
      });
      for (const { id: endpointId, account_id: accountId } of candidates) {
        if (this.stopped || this.traffic.free === 0) break;
        if (this.active.has(endpointId)) continue;
        const release = this.traffic.take(accountId);
        if (!release) continue; // the account has as many as it may: the others go first
        // A claim that fails (the database busy or unreachable) gives the place back: kept, it
        // would be one place fewer for the account on this instance until a restart, and none
        // left after as many failures as it has places.
        let claimed = false;
        try {
          claimed = await this.leases.claim(endpointId);
        } finally {
          if (!claimed) release();
        }
        if (!claimed) continue;
        const work = this.deliverTo(endpointId, accountId)
          .catch((err) => this.options.onError(err, `delivering to webhook endpoint ${endpointId}`))
          .finally(() => {
            release();
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

  /**
   * Delivers an endpoint's due deliveries in order while holding its lease, making the next
   * ones from the feed when none is left; hands it back when none is due.
   */
  private async deliverTo(endpointId: number, accountId: number): Promise<void> {
    let nextAttemptAt: string | undefined;
    let renewed = Date.now();
    try {
      for (;;) {
        if (this.stopped) return;
        const pending = await headDeliveries(this.handle.committedReads, endpointId, BATCH);
        if (pending.length === 0) {
          // Walking a long stretch of events it does not take: the lease must outlive it.
          if (Date.now() - renewed > LEASE_MS / 3) {
            if (!(await this.leases.renew(endpointId))) return;
            renewed = Date.now();
          }
          const made = await makeNextDeliveries(this.handle, endpointId, this.options.now());
          if (made === 'idle' || made === 'gone') return;
          continue;
        }
        const now = this.options.now().toISOString();
        if (pending[0].next_attempt_at > now) {
          nextAttemptAt = pending[0].next_attempt_at;
          return;
        }
        // Behind a head that is due, the others are new (a retry waits only at the head).
        const due = pending.filter((delivery) => delivery.next_attempt_at <= now);
        if (!(await this.leases.renew(endpointId))) return; // deleted, or taken over
        renewed = Date.now();
        const endpoint = await endpointById(this.handle.committedReads, endpointId);
        if (!endpoint || endpoint.disabled_at !== null) return;
        const retryAt = await this.deliverBatch(endpoint, due);
        if (retryAt !== undefined) {
          nextAttemptAt = retryAt;
          return;
        }
        // Others wait for room (the instance's, or this account's): to the back of the line, still due.
        if (this.traffic.free === 0 || this.traffic.accountsAtLimit().includes(accountId)) {
          nextAttemptAt = this.options.now().toISOString();
          return;
        }
      }
    } finally {
      // If this fails, the lease is this instance's alone, and it takes it back at once (dueEndpoints).
      await this.leases.release(endpointId, nextAttemptAt);
      if (nextAttemptAt !== undefined) this.wakeAt(nextAttemptAt);
    }
  }

  private wakeAt(at: string): void {
    const delay = Date.parse(at) - this.options.now().getTime();
    if (delay < POLL_MS) this.loop.wakeIn(Math.max(0, delay) + 5);
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
      this.handle.committedReads,
      accountId,
      deliveries.map((delivery) => Number(delivery.event_seq)),
    );
    const account = await this.accountSlugs.get(accountId);
    const sent: { delivery: WebhookDeliveryRow; outcome: AttemptOutcome; started: Date; missing: boolean }[] = [];
    let renewed = Date.now();
    for (const delivery of deliveries) {
      if (this.stopped) break;
      if (Date.now() - renewed > LEASE_MS / 3) {
        if (!(await this.leases.renew(Number(endpoint.id)))) break;
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
            {
              allowPrivate: this.options.allowPrivate,
              timeoutMs: this.options.timeoutMs,
              signal: this.shutdown.signal,
              agent: (protocol) => this.traffic.agentFor(Number(endpoint.id), protocol),
            },
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
      // The events from now until it is enabled again are not for it (docs/api.md, "Webhooks": Disabling).
      const skipped = disable ? skippedFromDisabling(endpoint.skipped_seqs, await lastEventSeq(trx, Number(endpoint.account_id))) : undefined;
      await updateEndpointHealth(trx, endpoint.id, {
        failing_since: failingSince,
        ...(disable ? { disabled_at: at, next_attempt_at: null, skipped_seqs: skipped } : {}),
      });
      endpoint.failing_since = failingSince;
      if (disable) {
        endpoint.disabled_at = at;
        await auditEndpoint(trx, endpoint, 'webhook_endpoint.disable', SERVICE_ACTOR, now);
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
