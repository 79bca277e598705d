// One typed configuration object, read from the environment once and validated at start,
// so that a typo in a variable fails the start instead of a request.

import os from 'node:os';
import path from 'node:path';
import { parseDuration } from './foundations/duration.ts';

export interface Config {
  host: string;
  port: number;
  /**
   * Server processes sharing the port (UGS_WORKERS; `auto`: one per core). 1 is one process,
   * as before; above 1 a primary process forks that many workers (src/process/cluster/).
   */
  workers: number;
  /** `sqlite:<path>` or `postgres://…`. */
  databaseUrl: string;
  /** PostgreSQL: connections each instance keeps at most. */
  dbPoolSize: number;
  /**
   * PostgreSQL replicas that page views may read from (UGS_DATABASE_READ_URL): a read-only
   * HAProxy port or one standby; empty: every read goes to DATABASE_URL (docs/configuration.md,
   * "Read replicas").
   */
  readDatabaseUrl: string;
  /** When page views read from the replica: `fallback` only while the primary cannot be reached; `replica` first, always. */
  readFrom: ReadFrom;
  /** A replica further behind than this (the age of the oldest commit it has not replayed) serves nothing. */
  readMaxLagMs: number;
  /** Connections to the replica each instance keeps at most. */
  readPoolSize: number;
  /** Prefix of the Redis keys that hold each account's last write position. */
  readRedisPrefix: string;
  /**
   * PostgreSQL behind PgBouncer in transaction pool mode: unnamed statements instead of named
   * prepared ones, and no statement_timeout startup parameter (docs/operations.md).
   */
  pgbouncerTransactionMode: boolean;
  /** Base64 (or hex) 32-byte keys, the one that seals first; empty means "use the key file". */
  secretKeys: string[];
  /** UGS_KEY_FILE; by default, for SQLite, secret.key beside the database file; for PostgreSQL none (empty). */
  keyFile: string;
  bootstrap: boolean;
  logLevel: string;
  /** How long a verified API token may be trusted without asking the database again. */
  apiTokenCacheMs: number;
  /** How many opened user group tokens to remember (0: open every time). */
  tokenCacheSize: number;
  /** Origins allowed to call the embed routes from a browser; `*` means any. */
  corsOrigins: string[] | '*';
  shutdownTimeoutMs: number;
  /** The whole request, headers and body, must arrive within this (else 408 and the connection closes). */
  requestTimeoutMs: number;
  /** The request's headers must arrive within this. */
  headersTimeoutMs: number;
  /** How long an idle keep-alive connection stays open: longer than a proxy's own idle timeout. */
  keepAliveTimeoutMs: number;
  /** Requests per window per API token on the management API (0 turns the limit off). */
  rateLimitMax: number;
  rateLimitWindowMs: number;
  /** Requests per window per user group token (or embed token) on /api/embed/*. */
  embedRateLimitMax: number;
  embedRateLimitWindowMs: number;
  /** How many levels a hierarchy of user groups may have (a group without parent is level 1). */
  maxHierarchyDepth: number;
  /** Groups per transaction when a tag is renamed or deleted on every group that carries it (docs/api.md, "Tags"). */
  tagBatchSize: number;
  /** The most distinct tags one environment of an account may have (docs/api.md, "Tags"): a write that would pass it is `409 tag_limit_reached`. */
  maxTagsPerEnvironment: number;
  /** Heavy operations (bulk upserts, tag renames and deletes, exports) one account may run at once, on all instances together (docs/api.md, "Heavy operations"). */
  heavyOperationsPerAccount: number;
  /** The service's public base URL: the `iss` of embed tokens, whose keys are at <publicUrl>/.well-known/jwks.json. */
  publicUrl: string;
  /** The `aud` of an embed token that is not bound to an embed_id. */
  embedAudience: string;
  /** The algorithm of the first embed signing key of a new deployment, and of `ugs keys embed rotate` without --alg. */
  embedSigningAlgorithm: EmbedSigningAlgorithm;
  /** Redis shared by all instances for the rate limits; empty means per-instance counters. */
  redisUrl: string;
  /** Prefix of every Redis key this service writes, so that services can share a Redis. */
  rateLimitRedisPrefix: string;
  /** Where OTLP/HTTP trace exports go (…/v1/traces); empty: tracing is off and nothing of OpenTelemetry is loaded. */
  otlpTracesUrl: string;
  otlpProtocol: 'http/protobuf' | 'http/json';
  /** Sent with every export (an API key of the collector, say): never logged. */
  otlpHeaders: Record<string, string>;
  /** The service.name of the spans. */
  serviceName: string;
  /** Which traces are recorded (OTEL_TRACES_SAMPLER): `parentbased_*` keep a caller's decision. */
  traceSampler: 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';
  /** The share of traces recorded by the traceidratio samplers, 0 to 1. */
  traceSamplerRatio: number;
  /** How long change events are kept (UGS_EVENT_RETENTION, e.g. `7d`). */
  eventRetentionMs: number;
  /** How often an instance looks for events other instances wrote. */
  eventPollMs: number;
  /** The waits before each retry of a failed webhook delivery (UGS_WEBHOOK_RETRY_SCHEDULE); then it is given up. */
  webhookRetryScheduleMs: number[];
  /** Webhook URLs may resolve to loopback, private and link-local addresses (UGS_WEBHOOK_ALLOW_PRIVATE): tests and closed networks only. */
  webhookAllowPrivate: boolean;
  /** The most webhook endpoints that may receive one environment's events of an account (UGS_WEBHOOK_MAX_ENDPOINTS): what one event fans out to. */
  webhookMaxEndpoints: number;
  /** Webhook endpoints one instance works on at once (UGS_WEBHOOK_CONCURRENCY). */
  webhookConcurrency: number;
  /** Of them, one account's, test events included (UGS_WEBHOOK_ACCOUNT_CONCURRENCY): its hanging receivers hold no more. */
  webhookAccountConcurrency: number;
  /** How often an event stream (GET /api/events/stream) writes a heartbeat comment. */
  eventHeartbeatMs: number;
  /** How long an event stream may stay stalled (its client not reading) before it is closed. */
  eventStreamStallMs: number;
  /** Event streams one API token may have open at once, on all instances together. */
  eventStreamsPerToken: number;
  /** Event streams the API tokens of one account may have open at once, on all instances together. */
  eventStreamsPerAccount: number;
}

