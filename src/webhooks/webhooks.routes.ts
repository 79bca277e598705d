// /api/webhook_endpoints: an admin token manages its account's webhook endpoints (docs/api.md,
// "Webhooks"). HTTP in, service call, HTTP out; the rules live in webhooks.service.ts.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AccountSlugs } from '../accounts/accounts.repository.ts';
import { actorOf, principalOf } from '../auth/authenticate.ts';
import * as operations from './webhooks.operations.ts';
import * as service from './webhooks.service.ts';
import { webhookAttemptJson, webhookDeliveryJson, webhookEndpointJson } from './webhooks.json.ts';
import type { WebhookTraffic } from './webhook-traffic.ts';

interface WebhookRouteDeps extends service.WebhookDeps {
  traffic: WebhookTraffic;
  accountSlugs: AccountSlugs;
  now: () => Date;
}

export function registerWebhookRoutes(app: FastifyInstance, deps: WebhookRouteDeps): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.get('/api/webhook_endpoints', { schema: operations.listWebhookEndpointsOperation }, async (request) => {
    const endpoints = await service.listEndpointsAs(deps.database, principalOf(request));
    return { success: 1 as const, webhook_endpoints: endpoints.map(webhookEndpointJson) };
  });

  api.post('/api/webhook_endpoints', { schema: operations.createWebhookEndpointOperation }, async (request, reply) => {
    const { body } = request;
    const created = await service.createEndpointAs(
      deps,
      principalOf(request),
      { url: body.url, types: body.types ?? null, description: body.description ?? null },
      actorOf(request),
      deps.now(),
    );
    reply.code(201);
    return { success: 1 as const, webhook_endpoint: { ...webhookEndpointJson(created.endpoint), secret: created.secret } };
  });

  api.delete('/api/webhook_endpoints/:id', { schema: operations.deleteWebhookEndpointOperation }, async (request) => {
    const deleted = await service.deleteEndpointAs(deps.database, principalOf(request), request.params.id, actorOf(request), deps.now());
    return { success: 1 as const, webhook_endpoint: webhookEndpointJson(deleted) };
  });

  api.post('/api/webhook_endpoints/:id/rotate_secret', { schema: operations.rotateWebhookSecretOperation }, async (request) => {
    const rotated = await service.rotateSecretAs(deps, principalOf(request), request.params.id, actorOf(request), deps.now());
    return { success: 1 as const, webhook_endpoint: { ...webhookEndpointJson(rotated.endpoint), secret: rotated.secret } };
  });

  api.post('/api/webhook_endpoints/:id/enable', { schema: operations.enableWebhookEndpointOperation }, async (request) => {
    const enabled = await service.enableEndpointAs(deps.database, principalOf(request), request.params.id, actorOf(request), deps.now());
    return { success: 1 as const, webhook_endpoint: webhookEndpointJson(enabled) };
  });

  api.get('/api/webhook_endpoints/:id/deliveries', { schema: operations.webhookDeliveriesOperation }, async (request) => {
    const { deliveries } = await service.deliveriesAs(deps.database, principalOf(request), request.params.id, request.query.limit ?? 50);
    return { success: 1 as const, deliveries: deliveries.map(webhookDeliveryJson) };
  });

  api.post('/api/webhook_endpoints/:id/test', { schema: operations.testWebhookEndpointOperation }, async (request) => {
    const principal = principalOf(request);
    const { outcome, attemptedAt } = await service.sendTestEventAs(
      deps,
      principal,
      request.params.id,
      await deps.accountSlugs.get(principal.accountId),
      deps.now(),
    );
    return {
      success: 1 as const,
      delivered: outcome.ok,
      attempt: webhookAttemptJson({
        attempted_at: attemptedAt.toISOString(),
        status_code: outcome.statusCode,
        duration_ms: outcome.durationMs,
        error: outcome.error,
      }),
    };
  });
}
