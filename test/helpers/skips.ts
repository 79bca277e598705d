// Everything `npm test` skips is listed at its end, with why (test/helpers/skipped-reporter.ts):
// a suite or test skipped with `{ skip: 'why' }` or `t.skip('why')`, and a part of a test left
// out (a verifier whose tools are missing, the Redis spans without Redis) with skippedPart().
import type { TestContext } from 'node:test';

/** How a test says that part of it did not run: a diagnostic the reporter collects. */
export const SKIPPED_PART = 'skipped part:';

/** Says, in the run's list of skips, that `what` of this test did not run and why. */
export function skippedPart(t: TestContext, what: string, reason: string): void {
  t.diagnostic(`${SKIPPED_PART} ${what}: ${reason}`);
}
