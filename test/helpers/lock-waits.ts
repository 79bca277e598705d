// A write that waited for other requests' row locks past the lock timeout answers
// 429 lock_timeout, "retry shortly" (docs/api.md, "Errors"); a heavy operation that waited for
// one of its account's places past its bound answers 429 too_many_heavy_operations with
// Retry-After, having changed nothing (docs/api.md, "Heavy operations"). A test whose writes
// contend on a loaded machine does what a caller does: it sends such a write again after its
// Retry-After, and asserts on the answer it then gets.

interface Answer {
  status: number;
  headers: Record<string, string | number | string[] | undefined>;
  body: unknown;
}

const ATTEMPTS = 5;
/** The 429s that say: the same request, later. */
const RETRY_LATER = new Set(['lock_timeout', 'too_many_heavy_operations']);

/** `send()`'s answer, sent again (at most 5 times in all) while it is 429 lock_timeout or too_many_heavy_operations. */
export async function retryingLockWaits<T extends Answer>(send: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const answer = await send();
    const code = (answer.body as { error?: { code?: string } } | undefined)?.error?.code;
    if (answer.status !== 429 || !RETRY_LATER.has(code ?? '') || attempt === ATTEMPTS) return answer;
    await new Promise((resolve) => setTimeout(resolve, Number(answer.headers['retry-after'] ?? 1) * 1000));
  }
}
