// A warning that repeats at most every few seconds, with how many it held back: an outage of
// a dependency (the database, Redis, its storage) must give a log line now and then, not one a
// request.
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';

const WARN_EVERY_MS = 10_000;

export type ThrottledWarning = (err: unknown, message: string, request?: FastifyRequest) => void;

export function throttledWarning(log: FastifyBaseLogger, level: 'warn' | 'error' = 'warn'): ThrottledWarning {
  let lastAt = 0;
  let suppressed = 0;
  return (err, message, request) => {
    const now = Date.now();
    if (now - lastAt < WARN_EVERY_MS) {
      suppressed++;
      return;
    }
    lastAt = now;
    (request?.log ?? log)[level]({ err: { message: (err as Error)?.message, code: (err as { code?: string })?.code }, suppressed }, message);

    suppressed = 0;
  };
}
