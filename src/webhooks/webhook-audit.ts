// The history of an account's webhook endpoints: every change to one (created, secret rotated,
// disabled after 3 days of failures, enabled, deleted) is a history entry and so an event
// (audit.repository.ts), written in the change's transaction. Who added a place that receives
// the account's changes, and when, must be on record (docs/api.md, "Change events").
import type { Kysely } from 'kysely';
import { appendAudit, type Actor, type AuditAction, type AuditDetails } from '../audit/audit.repository.ts';
import type { Database, WebhookEndpointRow } from '../db/schema.ts';

/**
 * What history and events say of an endpoint's URL: its origin (scheme, host and port), never
 * its path or query string. A receiver's credentials often live there (docs/api.md, "Webhooks"),
 * and every `read` token sees the feed, as does every endpoint that takes every type; the whole
 * URL is for admins, in the endpoint listing.
 */
export function urlOriginOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'null';
  }
}

/** The history entry (and so the event) of a change to an endpoint, in the change's transaction. */
export function auditEndpoint(trx: Kysely<Database>, endpoint: WebhookEndpointRow, action: AuditAction, actor: Actor, now: Date): Promise<void> {
  const origin = urlOriginOf(endpoint.url);
  // Its URL's origin is in the entry when it comes and goes, so the history says where a deleted endpoint sent.
  const details: AuditDetails | undefined =
    action === 'webhook_endpoint.create'
      ? { url: { old: null, new: origin } }
      : action === 'webhook_endpoint.delete'
        ? { url: { old: origin, new: null } }
        : undefined;
  return appendAudit(trx, {
    accountId: Number(endpoint.account_id),
    subjectType: 'webhook_endpoint',
    subjectId: Number(endpoint.id),
    environment: endpoint.environment,
    url: origin,
    action,
    details,
    actor,
    at: now,
  });
}
