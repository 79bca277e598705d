// Rate limits for every worker of an instance together, without Redis (docs/operations.md,
// "Workers"): the primary keeps the counters, and a worker asks it for each request it
// limits. With REDIS_URL the workers use Redis instead, which every instance shares already.
//
// The counts are the ones one process keeps alone: a fixed window per key that starts with
// its first request, as @fastify/rate-limit's own in-memory store counts. The (max+1)th
// request of a window is refused whichever worker gets it, because one process counts them
// all, in the order they reach it.
//
// What it costs: the checks a worker makes in one turn of its event loop go to the primary
// in one message, and come back in one; a key already over its limit is answered by the worker
// itself until its window ends, so a client that floods after its 429 costs the primary
// nothing.
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import { BoundedMap } from '../../foundations/bounded-map.ts';
import { atEndOfTurn } from '../../foundations/end-of-turn.ts';
import type { Channel } from './channel.ts';

export const RATE_LIMIT_CHECKS = 'rate-limit';

/** A key (the hash of a credential), its window and its limit. */
type Check = [key: string, windowMs: number, max: number];
/** Requests counted in the key's window so far (this one included), and the ms left in it. */
type Count = [current: number, ttlMs: number];

/** Keys counted at once; past it the oldest is forgotten (its budget starts over). */
const MAX_KEYS = 100_000;
/** A primary that has not answered by then is taken as down: the request goes on unlimited (fail open, like Redis). */
const ANSWER_WAIT_MS = 1000;

/** The primary's side: the counters of every worker's keys. */
export class RateLimitCounters {
  private readonly windows = new BoundedMap<string, { count: number; startedAt: number }>(MAX_KEYS);

  count(checks: Check[], now = Date.now()): Count[] {
    return checks.map(([key, windowMs]) => {
      let window = this.windows.get(key);
      if (!window || window.startedAt + windowMs <= now) {
        window = { count: 0, startedAt: now };
        this.windows.set(key, window);
      }
      window.count++;
      return [window.count, window.startedAt + windowMs - now];
    });
  }
}

/** The worker's side: a store for @fastify/rate-limit that asks the primary. */
export function primaryRateLimitStore(channel: Channel): FastifyRateLimitStoreCtor {
  let batch: { check: Check; answer: (err: Error | null, count?: Count) => void }[] = [];
  /** Keys over their limit, and until when: answered here without asking. */
  const exceeded = new BoundedMap<string, { current: number; until: number }>(MAX_KEYS);

  const send = () => {
    const sent = batch;
    batch = [];
    channel
      .request<Count[]>(
        RATE_LIMIT_CHECKS,
        sent.map((entry) => entry.check),
        ANSWER_WAIT_MS,
      )
      .then(
        (counts) => sent.forEach((entry, i) => entry.answer(null, counts[i])),
        (err: Error) => sent.forEach((entry) => entry.answer(err)),
      );
  };

  class PrimaryStore implements FastifyRateLimitStore {
    incr(key: string, callback: (error: Error | null, result?: { current: number; ttl: number }) => void, timeWindow: number, max: number): void {
      const now = Date.now();
      const over = exceeded.get(key);
      if (over && over.until > now) {
        over.current++;
        callback(null, { current: over.current, ttl: over.until - now });
        return;
      }
      if (batch.length === 0) atEndOfTurn(send);
      batch.push({
        check: [key, timeWindow, max],
        answer: (err, count) => {
          if (err || !count) return callback(err ?? new Error('no count from the primary'));
          const [current, ttl] = count;
          if (current > max) exceeded.set(key, { current, until: Date.now() + ttl });
          callback(null, { current, ttl });
        },
      });
    }

    child(): FastifyRateLimitStore {
      return new PrimaryStore();
    }
  }
  return PrimaryStore;
}