export class ConfigError extends Error {}

/** UGS_DATABASE_READ_FROM: the first is the default. */
export const READ_FROM_CHOICES = ['fallback', 'replica'] as const;
export type ReadFrom = (typeof READ_FROM_CHOICES)[number];

/**
 * The algorithms embed tokens may be signed with (docs/api.md, "Embed tokens"). ES256 comes
 * first, the default: every common JWT library verifies it, while EdDSA is refused by some
 * (jsonwebtoken, get-jwks) and RS256 tokens and keys are several times larger.
 */
export const EMBED_SIGNING_ALGORITHMS = ['ES256', 'RS256', 'EdDSA'] as const;
export type EmbedSigningAlgorithm = (typeof EMBED_SIGNING_ALGORITHMS)[number];

const DEFAULT_DATABASE_URL = 'sqlite:./data/ugs.sqlite';
/** Enough for every group of a million-group deployment (its memory: docs/performance.md, "Why the code is the way it is"). */
const DEFAULT_TOKEN_CACHE_SIZE = 1_000_000;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const config: Config = {
    host: env.HOST || '127.0.0.1',
    port: integer(env, 'PORT', 3000, 0, 65535),
    workers: workers(env),
    databaseUrl: env.DATABASE_URL || DEFAULT_DATABASE_URL,
    dbPoolSize: integer(env, 'UGS_DB_POOL_SIZE', 10, 1, 1000),
    readDatabaseUrl: readDatabaseUrl(env),
    readFrom: oneOf(env, 'UGS_DATABASE_READ_FROM', READ_FROM_CHOICES),
    readMaxLagMs: integer(env, 'UGS_DATABASE_READ_MAX_LAG_MS', 1000, 0, 3_600_000),
    readPoolSize: integer(env, 'UGS_DATABASE_READ_POOL_SIZE', 5, 1, 1000),
    readRedisPrefix: env.UGS_DATABASE_READ_REDIS_PREFIX || 'ugs:wal:',
    pgbouncerTransactionMode: boolean(env, 'UGS_PGBOUNCER_TRANSACTION_MODE', false),
    secretKeys: list(env.UGS_SECRET_KEY),
    keyFile: env.UGS_KEY_FILE || defaultKeyFile(env.DATABASE_URL || DEFAULT_DATABASE_URL),
    bootstrap: boolean(env, 'UGS_BOOTSTRAP', true),
    logLevel: env.LOG_LEVEL || 'info',
    apiTokenCacheMs: integer(env, 'UGS_API_TOKEN_CACHE_MS', 500, 0, 900),
    tokenCacheSize: integer(env, 'UGS_TOKEN_CACHE_SIZE', DEFAULT_TOKEN_CACHE_SIZE, 0, 100_000_000),
    corsOrigins: env.UGS_CORS_ORIGINS && env.UGS_CORS_ORIGINS !== '*' ? list(env.UGS_CORS_ORIGINS) : '*',
    shutdownTimeoutMs: integer(env, 'UGS_SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    requestTimeoutMs: integer(env, 'UGS_REQUEST_TIMEOUT_MS', 30_000, 1000, 600_000),
    headersTimeoutMs: integer(env, 'UGS_HEADERS_TIMEOUT_MS', 10_000, 1000, 600_000),
    keepAliveTimeoutMs: integer(env, 'UGS_KEEP_ALIVE_TIMEOUT_MS', 72_000, 1000, 600_000),
    rateLimitMax: integer(env, 'UGS_RATE_LIMIT_MAX', 60_000, 0, 100_000_000),
    rateLimitWindowMs: integer(env, 'UGS_RATE_LIMIT_WINDOW_MS', 60_000, 1000, 86_400_000),
    embedRateLimitMax: integer(env, 'UGS_EMBED_RATE_LIMIT_MAX', 180_000, 0, 100_000_000),
    embedRateLimitWindowMs: integer(env, 'UGS_EMBED_RATE_LIMIT_WINDOW_MS', 60_000, 1000, 86_400_000),
    redisUrl: env.REDIS_URL || '',
    rateLimitRedisPrefix: env.UGS_RATE_LIMIT_REDIS_PREFIX || 'ugs:rl:',
    maxHierarchyDepth: integer(env, 'UGS_MAX_HIERARCHY_DEPTH', 3, 1, 10),
    tagBatchSize: integer(env, 'UGS_TAG_BATCH_SIZE', 500, 1, 10_000),
    maxTagsPerEnvironment: integer(env, 'UGS_MAX_TAGS_PER_ENVIRONMENT', 10_000, 1, 1_000_000),
    heavyOperationsPerAccount: integer(env, 'UGS_HEAVY_OPERATIONS_PER_ACCOUNT', 2, 1, 1000),
    publicUrl: '',
    embedAudience: env.UGS_EMBED_AUDIENCE || 'ugs:embed',
    otlpTracesUrl: otlpTracesUrl(env),
    otlpProtocol: otlpProtocol(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL),
    otlpHeaders: otlpHeaders(env.OTEL_EXPORTER_OTLP_HEADERS),
    serviceName: env.OTEL_SERVICE_NAME || 'user-group-service',
    traceSampler: traceSampler(env.OTEL_TRACES_SAMPLER),
    traceSamplerRatio: ratio(env, 'OTEL_TRACES_SAMPLER_ARG', 1),
    embedSigningAlgorithm: oneOf(env, 'UGS_EMBED_SIGNING_ALG', EMBED_SIGNING_ALGORITHMS),
    eventRetentionMs: duration(env, 'UGS_EVENT_RETENTION', '7d'),
    eventPollMs: integer(env, 'UGS_EVENT_POLL_MS', 100, 10, 10_000),
    webhookRetryScheduleMs: durations(env, 'UGS_WEBHOOK_RETRY_SCHEDULE', '5s,5m,30m,2h,5h,8h,8h'),
    webhookAllowPrivate: boolean(env, 'UGS_WEBHOOK_ALLOW_PRIVATE', false),
    webhookMaxEndpoints: integer(env, 'UGS_WEBHOOK_MAX_ENDPOINTS', 16, 1, 1000),
    webhookConcurrency: integer(env, 'UGS_WEBHOOK_CONCURRENCY', 64, 1, 10_000),
    webhookAccountConcurrency: integer(env, 'UGS_WEBHOOK_ACCOUNT_CONCURRENCY', 4, 1, 10_000),
    eventHeartbeatMs: integer(env, 'UGS_EVENT_HEARTBEAT_MS', 15_000, 10, 600_000),
    eventStreamStallMs: integer(env, 'UGS_EVENT_STREAM_STALL_MS', 60_000, 100, 3_600_000),
    eventStreamsPerToken: integer(env, 'UGS_EVENT_STREAMS_PER_TOKEN', 20, 1, 100_000),
    eventStreamsPerAccount: integer(env, 'UGS_EVENT_STREAMS_PER_ACCOUNT', 100, 1, 1_000_000),
  };
  config.publicUrl = publicUrl(env.UGS_PUBLIC_URL, config);
  if (config.webhookAccountConcurrency > config.webhookConcurrency) {
    throw new ConfigError(
      `UGS_WEBHOOK_ACCOUNT_CONCURRENCY (${config.webhookAccountConcurrency}) must not exceed UGS_WEBHOOK_CONCURRENCY (${config.webhookConcurrency})`,
    );
  }
  if (config.headersTimeoutMs > config.requestTimeoutMs) {
    throw new ConfigError(`UGS_HEADERS_TIMEOUT_MS (${config.headersTimeoutMs}) must not exceed UGS_REQUEST_TIMEOUT_MS (${config.requestTimeoutMs})`);
  }
  return config;
}

