// Where the server's log lines go: standard output, in batches (4 KiB, or at least every
// 200 ms) rather than one write() each, which cost a visible share of throughput
// (docs/performance.md, "What was optimized"). Two limits keep a slow
// or stuck reader of that output (a full pipe) from hurting the service: the buffer is capped,
// lines beyond it are dropped and counted on stderr, and the flush at shutdown waits a
// bounded time. It must never be the synchronous flush that pino runs at process exit for
// an asynchronous destination: against a full pipe that one sleeps and retries until the
// reader comes back, blocking the event loop, so not even the shutdown timeout could end it.
// finish() before exiting turns that flush off. It ends the stream rather than calling
// flush(cb): sonic-boom calls that back when the write in progress completes, even if
// fewer than minLength bytes are still buffered, so the last lines ("stopped") were lost.
//
// Several workers (cluster/) write to one standard output. A write of at most PIPE_BUF
// (4096) bytes to a pipe is never split nor mixed with another process's, so there each write
// is whole lines of at most that size: a line is never torn by another worker's batch.
import { pino } from 'pino';

/** Log lines held for a reader that is not keeping up; beyond this they are dropped. */
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;
const DROP_REPORT_EVERY_MS = 10_000;
/** The most a write to a pipe may hold and still be atomic (POSIX PIPE_BUF on Linux). */
const PIPE_BUF = 4096;

interface LogStream {
  stream: ReturnType<typeof pino.destination>;
  /**
   * Writes everything buffered and closes the stream; resolves when it is written or after
   * `timeoutMs`, whichever is first (what is still buffered then is dropped). Call it last,
   * before process.exit(): nothing may be logged after it.
   */
  finish(timeoutMs: number): Promise<void>;
}

/** `sharedOutput`: other processes write to the same standard output (the workers of one instance). */
export function createLogStream({ sharedOutput = false }: { sharedOutput?: boolean } = {}): LogStream {
  // sonic-boom writes fd 1 from libuv's thread pool. If fd 1 is a blocking pipe that nobody
  // reads, a pool thread stays in write() forever, and the process can never exit: it joins
  // its threads at exit. Creating Node's own stdout stream puts a pipe in non-blocking mode
  // (the write then fails with EAGAIN, which sonic-boom retries later). Under tsx, something
  // else had always created it first, which hid this; the compiled server must do it itself.
  void process.stdout;
  const batch = sharedOutput ? { minLength: PIPE_BUF / 2, maxWrite: PIPE_BUF } : { minLength: 4096 };
  const stream = pino.destination({ dest: 1, sync: false, ...batch, maxLength: MAX_BUFFERED_BYTES, periodicFlush: 200 } as Parameters<
    typeof pino.destination
  >[0] &
    object);
  let finished: Promise<void> | undefined;
  let dropped = 0;
  let reportedAt = 0;
  stream.on('drop', () => {
    dropped++;
    const now = Date.now();
    if (now - reportedAt < DROP_REPORT_EVERY_MS) return;
    reportedAt = now;
    process.stderr.write(`log output is not being read fast enough: ${dropped} log writes dropped so far\n`);
  });
  return {
    stream,
    finish(timeoutMs) {
      // Once: the shutdown timeout and the end of a shutdown may both get here.
      finished ??= new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          stream.off('close', done); // destroy() below emits 'close' again when the time ran out
          stream.destroy(); // if the time ran out: marks it destroyed at once, so pino's exit-time flush skips it
          resolve();
        };
        const timer = setTimeout(done, timeoutMs);
        stream.once('close', done);
        stream.end();
      });
      return finished;
    },
  };
}
