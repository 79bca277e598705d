// Webhook endpoints and deliveries as the API writes them (webhooks.schemas.ts): never a secret.
import type { WebhookAttemptRow, WebhookEndpointRow } from '../db/schema.ts';
import type { EventType } from '../outbox/outbox.ts';
import type { WebhookEndpointJson } from './webhooks.schemas.ts';
import type { DeliveryWithAttempts } from './webhooks.service.ts';
import { webhookIdOf } from './webhook-secrets.ts';

export function webhookEndpointJson(row: WebhookEndpointRow): WebhookEndpointJson {
  return {
    id: Number(row.id),
    url: row.url,
    types: row.types === null ? null : (JSON.parse(row.types) as EventType[]),
    description: row.description,
    environment: row.environment,
    status: row.disabled_at === null ? 'enabled' : 'disabled',
    disabled_at: row.disabled_at,
    failing_since: row.failing_since,
    previous_secret_expires_at: row.previous_secret_expires_at,
    created_at: row.created_at,
  };
}

export function webhookAttemptJson(row: Pick<WebhookAttemptRow, 'attempted_at' | 'status_code' | 'duration_ms' | 'error'>) {
  return {
    attempted_at: row.attempted_at,
    status_code: row.status_code === null ? null : Number(row.status_code),
    duration_ms: Number(row.duration_ms),
    error: row.error,
  };
}

export function webhookDeliveryJson({ delivery, attempts }: DeliveryWithAttempts) {
  return {
    id: Number(delivery.id),
    webhook_id: webhookIdOf(Number(delivery.account_id), Number(delivery.event_seq)),
    event_id: Number(delivery.event_seq),
    event_type: delivery.event_type as EventType,
    status: delivery.status,
    next_attempt_at: delivery.status === 'pending' ? delivery.next_attempt_at : null,
    created_at: delivery.created_at,
    finished_at: delivery.finished_at,
    attempts: attempts.map(webhookAttemptJson),
  };
}
