// A deadline that counts only the time in which this process could have seen the awaited answer.
//
// A plain setTimeout measures the wall clock. When the process does not run (starved of CPU by
// other processes, throttled by a container's CPU quota, or its own event loop blocked), the
// timer comes due meanwhile, and once the process runs again Node fires due timers before it
// reads the sockets: an answer that arrived in time is taken for none, and a busy host for a
// gone database. Here the wait is made of short slices; a slice that fired late (the process
// was not running) counts for no more than its own length, so an answer already in the socket
// buffer is read before the deadline passes.

/** The slice of the wait: small beside a deadline, large beside a timer's usual lateness. */
const SLICE_MS = 50;

/**
 * Calls `expire` once `ms` of the process's running time has passed, unless the returned
 * function (call it when the answer came) is called first.
 */
export function runningTimeDeadline(ms: number, expire: () => void): () => void {
  let counted = 0;
  let timer: NodeJS.Timeout;
  const arm = () => {
    const armedAt = performance.now();
    const slice = Math.min(SLICE_MS, ms - counted);
    timer = setTimeout(() => {
      // A slice that fired late counts as its own length: the lateness was time the process did not run.
      counted += Math.min(performance.now() - armedAt, slice);
      if (counted >= ms) expire();
      else arm();
    }, slice);
    timer.unref();
  };
  arm();
  return () => clearTimeout(timer);
}

/** Thrown by withinRunningTime when the work took longer than its bound. */
export class RunningTimeExceeded extends Error {
  constructor(what: string, ms: number) {
    super(`${what} did not answer within ${ms} ms`);
    this.name = 'RunningTimeExceeded';
  }
}

/** The work's answer, or RunningTimeExceeded once `ms` of the process's running time passed without one. */
export function withinRunningTime<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cancel = runningTimeDeadline(ms, () => reject(new RunningTimeExceeded(what, ms)));
    work.then(
      (value) => {
        cancel();
        resolve(value);
      },
      (err: unknown) => {
        cancel();
        reject(err);
      },
    );
  });
}
