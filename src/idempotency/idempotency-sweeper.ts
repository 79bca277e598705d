// Deletes the Idempotency-Keys older than 24 h (docs/api.md, "Idempotent retries"). A key
// past its expiry is already treated as unknown when it is sent again; this only keeps the
// table to the last day's keys. Every instance sweeps (a delete of rows already gone costs
// nothing), in batches, each its own short transaction.
import { BackgroundLoop } from '../foundations/background-loop.ts';
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
  private readonly loop: BackgroundLoop;

  constructor(
    private readonly handle: DatabaseHandle,
    private readonly options: SweeperOptions,
  ) {
    this.loop = new BackgroundLoop({
      name: 'idempotency sweeper',
      what: 'sweeping expired idempotency keys',
      pass: async () => void (await this.sweepOnce()),
      next: () => options.everyMs,
      onError: options.onError,
      onSuccess: options.onSuccess,
    });
  }

  start(): void {
    this.loop.start(Math.min(1000, this.options.everyMs)); // a first sweep soon after start
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /** Deletes every expired key now; how many. */
  async sweepOnce(): Promise<number> {
    const cutoff = this.options.now().toISOString();
    let removed = 0;
    for (;;) {
      const batch = await inTransaction(this.handle, (trx) => sweepExpiredKeys(trx, cutoff, BATCH));
      removed += batch;
      if (batch < BATCH || this.loop.stopped) return removed;
    }
  }
}
