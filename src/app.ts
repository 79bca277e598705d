// Builds the application from injected parts (database, keys, clock, config) and never
// listens, so tests drive exactly what production runs.
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import swagger from '@fastify/swagger';
import type { Config } from './config.ts';
import type { DatabaseHandle } from './db/database.ts';
import { DatabaseFileGone } from './db/sqlite-file-watch.ts';
import type { Keyring } from './crypto/keyring.ts';
import { ApiTokenAuthenticator } from './api-tokens/api-token-authenticator.ts';
import { registerApiTokenAuth } from './auth/authenticate.ts';
import { requireDeclaredAccess } from './auth/route-access.ts';
import { registerErrorHandling } from './http/error-handler.ts';
import { registerJsonBodyParsing } from './http/json-body.ts';
import { methodOverrideStrategy, refuseOtherOverrides } from './http/method-override.ts';
import { generateRequestId, registerRequestContext, requestLogger } from './http/request-context.ts';
import { onRequestEnd } from './http/request-end.ts';
import { frameworkErrorHandler } from './http/framework-errors.ts';
import { refuseMalformedQuery, registerValidation } from './http/validation.ts';
import { serializersBuiltOnFirstUse } from './http/serialization.ts';
import { operationalCodeSamples, registerOperationalRoutes } from './http/operational.routes.ts';
import { registerUserGroupRoutes } from './user-groups/user-groups.routes.ts';
import { OpenedTokenCache } from './user-groups/opened-tokens.ts';
import { registerEmbedRoutes, registerEmbedTokenRoute, registerIntrospectionRoute, registerWellKnownRoutes } from './embed/embed.routes.ts';
import { EmbedSigningKeys } from './embed/signing-keys.ts';
import { EmbedTokens } from './embed/embed-token.ts';
import { AccountSlugs } from './accounts/accounts.repository.ts';
import { HEAVY_OPERATION_WAIT_MS, HeavyOperations } from './accounts/heavy-operations.ts';
import { finishOpenApiDocument, openApiInfo, showGetBodies } from './http/openapi.ts';
import { userGroupCodeSamples } from './user-groups/user-groups.operations.ts';
import { embedCodeSamples } from './embed/embed.operations.ts';
import { apiTokenCodeSamples } from './api-tokens/api-tokens.operations.ts';
import { registerApiTokenRoutes } from './api-tokens/api-tokens.routes.ts';
import { registerRateLimits } from './http/rate-limit.ts';
import { handleClientError } from './http/client-errors.ts';
import { refuseRequestsWhileClosing } from './http/closing.ts';
import { registerDocsRoutes } from './pages/docs.routes.ts';
import { registerConsoleRoutes } from './pages/console.routes.ts';
import { registerFrontPageRoutes } from './pages/front-page.routes.ts';
import { createMetrics, type Metrics } from './metrics/metrics.ts';
import type { Tracing } from './tracing/trace-context.ts';
import { countRequest, countRequestsInFlight, registerMetrics } from './metrics/metrics.routes.ts';
import { EventSequencer, type NewEventsListener } from './events/sequencer.ts';
import { registerEventRoutes } from './events/events.routes.ts';
import { eventCodeSamples } from './events/events.operations.ts';
import { EventStreams } from './events/event-stream.ts';
import { registerEventStreamRoute } from './events/event-stream.routes.ts';
import { eventStreamCodeSamples } from './events/event-stream.operations.ts';
import { WebhookDispatcher } from './webhooks/dispatcher.ts';
import { WebhookTraffic } from './webhooks/webhook-traffic.ts';
import { registerWebhookRoutes } from './webhooks/webhooks.routes.ts';
import { webhookCodeSamples } from './webhooks/webhooks.operations.ts';
import { registerGroupTagRoutes } from './group-tags/group-tags.routes.ts';
import { groupTagCodeSamples } from './group-tags/group-tags.operations.ts';
import { registerIdempotency } from './idempotency/idempotency.ts';
import { IdempotencySweeper } from './idempotency/idempotency-sweeper.ts';
import { BackgroundFailures } from './foundations/throttled-log.ts';
import { InstanceRegistry, sharedSettings } from './process/instance-registry.ts';
import { isDatabaseUnavailable, storageFault } from './db/errors.ts';
import type { SharedAcrossWorkers } from './process/cluster/worker-link.ts';

interface AppDependencies {
  config: Config;
  database: DatabaseHandle;
  keyring: Keyring;
  now?: () => Date;
  /** Fastify's logger option: pino options, a pino instance, or false. */
  logger?: FastifyServerOptions['logger'] | false;
  /** The metrics registry (created before the database, to time its queries); a new one if absent. */
  metrics?: Metrics;
  /** Spans exported over OTLP (tracing/otel.ts); absent when tracing is off. */
  tracing?: Tracing;
  /** In one worker of several (UGS_WORKERS): what it shares with the others through the primary. */
  workers?: SharedAcrossWorkers;
}

