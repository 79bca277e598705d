// The rules of webhook endpoints (docs/api.md, "Webhooks"), behind the routes' `admin` scope: an account's
// own endpoints only; an admin token restricted to one environment manages only endpoints of
// that environment, and the endpoints it creates receive only that environment's events. The
// secret is shown once and stored sealed; after a rotation the old one also signs for 24 h.
// Every change to an endpoint is in the account's history and its event feed (who added a
// place that receives the account's changes matters). Shared by the routes and the CLI.
import crypto from 'node:crypto';
import type { DatabaseHandle } from '../db/database.ts';
import type { Kysely } from 'kysely';
import type { Database, Environment, WebhookAttemptRow, WebhookDeliveryRow, WebhookEndpointRow } from '../db/schema.ts';
import { inTransaction } from '../db/transaction.ts';
import { AppError } from '../foundations/errors.ts';
import type { Keyring } from '../crypto/keyring.ts';
import type { Principal } from '../auth/principal.ts';
import type { EventType } from '../outbox/outbox.ts';
import type { Actor } from '../audit/audit.repository.ts';
import { auditEndpoint } from './webhook-audit.ts';
import { parseWebhookUrl, WebhookAddressError } from './webhook-address.ts';
import { generateWebhookSecret, sendWebhook, type AttemptOutcome } from './webhook-sender.ts';
import * as repository from './webhooks.repository.ts';
import { secretsThatSign, webhookIdOf } from './webhook-secrets.ts';
import { lastEventSeq, skippedAfterEnabling } from './webhook-fan-out.ts';
import type { WebhookTraffic } from './webhook-traffic.ts';

/** How long the secret before a rotation also signs. */
export const PREVIOUS_SECRET_MS = 24 * 3_600_000;

export interface WebhookDeps {
  database: DatabaseHandle;
  keyring: Keyring;
  allowPrivate: boolean;
  /** UGS_WEBHOOK_MAX_ENDPOINTS: the most endpoints that receive one environment's events of an account. */
  maxEndpoints: number;
}

export interface CreateEndpointInput {
  url: string;
  types: EventType[] | null;
  description: string | null;
}

/** The endpoints an admin may manage (repository.VisibleEndpoints). */
export function visibleTo(principal: Principal): repository.VisibleEndpoints {
  return { accountId: principal.accountId, environment: principal.allowedEnvironment };
}

function notFound(id: number): AppError {
  return new AppError('webhook_endpoint_not_found', `no webhook endpoint with id ${id} in this account`);
}

/**
 * The URL, refused with a 400 that says why when it is not http(s) or when the URL itself says
 * it leads where webhooks may not go (a private or reserved literal address, `localhost`). A
 * name is not resolved here: whether it exists, or where it points, must not change the
 * answer. Every attempt resolves and checks it, and sends nothing to a forbidden address
 * (docs/api.md, "Webhooks").
 */
export function checkEndpointUrl(url: string, allowPrivate: boolean): void {
  refuseUserinfo(url);
  try {
    parseWebhookUrl(url, allowPrivate);
  } catch (err) {
    if (!(err instanceof WebhookAddressError)) throw err;
    if (err.issue === 'forbidden_address') throw new AppError('webhook_url_forbidden', err.message, { details: [{ field: 'url', issue: err.issue }] });
    throw new AppError('validation_failed', err.message, { details: [{ field: 'url', issue: err.issue }] });
  }
}

/**
 * A user name or password in the URL (`https://user:password@host/`) is refused: it would go out
 * as Basic authentication to whoever the host resolves to, and such URLs are pasted into logs
 * and tickets. The receiver's credentials belong in the path or a query parameter, which only
 * admins see (history and events carry the URL's origin only: webhook-audit.ts).
 */
function refuseUserinfo(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return; // parseWebhookUrl says why
  }
  if (parsed.username === '' && parsed.password === '') return;
  throw new AppError(
    'validation_failed',
    "a webhook URL may not hold a user name or password (user:password@host): put the credentials your receiver checks in the URL's path or in a query parameter, e.g. https://hooks.example.com/ugs/<secret> or ?token=<secret>",
    { details: [{ field: 'url', issue: 'userinfo' }] },
  );
}

/**
 * At most `max` endpoints receive one environment's events of an account: what one event fans
 * out to, and so what one tenant's changes cost every other (docs/security.md, "Webhooks"). An
 * endpoint of no environment receives both, so it counts for both. Checked under the account's
 * lock, so that two creations at once cannot both take the last place.
 */
