// Deletes the Idempotency-Keys older than 24 h (docs/api.md, "Idempotent retries"). A key
// past its expiry is already treated as unknown when it is sent again; this only keeps the
// table to the last day's keys. Every instance sweeps (a delete of rows already gone costs
// nothing), in batches, each its own short transaction.
import { AsyncResource } from 'node:async_hooks';
import { backgroundWork } from '../foundations/background-work.ts';
import type { DatabaseHandle } from '../db/database.ts';
import { inTransaction } from '../db/transaction.ts';
import { sweepExpiredKeys } from './idempotency-keys.repository.ts';

const BATCH = 1000;

export interface SweeperOptions {
  now: () => Date;
  /** How often to sweep. */
  everyMs: number;
  onError: (err: unknown, what: string) => void;
  /** A pass worked: after failures, the log says that the outage is over (throttled-log.ts). */
  onSuccess?: () => void;
}

export class IdempotencySweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  /** Its own async context: started from the app's onReady, it belongs to no request (its trace, its request id). */
  private readonly scope = new AsyncResource('IdempotencySweeper');

  constructor(
    private readonly handle: DatabaseHandle,
    private readonly options: SweeperOptions,
  ) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(Math.min(1000, this.options.everyMs)); // a first sweep soon after start
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Deletes every expired key now; how many. */
  async sweepOnce(): Promise<number> {
    const cutoff = this.options.now().toISOString();
    let removed = 0;
    for (;;) {
      const batch = await inTransaction(this.handle, (trx) => sweepExpiredKeys(trx, cutoff, BATCH));
      removed += batch;
      if (batch < BATCH || this.stopped) return removed;
    }
  }

  private schedule(delayMs: number): void {
    this.scope.runInAsyncScope(() => backgroundWork.run('idempotency sweeper', () => this.setTimer(delayMs)));
  }

  private setTimer(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.running = this.sweepOnce()
        .then(
          () => this.options.onSuccess?.(),
          (err) => this.options.onError(err, 'sweeping expired idempotency keys'),
        )
        .finally(() => {
          this.running = undefined;
          if (!this.stopped) this.schedule(this.options.everyMs);
        });
    }, delayMs);
    this.timer.unref();
  }
}
