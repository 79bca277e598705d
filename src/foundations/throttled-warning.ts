// A warning that repeats at most every few seconds, with how many it held back: an outage of
// a dependency (the database, Redis, its storage) must give a log line now and then, not one a
// request (the throttle: throttled-log.ts).
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import { LogThrottle } from './throttled-log.ts';

export type ThrottledWarning = (err: unknown, message: string, request?: FastifyRequest) => void;

export function throttledWarning(log: FastifyBaseLogger, level: 'warn' | 'error' = 'warn'): ThrottledWarning {
  const throttle = new LogThrottle();
  return (err, message, request) => {
    const suppressed = throttle.take();
    if (suppressed === undefined) return;
    (request?.log ?? log)[level]({ err: { message: (err as Error)?.message, code: (err as { code?: string })?.code }, suppressed }, message);
  };
}