async function refuseBeyondCap(trx: Kysely<Database>, visible: repository.VisibleEndpoints, max: number): Promise<void> {
  await repository.lockAccountEndpoints(trx, visible.accountId);
  const environments: Environment[] = visible.environment === null ? ['Customer', 'Testing'] : [visible.environment];
  for (const [environment, count] of await repository.endpointsReceiving(trx, visible.accountId, environments)) {
    if (count >= max)
      throw new AppError(
        'webhook_endpoint_limit_reached',
        `this account has ${count} webhook endpoints receiving ${environment}'s events, the most allowed (UGS_WEBHOOK_MAX_ENDPOINTS=${max}): delete one before adding another`,
      );
  }
}

/** Creates an endpoint of an account (in `visible.environment`, if any); the secret is in this answer only. */
export async function createEndpoint(
  deps: WebhookDeps,
  visible: repository.VisibleEndpoints,
  input: CreateEndpointInput,
  actor: Actor,
  now: Date,
): Promise<{ endpoint: WebhookEndpointRow; secret: string }> {
  checkEndpointUrl(input.url, deps.allowPrivate);
  const secret = generateWebhookSecret();
  const endpoint = await inTransaction(deps.database, async (trx) => {
    await refuseBeyondCap(trx, visible, deps.maxEndpoints);
    const created = await repository.insertEndpoint(trx, {
      account_id: visible.accountId,
      url: input.url,
      types: input.types === null ? null : JSON.stringify(input.types),
      description: input.description,
      environment: visible.environment,
      secret_sealed: deps.keyring.seal(secret, 'webhook-secret'),
      created_at: now.toISOString(),
      cursor_seq: await lastEventSeq(trx, visible.accountId),
    });
    await auditEndpoint(trx, created, 'webhook_endpoint.create', actor, now);
    return created;
  });
  return { endpoint, secret };
}

export function createEndpointAs(deps: WebhookDeps, principal: Principal, input: CreateEndpointInput, actor: Actor, now: Date) {
  return createEndpoint(deps, visibleTo(principal), input, actor, now);
}

export function listEndpointsAs(database: DatabaseHandle, principal: Principal): Promise<WebhookEndpointRow[]> {
  return repository.listEndpoints(database.db, visibleTo(principal));
}

export function listEndpointsOf(database: DatabaseHandle, accountId: number): Promise<WebhookEndpointRow[]> {
  return repository.listEndpoints(database.db, { accountId, environment: null });
}

/** Deletes an endpoint, its deliveries and their attempts: nothing more is sent to it. */
export async function deleteEndpointIn(
  database: DatabaseHandle,
  visible: repository.VisibleEndpoints,
  id: number,
  actor: Actor,
  now: Date,
): Promise<WebhookEndpointRow> {
  return inTransaction(database, async (trx) => {
    const endpoint = await repository.findEndpoint(trx, visible, id);
    if (!endpoint || !(await repository.deleteEndpoint(trx, visible, id))) throw notFound(id);
    await auditEndpoint(trx, endpoint, 'webhook_endpoint.delete', actor, now);
    return endpoint;
  });
}

export function deleteEndpointAs(database: DatabaseHandle, principal: Principal, id: number, actor: Actor, now: Date): Promise<WebhookEndpointRow> {
  return deleteEndpointIn(database, visibleTo(principal), id, actor, now);
}

/** A new secret, shown once; the current one goes on signing beside it for 24 h. */
export async function rotateSecretAs(
  deps: WebhookDeps,
  principal: Principal,
  id: number,
  actor: Actor,
  now: Date,
): Promise<{ endpoint: WebhookEndpointRow; secret: string }> {
  const visible = visibleTo(principal);
  const secret = generateWebhookSecret();
  const endpoint = await inTransaction(deps.database, async (trx) => {
    const current = await repository.findEndpoint(trx, visible, id);
    if (!current) throw notFound(id);
    const rotated = await repository.replaceSecret(trx, visible, id, {
      secret_sealed: deps.keyring.seal(secret, 'webhook-secret'),
      previous_secret_sealed: current.secret_sealed,
      previous_secret_expires_at: new Date(now.getTime() + PREVIOUS_SECRET_MS).toISOString(),
    });
    if (rotated) await auditEndpoint(trx, rotated, 'webhook_endpoint.rotate_secret', actor, now);
    return rotated;
  });
  if (!endpoint) throw notFound(id);
  return { endpoint, secret };
}

