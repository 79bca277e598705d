// The one way the service runs work again and again on its own (background-work.ts): the
// event sequencer, the webhook dispatcher, the idempotency sweeper, the renewal of event
// streams' leases, the instance registry's heartbeat. A loop runs one pass at a time: after
// `start`, then each time the pass before it asks for (every N ms, or not until woken), or
// sooner when woken. A pass that fails is reported to onError, never thrown, and the loop
// goes on; `stop` cancels the next pass and waits for the one running (shutdown drains).
import { AsyncResource } from 'node:async_hooks';
import { backgroundWork } from './background-work.ts';

export interface BackgroundLoopOptions {
  /** What the work is called in backgroundWork, and its async context's name. */
  name: string;
  /** What a failed pass was doing, for onError ('sequencing events'). */
  what: string;
  /** One pass. */
  pass: () => Promise<void>;
  /**
   * When the next pass runs after one ends, in ms; undefined: only when woken. Asked after
   * every pass, also one during which the loop was woken (which then runs after wakeMs).
   */
  next: () => number | undefined;
  /** How soon a wake-up runs a pass (0: at once; more gathers several wake-ups in one pass). */
  wakeMs?: number;
  onError: (err: unknown, what: string) => void;
  /** A pass worked: after failures, the log says that the outage is over (throttled-log.ts). */
  onSuccess?: () => void;
}

export class BackgroundLoop {
  private timer: NodeJS.Timeout | undefined;
  private wakeTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** Woken while a pass ran: another one follows it. */
  private again = false;
  /** When the next pass is due (Infinity: none is scheduled, or one is running). */
  private dueAt = Infinity;
  private isStopped = true;
  /**
   * The loop's own async context: a wake-up comes from a request (its commit, the request
   * that made the app ready), and work started there would otherwise belong to that request
   * (its trace, its request id).
   */
  private readonly scope: AsyncResource;

  constructor(private readonly options: BackgroundLoopOptions) {
    this.scope = new AsyncResource(options.name);
  }

  /** Between start and stop: no. A pass checks it to end early when the loop stops. */
  get stopped(): boolean {
    return this.isStopped;
  }

  /** Runs the first pass after firstMs; false when the loop was already started. */
  start(firstMs: number): boolean {
    if (!this.isStopped) return false;
    this.isStopped = false;
    this.schedule(firstMs);
    return true;
  }

  /** Cancels the next pass and waits for the one running. */
  async stop(): Promise<void> {
    this.isStopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.wakeTimer);
    await this.running;
  }

  /** A pass soon (after wakeMs); a pass due sooner is not pushed back: under a stream of wake-ups it would never come. */
  wake(): void {
    if (this.isStopped) return;
    const wakeMs = this.options.wakeMs ?? 0;
    if (this.running) this.again = true;
    else if (this.dueAt > Date.now() + wakeMs) this.schedule(wakeMs);
  }

  /** Wakes the loop after delayMs (one such wake-up waits at a time: a new one replaces it). */
  wakeIn(delayMs: number): void {
    if (this.isStopped) return;
    clearTimeout(this.wakeTimer);
    this.wakeTimer = this.scope.runInAsyncScope(() => backgroundWork.run(this.options.name, () => setTimeout(() => this.wake(), delayMs)));
    this.wakeTimer.unref();
  }

  /** Resolves when no pass is running (one that is, has ended). */
  async idle(): Promise<void> {
    await this.running;
  }

  private schedule(delayMs: number): void {
    this.scope.runInAsyncScope(() => backgroundWork.run(this.options.name, () => this.setTimer(delayMs)));
  }

  private setTimer(delayMs: number): void {
    clearTimeout(this.timer);
    this.dueAt = Date.now() + delayMs;
    this.timer = setTimeout(() => {
      this.dueAt = Infinity;
      this.running = this.runPass().finally(() => {
        this.running = undefined;
        if (this.isStopped) return;
        const next = this.options.next();
        const delay = this.again ? (this.options.wakeMs ?? 0) : next;
        this.again = false;
        if (delay !== undefined) this.schedule(delay);
      });
    }, delayMs);
    this.timer.unref();
  }

  private async runPass(): Promise<void> {
    try {
      await this.options.pass();
    } catch (err) {
      this.options.onError(err, this.options.what);
      return;
    }
    this.options.onSuccess?.();
  }
}