/**
 * UGS_DATABASE_READ_URL: replicas of a PostgreSQL DATABASE_URL. SQLite has no replica to read,
 * and a URL of any other kind is a typo: both fail the start rather than read nothing.
 */
function readDatabaseUrl(env: NodeJS.ProcessEnv): string {
  const url = env.UGS_DATABASE_READ_URL || '';
  if (!url) return '';
  if (!/^postgres(ql)?:\/\//.test(url)) throw new ConfigError('UGS_DATABASE_READ_URL must be a postgres:// URL (a read-only port of HAProxy, or one standby)');
  if (!/^postgres(ql)?:\/\//.test(env.DATABASE_URL || DEFAULT_DATABASE_URL))
    throw new ConfigError('UGS_DATABASE_READ_URL needs DATABASE_URL=postgres://…: a SQLite database has no replica to read from');
  return url;
}

/**
 * The key file a database uses when UGS_KEY_FILE does not name one (docs/security.md, "Secret
 * keys"): for SQLite, secret.key beside the database file (./data/secret.key beside the default
 * ./data/ugs.sqlite), so that a key and its database go together; for PostgreSQL none: the
 * instances of one database, often on several machines, share UGS_SECRET_KEY (or a key file
 * named on purpose), and a key file left in a checkout by a SQLite walk-through must not apply.
 */
function defaultKeyFile(databaseUrl: string): string {
  if (!databaseUrl.startsWith('sqlite:')) return '';
  return `${path.dirname(databaseUrl.slice('sqlite:'.length))}/secret.key`;
}

/** An absolute http(s) URL without query or fragment, without its trailing slash. */
function publicUrl(value: string | undefined, { host, port }: Pick<Config, 'host' | 'port'>): string {
  if (!value) return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`UGS_PUBLIC_URL must be an absolute URL such as https://ugs.example.com, not "${value}"`);
  }
  if (!['http:', 'https:'].includes(url.protocol) || url.search || url.hash || url.username) {
    throw new ConfigError(`UGS_PUBLIC_URL must be an http(s) URL without credentials, query or fragment, not "${value}"`);
  }
  return url.href.replace(/\/+$/, '');
}

