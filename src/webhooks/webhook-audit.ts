// The history of an account's webhook endpoints: every change to one (created, secret rotated,
// disabled after 3 days of failures, enabled, deleted) is a history entry and so an event
// (audit.repository.ts), written in the change's transaction. Who added a place that receives
// the account's changes, and when, must be on record (docs/api.md, "Change events").
import type { Kysely } from 'kysely';
import { appendAudit, type Actor, type AuditAction, type AuditDetails } from '../audit/audit.repository.ts';
import type { Database, WebhookEndpointRow } from '../db/schema.ts';

/** The history entry (and so the event) of a change to an endpoint, in the change's transaction. */
export function auditEndpoint(trx: Kysely<Database>, endpoint: WebhookEndpointRow, action: AuditAction, actor: Actor, now: Date): Promise<void> {
  // Its URL is in the entry when it comes and goes, so the history says where a deleted endpoint sent.
  const details: AuditDetails | undefined =
    action === 'webhook_endpoint.create'
      ? { url: { old: null, new: endpoint.url } }
      : action === 'webhook_endpoint.delete'
        ? { url: { old: endpoint.url, new: null } }
        : undefined;
  return appendAudit(trx, {
    accountId: Number(endpoint.account_id),
    subjectType: 'webhook_endpoint',
    subjectId: Number(endpoint.id),
    environment: endpoint.environment,
    url: endpoint.url,
    action,
    details,
    actor,
    at: now,
  });
}
