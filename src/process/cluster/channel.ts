// Messages between the primary and one worker over the IPC channel Node's cluster gives them
// (docs/operations.md, "Workers"): requests answered once by id, and notices that expect no
// answer. Every message of ours carries `ugs` (its kind), so that cluster's own messages
// and anything else on the channel pass by untouched.

/** A message of ours: `ugs` says what it is; `id` is set on a request and on its reply. */
export interface ChannelMessage {
  ugs: string;
  id?: number;
  body?: unknown;
  error?: string;
}

type Handler = (body: unknown) => unknown;

const REPLY = 'reply';

export class Channel {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void; timer: NodeJS.Timeout }>();
  private readonly handlers = new Map<string, Handler>();

  /** `post` sends one message to the other side; it may throw once the channel is closed. */
  constructor(private readonly post: (message: ChannelMessage) => void) {}

  /** What to do with messages of `kind`; a request gets what `handler` returns (or its error) as its reply. */
  handle(kind: string, handler: Handler): void {
    this.handlers.set(kind, handler);
  }

  /** A message that expects no answer. False if it could not be sent (the channel is closed). */
  notify(kind: string, body?: unknown): boolean {
    return this.send({ ugs: kind, body });
  }

  /** A message the other side answers; rejects if it does not within `timeoutMs`, or cannot be sent. */
  request<T>(kind: string, body: unknown, timeoutMs: number): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`no answer to "${kind}" within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      if (!this.send({ ugs: kind, id, body })) this.settle(id, undefined, 'the channel to the other process is closed');
    });
  }

  /** Hands a received message to its handler or to the request it answers; false if it is not one of ours. */
  receive(message: unknown): boolean {
    if (typeof message !== 'object' || message === null || typeof (message as ChannelMessage).ugs !== 'string') return false;
    const { ugs: kind, id, body, error } = message as ChannelMessage;
    if (kind === REPLY) {
      if (id !== undefined) this.settle(id, body, error);
      return true;
    }
    const handler = this.handlers.get(kind);
    if (id === undefined) {
      handler?.(body);
      return true;
    }
    if (!handler) {
      this.send({ ugs: REPLY, id, error: `nothing handles "${kind}"` });
      return true;
    }
    Promise.resolve()
      .then(() => handler(body))
      .then(
        (value) => this.send({ ugs: REPLY, id, body: value }),
        (err: unknown) => this.send({ ugs: REPLY, id, error: err instanceof Error ? err.message : String(err) }),
      );
    return true;
  }

  /** The other side is gone: every request still waiting fails now rather than at its timeout. */
  close(reason: string): void {
    for (const id of [...this.pending.keys()]) this.settle(id, undefined, reason);
  }

  private settle(id: number, body: unknown, error: string | undefined): void {
    const waiting = this.pending.get(id);
    if (!waiting) return; // timed out already
    this.pending.delete(id);
    clearTimeout(waiting.timer);
    if (error === undefined) waiting.resolve(body);
    else waiting.reject(new Error(error));
  }

  private send(message: ChannelMessage): boolean {
    try {
      this.post(message);
      return true;
    } catch {
      return false;
    }
  }
}
