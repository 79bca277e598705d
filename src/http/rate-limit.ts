// Rate limits per credential, not per IP: one budget per API token on the management API and
// one per user group token (or embed token) under /api/embed/. Counters are keyed by the
// SHA-256 of the credential, never the credential itself, so a Redis dump holds no token.
//
// With REDIS_URL the counters live in Redis and every instance shares one budget; without
// it each instance counts on its own: in its one process, or, with several workers, in the
// primary process they all ask (process/cluster/shared-rate-limits.ts). If the store fails, requests
// are let through (fail open) and a warning is logged: a broken limiter must not take the API
// down with it.
//
// Header fields follow draft-ietf-httpapi-ratelimit-headers-09:
//   RateLimit-Policy: "api-token";q=<max>;w=<window seconds>
//   RateLimit: "api-token";r=<remaining>;t=<seconds until the window resets>
import rateLimit, { type FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { Command, Redis } from 'ioredis';
import { runningTimeDeadline } from '../foundations/running-time-deadline.ts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { ServiceEvents } from '../metrics/metrics.ts';
import { AppError } from '../foundations/errors.ts';
import { credentialFromAuthorization, hashToken } from '../auth/token-format.ts';
import { throttledWarning, type ThrottledWarning } from '../foundations/throttled-warning.ts';
import type { Tracing } from '../tracing/trace-context.ts';

export type RateLimitSettings = Pick<
  Config,
  'rateLimitMax' | 'rateLimitWindowMs' | 'embedRateLimitMax' | 'embedRateLimitWindowMs' | 'redisUrl' | 'rateLimitRedisPrefix'
>;

interface Policy {
  name: string;
  max: number;
  windowMs: number;
  /** Who the budget belongs to, for the 429 message. */
  holder: string;
}

const EMBED_PREFIX = '/api/embed/';
/** How long to wait for Redis at start before serving without it (fail open). */
const REDIS_READY_WAIT_MS = 2000;
/**
 * A Redis command slower than this counts as a failure: the request goes on unlimited. Counted
 * in the time this process ran (running-time-deadline.ts), not with ioredis's commandTimeout: a
 * process whose loop was busy (the first request of a route builds its validators) or that did
 * not run took an answer already in the socket for none, and let a request past its budget.
 */
const REDIS_COMMAND_TIMEOUT_MS = 250;

/** The SHA-256 of the credential in the Authorization header, or null if there is none. */
function credentialHash(request: FastifyRequest): string | null {
  // The API-token check (an earlier onRequest hook, auth/authenticate.ts) has hashed it already;
  // routes outside the management API (the embed side) have no principal.
  const known = request.principal?.tokenHash;
  if (known) return known;
  const credential = credentialFromAuthorization(request.headers.authorization);
  return credential ? hashToken(credential) : null;
}

/** What ioredis's commandTimeout does (the command fails with "Command timed out"), on a running-time deadline. */
function commandsWithinRunningTime(redis: Redis, ms: number): void {
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = (command: Command, stream?: Parameters<Redis['sendCommand']>[1]) => {
    const answered = send(command, stream);
    const cancel = runningTimeDeadline(ms, () => command.reject(new Error('Command timed out')));
    command.promise.then(cancel, cancel);
    return answered;
  };
}

async function connectRedis(app: FastifyInstance, url: string, warn: ThrottledWarning, tracing: Tracing | undefined): Promise<Redis> {
  // Loaded only with a REDIS_URL (db/write-positions.ts says why).
  const { Redis: RedisClient } = await import('ioredis');
  const redis = new RedisClient(url, {
    // Fail fast instead of queueing commands while disconnected: the request goes on unlimited.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  });
  commandsWithinRunningTime(redis, REDIS_COMMAND_TIMEOUT_MS);
  redis.on('error', (err) => warn(err, 'rate limit store (Redis) unreachable: rate limits are not enforced until it is back'));
  tracing?.instrumentRedis(redis);
  app.addHook('onClose', async () => redis.disconnect());
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, REDIS_READY_WAIT_MS);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return redis;
}

/**
 * Registers the limits as a root-level preParsing hook: it runs after every onRequest hook,
 * so a request the API-token check refused never spends budget, and before the body is read.
 * It applies to every route under /api/ that is registered after it, including routes under
 * /api/embed/ that other modules add later.
 */
export async function registerRateLimits(
  app: FastifyInstance,
  settings: RateLimitSettings,
  events: Pick<ServiceEvents, 'requestRateLimited'>,
  tracing?: Tracing,
  /** Counters shared with the other workers of this instance, used when there is no Redis. */
  sharedStore?: FastifyRateLimitStoreCtor,
): Promise<void> {
  const management: Policy = { name: 'api-token', max: settings.rateLimitMax, windowMs: settings.rateLimitWindowMs, holder: 'API token' };
  const embed: Policy = { name: 'embed', max: settings.embedRateLimitMax, windowMs: settings.embedRateLimitWindowMs, holder: 'user group token' };
  const policyOf = (key: string) => (key.startsWith('embed:') ? embed : management);
  // Both off: no hook at all, rather than one that runs on every request to do nothing.
  if (management.max === 0 && embed.max === 0) return;
  const warn = throttledWarning(app.log);

  const redis = settings.redisUrl ? await connectRedis(app, settings.redisUrl, warn, tracing) : undefined;
  await app.register(rateLimit, {
    global: false, // only the hook below applies limits
    ...(redis ? { redis, nameSpace: settings.rateLimitRedisPrefix } : sharedStore ? { store: sharedStore } : {}),
    skipOnError: false, // errors reach the hook below, which logs them and fails open
    keyGenerator: (request) => keyOf(request) ?? '',
    max: (_request, key) => policyOf(key).max,
    timeWindow: (_request, key) => policyOf(key).windowMs,
  });
  const limiter = app.createRateLimit();

  const keys = new WeakMap<FastifyRequest, string | null>();
  function keyOf(request: FastifyRequest): string | null {
    if (keys.has(request)) return keys.get(request)!;
    const url = request.routeOptions.url;
    let key: string | null = null;
    if (url?.startsWith('/api/') && request.method !== 'OPTIONS') {
      // A management route (it has a principal: POST /api/embed/introspect too) spends the
      // API token's budget; the browser routes under /api/embed/ the bearer token's.
      const policy = request.principal === undefined && url.startsWith(EMBED_PREFIX) ? embed : management;
      const hash = policy.max > 0 ? credentialHash(request) : null;
      if (hash) key = `${policy === embed ? 'embed' : 'api'}:${hash}`;
    }
    keys.set(request, key);
    return key;
  }

  app.addHook('preParsing', async (request, reply, payload) => {
    const key = keyOf(request);
    if (key === null) return payload; // not limited, or no credential: authentication refuses it
    const policy = policyOf(key);
    let state: Awaited<ReturnType<typeof limiter>>;
    try {
      state = await limiter(request);
    } catch (err) {
      warn(err, `rate limit store (${redis ? 'Redis' : 'the primary process'}) failed: request let through without a limit`, request);
      return payload;
    }
    if (state.isAllowed) return payload;
    const windowSeconds = Math.ceil(policy.windowMs / 1000);
    const resetSeconds = Math.max(0, state.ttlInSeconds);
    const fields = {
      'ratelimit-policy': `"${policy.name}";q=${policy.max};w=${windowSeconds}`,
      ratelimit: `"${policy.name}";r=${state.isExceeded ? 0 : state.remaining};t=${resetSeconds}`,
    };
    if (!state.isExceeded) {
      reply.headers(fields);
      return payload;
    }
    events.requestRateLimited(request.routeOptions.url ?? '');
    throw new AppError(
      'rate_limited',
      `this ${policy.holder} made more than ${policy.max} requests in ${windowSeconds} s; retry in ${Math.max(1, resetSeconds)} s`,
      {
        headers: { ...fields, 'retry-after': String(Math.max(1, resetSeconds)) },
      },
    );
  });
}