/**
 * Enables an endpoint that was disabled after 3 days of failures: the deliveries still pending
 * are sent again at once, then the events made before it was disabled, and the 3 days count
 * from its next failure. The events made while it was disabled are not for it (the feed has
 * them). An enabled endpoint is answered as it is.
 */
export async function enableEndpointIn(
  database: DatabaseHandle,
  visible: repository.VisibleEndpoints,
  id: number,
  actor: Actor,
  now: Date,
): Promise<WebhookEndpointRow> {
  return inTransaction(database, async (trx) => {
    const current = await repository.findEndpoint(trx, visible, id);
    if (!current) throw notFound(id);
    if (current.disabled_at === null) return current;
    const skipped = skippedAfterEnabling(current.skipped_seqs, await lastEventSeq(trx, visible.accountId));
    const enabled = await repository.enableEndpoint(trx, visible, id, now.toISOString(), skipped);
    if (!enabled) return current;
    await auditEndpoint(trx, enabled, 'webhook_endpoint.enable', actor, now);
    return enabled;
  });
}

export function enableEndpointAs(database: DatabaseHandle, principal: Principal, id: number, actor: Actor, now: Date): Promise<WebhookEndpointRow> {
  return enableEndpointIn(database, visibleTo(principal), id, actor, now);
}

export interface DeliveryWithAttempts {
  delivery: WebhookDeliveryRow;
  attempts: WebhookAttemptRow[];
}

export async function deliveriesAs(
  database: DatabaseHandle,
  principal: Principal,
  id: number,
  limit: number,
): Promise<{ endpoint: WebhookEndpointRow; deliveries: DeliveryWithAttempts[] }> {
  const visible = visibleTo(principal);
  const endpoint = await repository.findEndpoint(database.db, visible, id);
  if (!endpoint) throw notFound(id);
  const deliveries = await repository.recentDeliveries(database.db, visible, id, limit);
  const attempts = await repository.attemptsOf(
    database.db,
    visible,
    id,
    deliveries.map((delivery) => Number(delivery.id)),
  );
  return {
    endpoint,
    deliveries: deliveries.map((delivery) => ({ delivery, attempts: attempts.filter((attempt) => Number(attempt.delivery_id) === Number(delivery.id)) })),
  };
}

/** How soon to try a test event again when its account's webhook requests are all in flight. */
const BUSY_RETRY_AFTER_S = 5;

/**
 * Sends one `webhook_endpoint.test` event now, once, and answers how it went. It is not in the
 * feed and not retried; a disabled endpoint may be tested (to see that it works again). It
 * takes a slot of the account's like a delivery, one test at a time per endpoint
 * (webhook-traffic.ts): an admin cannot open more requests to hanging receivers than the
 * dispatcher would.
 */
export async function sendTestEventAs(
  deps: WebhookDeps & { traffic: WebhookTraffic },
  principal: Principal,
  id: number,
  accountSlug: string,
  now: Date,
): Promise<{ outcome: AttemptOutcome; attemptedAt: Date }> {
  const visible = visibleTo(principal);
  const endpoint = await repository.findEndpoint(deps.database.db, visible, id);
  if (!endpoint) throw notFound(id);
  const event = {
    id: 0,
    type: 'webhook_endpoint.test',
    occurred_at: now.toISOString(),
    account: accountSlug,
    data: { webhook_endpoint_id: Number(endpoint.id) },
  };
  const release = deps.traffic.takeForTest(visible.accountId, Number(endpoint.id));
  if (!release) {
    throw new AppError(
      'webhook_endpoint_busy',
      `this endpoint has a test event in flight, or this account has ${deps.traffic.limits.perAccount} webhook requests in flight on this instance (UGS_WEBHOOK_ACCOUNT_CONCURRENCY): try again when they end`,
      { headers: { 'retry-after': String(BUSY_RETRY_AFTER_S) } },
    );
  }
  try {
    const outcome = await sendWebhook(
      {
        url: endpoint.url,
        id: webhookIdOf(visible.accountId, `test_${crypto.randomBytes(6).toString('hex')}`),
        body: JSON.stringify(event),
        secrets: secretsThatSign(deps.keyring, endpoint, now),
        now,
      },
      { allowPrivate: deps.allowPrivate, agent: (protocol) => deps.traffic.agentFor(Number(endpoint.id), protocol) },
    );
    return { outcome, attemptedAt: now };
  } finally {
    release();
  }
}