/**
 * Why the derived public URL is wrong, or null. Without UGS_PUBLIC_URL the `iss` of embed tokens
 * (and where their keys are said to be) comes from HOST and PORT; HOST=0.0.0.0 or :: (what a
 * container listens on) means "every interface", which is no address a client can reach, so
 * verifiers that check `iss` or fetch the keys from it fail (docs/deployment.md, "Containers").
 */
export function publicUrlWarning(config: Pick<Config, 'host' | 'publicUrl'>, env: NodeJS.ProcessEnv = process.env): string | null {
  if (env.UGS_PUBLIC_URL || !['0.0.0.0', '::', '[::]'].includes(config.host)) return null;
  return (
    `UGS_PUBLIC_URL is not set: embed tokens will carry iss "${config.publicUrl}" and point to keys at ` +
    `${config.publicUrl}/.well-known/jwks.json, an address no client can reach (HOST=${config.host} means every interface). ` +
    'Set UGS_PUBLIC_URL to the URL clients call this service at, e.g. UGS_PUBLIC_URL=https://ugs.example.com (docker run -e UGS_PUBLIC_URL=…)'
  );
}

/**
 * The standard OpenTelemetry variables (https://opentelemetry.io/docs/specs/otel/protocol/exporter/):
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is; OTEL_EXPORTER_OTLP_ENDPOINT is a base
 * to which /v1/traces is added. OTEL_SDK_DISABLED=true turns tracing off whatever they say.
 */