export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const { config } = deps;
  const now = deps.now ?? (() => new Date());
  const metrics = deps.metrics ?? createMetrics();
  // What hears of every request's end: its log line and its metrics (request-end.ts).
  const requestEnd = [requestLogger(deps.tracing), countRequest(metrics)];
  const app = Fastify({
    logger: deps.logger ?? false,
    genReqId: generateRequestId,
    // One log line a request (request-context.ts, logRequest), instead of Fastify's two.
    logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
    // HEAD on get-or-create would create groups from a "safe" method: answer 405 instead.
    exposeHeadRoutes: false,
    routerOptions: { constraints: { methodOverride: methodOverrideStrategy } },
    return503OnClosing: false, // refuseRequestsWhileClosing answers them in the API's envelope
    // No connection is held forever (docs/api.md, "Timeouts"). Node checks them every
    // connectionsCheckingInterval, so a timeout fires at most a quarter of it late.
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    http: {
      headersTimeout: config.headersTimeoutMs,
      connectionsCheckingInterval: Math.max(250, Math.min(config.headersTimeoutMs, config.requestTimeoutMs) / 4),
    },
    clientErrorHandler: handleClientError,
    frameworkErrors: frameworkErrorHandler(requestEnd),
    schemaController: { compilersFactory: { buildSerializer: serializersBuiltOnFirstUse() } },
  });

  // Every route under /api declares the token and the scope it needs, or the app does not start (auth/route-access.ts).
  requireDeclaredAccess(app);
  registerValidation(app);
  registerErrorHandling(app);
  registerRequestContext(app, deps.tracing);
  refuseRequestsWhileClosing(app);
  registerJsonBodyParsing(app);
  // After authentication, like every 400.
  app.addHook('preValidation', refuseOtherOverrides);
  app.addHook('preValidation', refuseMalformedQuery);
  countRequestsInFlight(app, metrics);
  onRequestEnd(app, requestEnd);

  await registerRateLimits(app, config, metrics, deps.tracing, deps.workers?.rateLimitStore); // before every route, so that each one inherits it

  await app.register(swagger, {
    openapi: openApiInfo,
    transform: showGetBodies,
    transformObject: finishOpenApiDocument({
      ...userGroupCodeSamples,
      ...groupTagCodeSamples,
      ...embedCodeSamples,
      ...apiTokenCodeSamples,
      ...eventCodeSamples,
      ...eventStreamCodeSamples,
      ...webhookCodeSamples,
      ...operationalCodeSamples,
    }),
  });
  registerFrontPageRoutes(app);
  registerDocsRoutes(app);
  registerConsoleRoutes(app);

  registerOperationalRoutes(app, deps.database, deps.workers);
  metrics.watchDatabase(deps.database);
  registerMetrics(app, metrics, deps.workers?.metricsText);
  deps.workers?.shareMetrics(metrics.registry);

  // Background loops log a failure at once, then at most every 10 s, and when it is over
  // (throttled-log.ts). A database file that went away is logged once, when it happens
  // (server.ts), not by every loop.
  const reportOf = (loop: string) => {
    const failures = new BackgroundFailures(app.log, { loop, isOutage: (err) => isDatabaseUnavailable(err) || storageFault(err) !== undefined });
    const onError = (err: unknown, what: string) => {
      if (!(err instanceof DatabaseFileGone)) failures.failed(err, what);
    };
    return { onError, onSuccess: failures.succeeded };
  };
  // Change events: moved from the outbox into the feed while the app runs (events/sequencer.ts).
  const sequencer = new EventSequencer(deps.database, {
    now,
    retentionMs: config.eventRetentionMs,
    pollMs: config.eventPollMs,
    ...reportOf('event sequencer'),
  });
  app.addHook('onReady', async () => sequencer.start());
  app.addHook('onClose', async () => sequencer.stop());
  // Webhooks: each endpoint follows the feed with a cursor; a dispatcher per instance makes and
  // sends its deliveries, within per-account limits shared with the test route (webhooks/dispatcher.ts).
  const webhookTraffic = new WebhookTraffic({ total: config.webhookConcurrency, perAccount: config.webhookAccountConcurrency });
  const webhooks = new WebhookDispatcher(deps.database, deps.keyring, new AccountSlugs(deps.database.db), webhookTraffic, {
    now,
    retryScheduleMs: config.webhookRetryScheduleMs,
    allowPrivate: config.webhookAllowPrivate,
    retentionMs: config.eventRetentionMs,
    ...reportOf('webhook dispatcher'),
    onOutcome: (outcome) => metrics.webhookAttempted(outcome),
  });
  webhooks.attach(sequencer);
  // With several workers, the events one numbers wake the streams of all (process/cluster/worker-link.ts).
  const onNewEvents = deps.workers ? deps.workers.shareEvents(sequencer, webhooks) : (listener: NewEventsListener) => sequencer.onNewEvents(listener);
  // Open event streams end before the server waits for its connections (they would hold it up).
  const eventStreams = new EventStreams(deps.database, onNewEvents, {
    heartbeatMs: config.eventHeartbeatMs,
    stallMs: config.eventStreamStallMs,
    limits: { perToken: config.eventStreamsPerToken, perAccount: config.eventStreamsPerAccount },
    ...reportOf('event streams'),
    onStalled: (accountId) => app.log.warn({ account_id: accountId }, 'closed an event stream whose client stopped reading'),
  });
  app.addHook('preClose', async () => eventStreams.closeAll());
  metrics.watchWebhookBacklog(() => webhooks.oldestPendingAgeSeconds());
  app.addHook('onReady', async () => webhooks.start());
  app.addHook('preClose', async () => webhooks.stop());

  // This process in the instance registry while it serves: what `ugs migrate --contract` checks,
  // and a warning when instances disagree on a setting they must share (process/instance-registry.ts).
  const registry = new InstanceRegistry(deps.database, sharedSettings(config), app.log, reportOf('instance registry').onError);
  app.addHook('onReady', async () => registry.start());
  app.addHook('onClose', async () => registry.stop());

  // Idempotency-Key on the routes that opt in (config: { idempotent: true }); its keys expire after 24 h.
  registerIdempotency(app, { database: deps.database, keyring: deps.keyring, now, lockMs: config.requestTimeoutMs });
  const idempotencySweeper = new IdempotencySweeper(deps.database, {
    now,
    everyMs: 60_000,
    ...reportOf('idempotency sweeper'),
  });
  app.addHook('onReady', async () => idempotencySweeper.start());
  app.addHook('onClose', async () => idempotencySweeper.stop());

  // Each account's bulk upserts, tag renames and deletes, a few at a time on every instance together (accounts/heavy-operations.ts).
  const heavyOperations = new HeavyOperations(
    deps.database,
    { perAccount: config.heavyOperationsPerAccount, waitMs: HEAVY_OPERATION_WAIT_MS },
    reportOf('heavy operations').onError,
  );
  const tokens = new OpenedTokenCache(deps.keyring, config.tokenCacheSize);
  const authenticator = new ApiTokenAuthenticator(deps.database.pageViews, now, config.apiTokenCacheMs);
  const signingKeys = new EmbedSigningKeys(deps.database, deps.keyring, now, config.embedSigningAlgorithm);
  const embed = {
    database: deps.database,
    embedTokens: new EmbedTokens(signingKeys, deps.keyring, { issuer: config.publicUrl, audience: config.embedAudience }),
    accountSlugs: new AccountSlugs(deps.database.pageViews),
    now,
    events: metrics,
  };
  await app.register(async (api) => {
    registerApiTokenAuth(api, authenticator);
    registerUserGroupRoutes(api, {
      database: deps.database,
      tokens,
      now,
      events: metrics,
      maxHierarchyDepth: config.maxHierarchyDepth,
      maxTagsPerEnvironment: config.maxTagsPerEnvironment,
      heavyOperations,
    });
    registerGroupTagRoutes(api, {
      database: deps.database,
      now,
      batchSize: config.tagBatchSize,
      maxTagsPerEnvironment: config.maxTagsPerEnvironment,
      heavyOperations,
    });
    registerEmbedTokenRoute(api, embed);
    registerIntrospectionRoute(api, embed);
    registerApiTokenRoutes(api, { database: deps.database, accountSlugs: embed.accountSlugs, now });
    registerEventRoutes(api, { database: deps.database, accountSlugs: embed.accountSlugs });
    registerEventStreamRoute(api, { streams: eventStreams, accountSlugs: embed.accountSlugs });
    registerWebhookRoutes(api, {
      database: deps.database,
      keyring: deps.keyring,
      allowPrivate: config.webhookAllowPrivate,
      maxEndpoints: config.webhookMaxEndpoints,
      traffic: webhookTraffic,
      accountSlugs: embed.accountSlugs,
      now,
    });
  });
  await registerEmbedRoutes(app, { ...embed, corsOrigins: config.corsOrigins });
  await registerWellKnownRoutes(app, signingKeys, config.publicUrl);

  return app;
}
