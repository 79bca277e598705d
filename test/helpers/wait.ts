// Waiting for a signal instead of for a fixed time: a loaded machine (two cores shared by many
// runs) may take seconds for what takes milliseconds on an idle one, so a test waits for what
// it needs to see, bounded generously, and says what it waited for when the bound is reached.

/** How long a test waits, by default, for something that takes milliseconds on an idle machine. */
export const GENEROUS_WAIT_MS = 30_000;

/**
 * How long a test waits for a process it started to be ready (a server's "listening" line):
 * Node's start, the modules' load and the migrations take seconds on an idle machine and
 * many times that with both cores busy (CONTRIBUTING.md, "Test tiers": CI runs the suite so).
 */
export const PROCESS_START_MS = 120_000;

/**
 * Resolves with the first truthy value of `probe`, asked again every `everyMs` (first at once),
 * or rejects after `timeoutMs` with `what` (a function: worded when it fails) and the last value seen.
 */
export async function eventually<T>(
  what: string | (() => string),
  probe: () => T | Promise<T>,
  { timeoutMs = GENEROUS_WAIT_MS, everyMs = 25 }: { timeoutMs?: number; everyMs?: number } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() >= deadline) {
      throw new Error(`${typeof what === 'function' ? what() : what}: not seen within ${timeoutMs} ms (last: ${JSON.stringify(value)})`);
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