function otlpTracesUrl(env: NodeJS.ProcessEnv): string {
  if (boolean(env, 'OTEL_SDK_DISABLED', false)) return '';
  const [name, value] = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    ? ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT]
    : ['OTEL_EXPORTER_OTLP_ENDPOINT', env.OTEL_EXPORTER_OTLP_ENDPOINT];
  if (!value) return '';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`${name} must be an http(s) URL such as http://collector:4318, not "${value}"`);
  }
  if (!['http:', 'https:'].includes(url.protocol)) throw new ConfigError(`${name} must be an http(s) URL (OTLP over HTTP), not "${value}"`);
  if (name === 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') return url.href;
  return `${url.href.replace(/\/+$/, '')}/v1/traces`;
}

const SAMPLERS: Config['traceSampler'][] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];

function traceSampler(value: string | undefined): Config['traceSampler'] {
  if (!value) return 'parentbased_always_on';
  if ((SAMPLERS as string[]).includes(value)) return value as Config['traceSampler'];
  throw new ConfigError(`OTEL_TRACES_SAMPLER must be one of ${SAMPLERS.join(', ')}, not "${value}"`);
}

function ratio(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0 || value > 1) throw new ConfigError(`${name} must be a number from 0 to 1, got "${raw}"`);
  return value;
}

function otlpProtocol(value: string | undefined): Config['otlpProtocol'] {
  if (!value || value === 'http/protobuf') return 'http/protobuf';
  if (value === 'http/json') return 'http/json';
  throw new ConfigError(`OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json (grpc is not supported), not "${value}"`);
}

/** `key1=value1,key2=value2`, values URL-encoded (the W3C baggage format the spec names). */
function otlpHeaders(value: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of list(value)) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new ConfigError('OTEL_EXPORTER_OTLP_HEADERS must be key=value pairs separated by commas');
    try {
      headers[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      throw new ConfigError('OTEL_EXPORTER_OTLP_HEADERS holds a malformed percent-encoding');
    }
  }
  return headers;
}

function list(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A duration such as `7d`, `12h`, `90s` (duration.ts). */
function duration(env: NodeJS.ProcessEnv, name: string, fallback: string): number {
  const text = env[name] || fallback;
  const ms = parseDuration(text);
  if (ms === null) throw new ConfigError(`${name} must be a duration such as 7d, 12h, 30m or 90s, not "${text}"`);
  return ms;
}

/** A comma-separated list of 1 to 20 durations, e.g. `5s,5m,30m`. */
function durations(env: NodeJS.ProcessEnv, name: string, fallback: string): number[] {
  const text = env[name] || fallback;
  const list = text.split(',').map((part) => parseDuration(part));
  if (list.length > 20 || list.some((ms) => ms === null))
    throw new ConfigError(`${name} must be 1 to 20 comma-separated durations such as 5s,5m,2h, not "${text}"`);
  return list as number[];
}

/** How many worker processes a machine may sensibly be asked for: beyond it a typo is likelier. */
const MAX_WORKERS = 256;

/** `auto`: the cores this process may use (os.availableParallelism, which honours CPU affinity). */
function workers(env: NodeJS.ProcessEnv): number {
  if (env.UGS_WORKERS?.trim().toLowerCase() === 'auto') return Math.min(MAX_WORKERS, os.availableParallelism());
  try {
    return integer(env, 'UGS_WORKERS', 1, 1, MAX_WORKERS);
  } catch {
    throw new ConfigError(`UGS_WORKERS must be auto or an integer from 1 to ${MAX_WORKERS}, got "${env.UGS_WORKERS}"`);
  }
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

/** One of `choices`, spelled exactly; the first when unset. */
function oneOf<T extends string>(env: NodeJS.ProcessEnv, name: string, choices: readonly T[]): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return choices[0];
  if (!(choices as readonly string[]).includes(raw)) throw new ConfigError(`${name} must be one of ${choices.join(', ')}, got "${raw}"`);
  return raw as T;
}

function boolean(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['true', '1', 'yes'].includes(raw)) return true;
  if (['false', '0', 'no'].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}
