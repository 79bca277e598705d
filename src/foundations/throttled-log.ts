// Log lines that an outage repeats: an outage of a dependency (the database, Redis, its
// storage) makes every request and every pass of every background loop fail, and must give a
// line now and then, not one a request or a pass (docs/operations.md, "Logs during an outage").
import type { FastifyBaseLogger } from 'fastify';

/** How often a repeated line may be written. */
export const LOG_EVERY_MS = 10_000;

/** Lets a line through at most every LOG_EVERY_MS, and counts the ones it held back. */
export class LogThrottle {
  private lastAt = Number.NEGATIVE_INFINITY;
  private held = 0;

  /** How many lines were held back since the last one let through, when this one may be written; undefined (and counted) when not. */
  take(now = Date.now()): number | undefined {
    if (now - this.lastAt < LOG_EVERY_MS) {
      this.held++;
      return undefined;
    }
    this.lastAt = now;
    const held = this.held;
    this.held = 0;
    return held;
  }
}

export interface BackgroundFailureOptions {
  /** The loop, as the lines name it: `event sequencer`, `webhook dispatcher`… */
  loop: string;
  /** A failure of a dependency (the database unreachable, its storage full), logged as a warning without a stack; anything else is an error with its stack. */
  isOutage: (err: unknown) => boolean;
}

/**
 * What one background loop (docs/architecture.md, background-work.ts) reports: its first
 * failure at once, then at most one line every LOG_EVERY_MS with how many it held back, and,
 * once a pass works again after a failure it logged, one line that says the outage is over.
 */
export class BackgroundFailures {
  private readonly throttle = new LogThrottle();
  /** When the failures that the last line reported began; undefined while passes work. */
  private failingSince: number | undefined;
  private failures = 0;
  /** A line said it fails, and none yet that it works again. */
  private reported = false;

  constructor(
    private readonly log: Pick<FastifyBaseLogger, 'warn' | 'error' | 'info'>,
    private readonly options: BackgroundFailureOptions,
  ) {}

  readonly failed = (err: unknown, what: string): void => {
    const now = Date.now();
    this.failingSince ??= now;
    this.failures++;
    const suppressed = this.throttle.take(now);
    if (suppressed === undefined) return;
    this.reported = true;
    const { loop } = this.options;
    if (this.options.isOutage(err)) {
      const { message, code } = err as { message?: string; code?: string };
      this.log.warn({ loop, err: { message, code }, suppressed }, `${what} failed; will try again (logged at most every ${LOG_EVERY_MS / 1000} s)`);
    } else {
      this.log.error({ loop, err, suppressed }, `${what} failed; will try again (logged at most every ${LOG_EVERY_MS / 1000} s)`);
    }
  };

  readonly succeeded = (): void => {
    if (this.failingSince === undefined) return;
    if (this.reported) {
      const seconds = Math.round((Date.now() - this.failingSince) / 1000);
      this.log.info(
        { loop: this.options.loop, failures: this.failures, failing_for_s: seconds },
        `${this.options.loop}: works again, after ${this.failures} failures in ${seconds} s`,
      );
    }
    this.failingSince = undefined;
    this.failures = 0;
    this.reported = false;
  };
}
