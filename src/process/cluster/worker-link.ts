// A worker's side of what the workers of one instance share through the primary
// (docs/operations.md, "Workers"): the rate limits' counters, /metrics, and news of change
// events. buildApp takes it as `workers`; without it the app is one process alone.
import type { FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { Registry } from 'prom-client';
import type { EventSequencer, NewEventsListener } from '../../events/sequencer.ts';
import type { WebhookDispatcher } from '../../webhooks/dispatcher.ts';
import { Channel } from './channel.ts';
import { primaryRateLimitStore } from './shared-rate-limits.ts';
import { METRICS_SNAPSHOT, METRICS_TEXT, METRICS_TEXT_WAIT_MS } from './shared-metrics.ts';

/** Worker → primary: this worker listens (its address). */
export const LISTENING = 'listening';
/** Primary → one worker: you are the watcher (the one that polls for what others wrote). */
export const WATCHER = 'watcher';
/** Worker → primary → the other workers: a worker numbered change events. */
export const EVENTS = 'events';
/** Primary → every worker that serves: whether every worker of the instance serves (a boolean). */
export const EVERY_WORKER_SERVES = 'every-worker-serves';

export interface EventsNotice {
  /** null: events of other instances (any account may have some). */
  accounts: number[] | null;
  count: number;
}

export interface SharedAcrossWorkers {
  /** The rate limits' counters, kept by the primary (used when there is no Redis). */
  rateLimitStore: FastifyRateLimitStoreCtor;
  /** The text of /metrics for every worker together. */
  metricsText(): Promise<string>;
  /** Answers the primary's requests for this worker's series. */
  shareMetrics(registry: Registry): void;
  /**
   * Only the watcher polls: the other workers' sequencers and dispatchers run when woken. The
   * events each worker numbers wake the streams of the others. Returns the subscription that
   * the streams take instead of the sequencer's own.
   */
  shareEvents(sequencer: EventSequencer, dispatcher: WebhookDispatcher): (listener: NewEventsListener) => void;
  /** Tells the primary that this worker serves, at `address`. */
  listening(address: string): void;
  /** Whether every worker of the instance serves, as the primary last said: false until it says so. */
  everyWorkerServes(): boolean;
}

export function linkToPrimary(): SharedAcrossWorkers {
  const channel = new Channel((message) => {
    if (!process.connected || !process.send) throw new Error('the channel to the primary is closed');
    process.send(message, undefined, undefined, () => undefined); // a failed send fails its request (at its timeout)
  });
  process.on('message', (message) => channel.receive(message));
  process.once('disconnect', () => channel.close('the primary process is gone'));
  let everyWorkerServes = false;
  channel.handle(EVERY_WORKER_SERVES, (body) => {
    everyWorkerServes = body === true;
  });

  return {
    rateLimitStore: primaryRateLimitStore(channel),
    metricsText: () => channel.request<string>(METRICS_TEXT, undefined, METRICS_TEXT_WAIT_MS),
    shareMetrics(registry) {
      channel.handle(METRICS_SNAPSHOT, () => registry.getMetricsAsJSON());
    },
    shareEvents(sequencer, dispatcher) {
      sequencer.setWatching(false);
      dispatcher.setPolling(false);
      channel.handle(WATCHER, () => {
        sequencer.setWatching(true);
        dispatcher.setPolling(true);
      });
      sequencer.onEventsFound((accounts, count) => channel.notify(EVENTS, { accounts: accounts && [...accounts], count } satisfies EventsNotice));
      const listeners = new Set<NewEventsListener>();
      channel.handle(EVENTS, (body) => {
        const notice = body as EventsNotice;
        sequencer.expectEvents(notice.count);
        const accounts = notice.accounts && new Set(notice.accounts);
        for (const listener of listeners) listener(accounts);
      });
      return (listener) => {
        sequencer.onNewEvents(listener);
        listeners.add(listener);
      };
    },
    listening(address) {
      channel.notify(LISTENING, address);
    },
    everyWorkerServes: () => everyWorkerServes,
  };
}
