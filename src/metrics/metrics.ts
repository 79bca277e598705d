// The service's Prometheus metrics, in a registry of their own (never prom-client's global
// one), so every app built in one process (tests build many) counts only its own requests.
// Created before the database is opened, so that the database can report query timings
// into it through DatabaseOptions.onQuery without knowing about metrics.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { LogEvent } from 'kysely';
import type { DatabaseHandle } from '../db/database.ts';

const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const DB_BUCKETS = [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** Why a user group token was issued. */
type TokenIssueReason = 'create' | 'get_or_create' | 'rotate' | 'upsert';

/**
 * What the services and hooks report where it happens (not read back from responses): a
 * change of a route's status or operation id cannot silently stop a count.
 */
export interface ServiceEvents {
  userGroupTokenIssued(reason: TokenIssueReason): void;
  embedTokenIssued(): void;
  /** A request refused with 429, by route pattern. */
  requestRateLimited(route: string): void;
}

export interface Metrics extends ServiceEvents {
  registry: Registry;
  httpRequests: Counter<'method' | 'route' | 'status'>;
  httpDuration: Histogram<'method' | 'route'>;
  /** Requests whose headers arrived and whose answer has not gone yet (metrics.routes.ts). */
  httpInFlight: Gauge;
  rateLimited: Counter<'route'>;
  tokensIssued: Counter<'reason'>;
  embedTokensIssued: Counter;
  dbQueryDuration: Histogram<'operation' | 'outcome'>;
  /** Pass as DatabaseOptions.onQuery. */
  observeQuery(event: LogEvent): void;
  /** Adds the connection pool gauges (PostgreSQL only; SQLite has no pool). */
  watchDatabase(database: DatabaseHandle): void;
  /** Webhook delivery attempts by outcome: delivered, retry (will be tried again), failed (given up). */
  webhookDeliveries: Counter<'outcome'>;
  webhookAttempted(outcome: 'delivered' | 'retry' | 'failed'): void;
  /** Adds the gauge of the oldest pending webhook delivery's age, read when scraped. */
  watchWebhookBacklog(oldestPendingAgeSeconds: () => Promise<number>): void;
}

export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const httpRequests = new Counter({
    name: 'ugs_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers,
  });
  const httpInFlight = new Gauge({
    name: 'ugs_http_requests_in_flight',
    help: 'Requests whose headers have arrived and whose answer has not been sent yet (a scrape counts itself).',
    registers,
  });
  const httpDuration = new Histogram({
    name: 'ugs_http_request_duration_seconds',
    help: 'Time from receiving a request to sending its response, by method and route pattern.',
    labelNames: ['method', 'route'] as const,
    buckets: HTTP_BUCKETS,
    registers,
  });
  const rateLimited = new Counter({
    name: 'ugs_rate_limited_total',
    help: 'Requests refused with 429 rate_limited, by route pattern.',
    labelNames: ['route'] as const,
    registers,
  });
  const tokensIssued = new Counter({
    name: 'ugs_user_group_tokens_issued_total',
    help: 'User group tokens issued: by creating a group (create, get_or_create) or by rotating one (rotate).',
    labelNames: ['reason'] as const,
    registers,
  });
  const embedTokensIssued = new Counter({
    name: 'ugs_embed_tokens_issued_total',
    help: 'Short-lived embed tokens issued.',
    registers,
  });
  const dbQueryDuration = new Histogram({
    name: 'ugs_db_query_duration_seconds',
    help: 'Database query durations, by statement kind and outcome (ok or error).',
    labelNames: ['operation', 'outcome'] as const,
    buckets: DB_BUCKETS,
    registers,
  });

  const webhookDeliveries = new Counter({
    name: 'ugs_webhook_deliveries_total',
    help: 'Webhook delivery attempts, by outcome: delivered (2xx), retry (failed, will be tried again), failed (failed, given up).',
    labelNames: ['outcome'] as const,
    registers,
  });

  const databaseReads = new Counter({
    name: 'ugs_database_reads_total',
    help: "Page views' database reads (a group by its identity or token, an API token, the embed signing keys, account slugs), by the node that answered: primary or replica.",
    labelNames: ['pool'] as const,
    registers,
  });

  let watched = false;
  let watchedReads = false;
  let watchedBacklog = false;
  return {
    registry,
    httpRequests,
    httpDuration,
    httpInFlight,
    rateLimited,
    tokensIssued,
    embedTokensIssued,
    dbQueryDuration,
    userGroupTokenIssued: (reason) => tokensIssued.inc({ reason }),
    embedTokenIssued: () => embedTokensIssued.inc(),
    requestRateLimited: (route) => rateLimited.inc({ route }),
    webhookDeliveries,
    webhookAttempted: (outcome) => webhookDeliveries.inc({ outcome }),
    watchWebhookBacklog(oldestPendingAgeSeconds) {
      if (watchedBacklog) return;
      watchedBacklog = true;
      new Gauge({
        name: 'ugs_webhook_oldest_pending_delivery_age_seconds',
        help: 'Age of the oldest event an enabled webhook endpoint still waits to deliver (made into a delivery or not yet); 0 when none waits.',
        registers,
        aggregator: 'max', // several workers read the same table: their sum would count it twice
        async collect() {
          try {
            this.set(await oldestPendingAgeSeconds());
          } catch {
            // A scrape must not fail with the database: the last value stands.
          }
        },
      });
    },
    observeQuery(event) {
      try {
        dbQueryDuration.observe({ operation: queryOperation(event), outcome: event.level === 'error' ? 'error' : 'ok' }, event.queryDurationMillis / 1000);
      } catch {
        // A metric must never fail a query.
      }
    },
    watchDatabase(database) {
      if (!watchedReads) {
        watchedReads = true;
        database.pageViews.onRead.add((pool) => databaseReads.inc({ pool }));
      }
      const pool = database.pool;
      if (!pool || watched) return;
      watched = true;
      const gauge = (name: string, help: string, read: () => number) =>
        new Gauge({
          name,
          help,
          registers,
          collect() {
            this.set(read());
          },
        });
      gauge('ugs_db_pool_connections_total', 'PostgreSQL pool: open connections (idle and in use).', () => pool.totalCount);
      gauge('ugs_db_pool_connections_idle', 'PostgreSQL pool: open connections not in use.', () => pool.idleCount);
      gauge('ugs_db_pool_requests_waiting', 'PostgreSQL pool: queries waiting for a free connection.', () => pool.waitingCount);
      const primaryStatus = database.primaryStatus;
      if (primaryStatus)
        gauge(
          'ugs_db_pool_breaker_open',
          'PostgreSQL pool: 1 while the primary is found unreachable and requests that need it answer 503 at once (db/postgres-pool.ts).',
          () => (primaryStatus() === 'unreachable' ? 1 : 0),
        );
    },
  };
}

const NODE_OPERATIONS: Record<string, string> = {
  SelectQueryNode: 'select',
  InsertQueryNode: 'insert',
  UpdateQueryNode: 'update',
  DeleteQueryNode: 'delete',
  MergeQueryNode: 'merge',
};
const RAW_OPERATIONS = new Set([
  'select',
  'insert',
  'update',
  'delete',
  'with',
  'begin',
  'commit',
  'rollback',
  'savepoint',
  'release',
  'create',
  'alter',
  'drop',
  'pragma',
]);

/** A bounded label: the statement kind, never the SQL text (which would explode cardinality). */
function queryOperation(event: LogEvent): string {
  const byNode = NODE_OPERATIONS[event.query.query.kind];
  if (byNode) return byNode;
  const keyword = /^\s*([a-z]+)/i.exec(event.query.sql)?.[1]?.toLowerCase() ?? '';
  return RAW_OPERATIONS.has(keyword) ? keyword : 'other';
}
