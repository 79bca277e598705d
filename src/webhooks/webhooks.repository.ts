// The SQL of webhooks (docs/api.md, "Webhooks"). A request's statements name the caller's
// account, and the environment an admin token is restricted to (VisibleEndpoints); the
// dispatcher's background statements go by an endpoint's or a delivery's key.
import type { Kysely } from 'kysely';
import { sql } from '../db/kysely.ts';
import { dialectOf } from '../db/database.ts';
import type { Database, Environment, EventRow, WebhookAttemptRow, WebhookDeliveryRow, WebhookEndpointRow } from '../db/schema.ts';

/** The endpoints a caller may see: its account's, and only its environment's when its token is restricted. */
export interface VisibleEndpoints {
  accountId: number;
  environment: Environment | null;
}

const ENDPOINTS_LOCK_CLASS = 726_415_009; // arbitrary, fixed: "ugs webhook endpoints of an account"

/**
 * Serializes the creations of an account's endpoints, so that two at once cannot both pass the
 * cap: PostgreSQL takes a transaction advisory lock per account; SQLite's write lock already is one.
 */
export async function lockAccountEndpoints(trx: Kysely<Database>, accountId: number): Promise<void> {
  if (dialectOf(trx) === 'postgres') await sql`select pg_advisory_xact_lock(${sql.lit(ENDPOINTS_LOCK_CLASS)}, hashtext(${String(accountId)}))`.execute(trx);
}

/** How many of an account's endpoints receive each of these environments' events: its own, and those of no environment (every event). */
export async function endpointsReceiving(trx: Kysely<Database>, accountId: number, environments: readonly Environment[]): Promise<Map<Environment, number>> {
  const rows = await trx
    .selectFrom('webhook_endpoints')
    .select(['environment', (eb) => eb.fn.countAll<number | string>().as('endpoints')])
    .where('account_id', '=', accountId)
    .where((eb) =>
      eb.or([environments.length === 1 ? eb('environment', '=', environments[0]) : eb('environment', 'in', environments), eb('environment', 'is', null)]),
    )
    .groupBy('environment')
    .execute();
  const unrestricted = Number(rows.find((row) => row.environment === null)?.endpoints ?? 0);
  return new Map(environments.map((environment) => [environment, unrestricted + Number(rows.find((row) => row.environment === environment)?.endpoints ?? 0)]));
}

export type NewEndpoint = Pick<
  WebhookEndpointRow,
  'account_id' | 'url' | 'types' | 'description' | 'environment' | 'secret_sealed' | 'created_at' | 'cursor_seq'
>;

export async function insertEndpoint(trx: Kysely<Database>, row: NewEndpoint): Promise<WebhookEndpointRow> {
  return trx.insertInto('webhook_endpoints').values(row).returningAll().executeTakeFirstOrThrow();
}

export function listEndpoints(db: Kysely<Database>, visible: VisibleEndpoints): Promise<WebhookEndpointRow[]> {
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('account_id', '=', visible.accountId)
    .$if(visible.environment !== null, (q) => q.where('environment', '=', visible.environment!))
    .orderBy('id')
    .execute();
}

export function findEndpoint(db: Kysely<Database>, visible: VisibleEndpoints, id: number): Promise<WebhookEndpointRow | undefined> {
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('account_id', '=', visible.accountId)
    .where('id', '=', id)
    .$if(visible.environment !== null, (q) => q.where('environment', '=', visible.environment!))
    .executeTakeFirst();
}

/**
 * The endpoint `id` if the caller sees it: deliveries and attempts have no environment of their
 * own, so every statement on them names it through their endpoint (docs/security.md, "Tenant
 * isolation").
 */
function visibleEndpoint(db: Kysely<Database>, visible: VisibleEndpoints, id: number) {
  return db
    .selectFrom('webhook_endpoints')
    .select('id')
    .where('account_id', '=', visible.accountId)
    .where('id', '=', id)
    .$if(visible.environment !== null, (q) => q.where('environment', '=', visible.environment!));
}

/** The deliveries of the endpoint `id`, if the caller sees it. */
function visibleDeliveries(db: Kysely<Database>, visible: VisibleEndpoints, id: number) {
  return db
    .selectFrom('webhook_deliveries')
    .select('id')
    .where('account_id', '=', visible.accountId)
    .where('endpoint_id', 'in', visibleEndpoint(db, visible, id));
}

/** Deletes an endpoint with its deliveries and their attempts; false if the caller sees none by that id. */
export async function deleteEndpoint(trx: Kysely<Database>, visible: VisibleEndpoints, id: number): Promise<boolean> {
  if (!(await findEndpoint(trx, visible, id))) return false;
  await trx
    .deleteFrom('webhook_attempts')
    .where('account_id', '=', visible.accountId)
    .where('delivery_id', 'in', visibleDeliveries(trx, visible, id))
    .execute();
  await trx
    .deleteFrom('webhook_deliveries')
    .where('account_id', '=', visible.accountId)
    .where('endpoint_id', 'in', visibleEndpoint(trx, visible, id))
    .execute();
  await trx
    .deleteFrom('webhook_endpoints')
    .where('account_id', '=', visible.accountId)
    .where('id', '=', id)
    .$if(visible.environment !== null, (q) => q.where('environment', '=', visible.environment!))
    .execute();
  return true;
}

export async function replaceSecret(
  trx: Kysely<Database>,
  visible: VisibleEndpoints,
  id: number,
  secrets: { secret_sealed: string; previous_secret_sealed: string; previous_secret_expires_at: string },
): Promise<WebhookEndpointRow | undefined> {
  return trx
    .updateTable('webhook_endpoints')
    .set(secrets)
    .where('account_id', '=', visible.accountId)
    .where('id', '=', id)
    .$if(visible.environment !== null, (q) => q.where('environment', '=', visible.environment!))
    .returningAll()
    .executeTakeFirst();
}

/**
 * Enables a disabled endpoint: its failing clock starts again, its deliveries are due now, and
 * the events made while it was disabled are skipped (`skippedSeqs`). An enabled endpoint is not
 * changed (undefined).
 */
export function enableEndpoint(
  trx: Kysely<Database>,
  visible: VisibleEndpoints,
  id: number,
  now: string,
  skippedSeqs: string | null,
): Promise<WebhookEndpointRow | undefined> {
  return trx
    .updateTable('webhook_endpoints')
    .set({ disabled_at: null, failing_since: null, next_attempt_at: now, skipped_seqs: skippedSeqs })
    .where('account_id', '=', visible.accountId)
    .where('id', '=', id)
    .$if(visible.environment !== null, (q) => q.where('environment', '=', visible.environment!))
    .where('disabled_at', 'is not', null)
    .returningAll()
    .executeTakeFirst();
}

/** An endpoint's latest deliveries, newest first. */
export function recentDeliveries(db: Kysely<Database>, visible: VisibleEndpoints, endpointId: number, limit: number): Promise<WebhookDeliveryRow[]> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('account_id', '=', visible.accountId)
    .where('endpoint_id', 'in', visibleEndpoint(db, visible, endpointId))
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
}

/** The attempts of these deliveries of the endpoint `endpointId`, oldest first. */
export function attemptsOf(db: Kysely<Database>, visible: VisibleEndpoints, endpointId: number, deliveryIds: number[]): Promise<WebhookAttemptRow[]> {
  if (deliveryIds.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where('account_id', '=', visible.accountId)
    .where('delivery_id', 'in', deliveryIds)
    .where('delivery_id', 'in', visibleDeliveries(db, visible, endpointId))
    .orderBy('id')
    .execute();
}

// ---- the dispatcher ----

/**
 * Endpoints whose next delivery is due and that no live instance works on, longest due first,
 * at most `perAccount` of one account and none of `skipAccounts` (those this instance has as
 * many of as it may): one account's many due endpoints never fill the list another's are in.
 * An endpoint leased by `owner` (this instance) but not among those it is `working` on had its
 * lease left behind by a release that failed: its owner takes it back at once, never waiting
 * for the lease to run out.
 */
export async function dueEndpoints(
  db: Kysely<Database>,
  due: { now: string; perAccount: number; skipAccounts: readonly number[]; limit: number; owner: string; working: readonly number[] },
): Promise<{ id: number; account_id: number }[]> {
  const skip = due.skipAccounts.length === 0 ? sql`` : sql`and account_id not in (${sql.join(due.skipAccounts)})`;
  const working = due.working.length === 0 ? sql`` : sql`and id not in (${sql.join(due.working)})`;
  const { rows } = await sql<{ id: number | string; account_id: number | string }>`select id, account_id from (
      select id, account_id, next_attempt_at, row_number() over (partition by account_id order by next_attempt_at, id) as place
      from webhook_endpoints
      where next_attempt_at <= ${due.now} and disabled_at is null
        and (lease_until is null or lease_until < ${due.now} or lease_owner = ${due.owner}) ${skip} ${working}
    ) due where place <= ${due.perAccount} order by next_attempt_at, id limit ${due.limit}`.execute(db);
  return rows.map((row) => ({ id: Number(row.id), account_id: Number(row.account_id) }));
}

/** Compare-and-swap: takes the endpoint if no other owner's live lease holds it; true if `owner` now does. */
export async function claimEndpoint(db: Kysely<Database>, id: number, owner: string, now: string, until: string): Promise<boolean> {
  const result = await db
    .updateTable('webhook_endpoints')
    .set({ lease_owner: owner, lease_until: until })
    .where('id', '=', id)
    .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', now), eb('lease_owner', '=', owner)]))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Extends this instance's lease; false if it was lost (expired and taken, or the endpoint deleted). */
export async function renewLease(db: Kysely<Database>, id: number, owner: string, until: string): Promise<boolean> {
  const result = await db.updateTable('webhook_endpoints').set({ lease_until: until }).where('id', '=', id).where('lease_owner', '=', owner).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function releaseLease(db: Kysely<Database>, id: number, owner: string, nextAttemptAt?: string): Promise<void> {
  await db
    .updateTable('webhook_endpoints')
    .set({ lease_owner: null, lease_until: null, ...(nextAttemptAt === undefined ? {} : { next_attempt_at: nextAttemptAt }) })
    .where('id', '=', id)
    .where('lease_owner', '=', owner)
    .execute();
}

export function endpointById(db: Kysely<Database>, id: number): Promise<WebhookEndpointRow | undefined> {
  return db.selectFrom('webhook_endpoints').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The endpoint's oldest pending deliveries, in the order they go (head of line first). */
export function headDeliveries(db: Kysely<Database>, endpointId: number, limit: number): Promise<WebhookDeliveryRow[]> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('endpoint_id', '=', endpointId)
    .where('status', '=', 'pending')
    .orderBy('event_seq')
    .limit(limit)
    .execute();
}

/** An account's events by seq (those retention has not removed). */
export async function eventsOf(db: Kysely<Database>, accountId: number, seqs: readonly number[]): Promise<Map<number, EventRow>> {
  if (seqs.length === 0) return new Map();
  const rows = await db.selectFrom('events').selectAll().where('account_id', '=', accountId).where('seq', 'in', seqs).execute();
  return new Map(rows.map((row) => [Number(row.seq), row]));
}

/** A batch's attempts, in one statement (7 parameters a row; a batch is at most 100). */
export async function recordAttempts(trx: Kysely<Database>, attempts: Omit<WebhookAttemptRow, 'id'>[]): Promise<void> {
  if (attempts.length > 0) await trx.insertInto('webhook_attempts').values(attempts).execute();
}

/** Deliveries whose one more attempt succeeded, in one statement. */
export async function markDelivered(trx: Kysely<Database>, ids: number[], at: string): Promise<void> {
  if (ids.length === 0) return;
  await trx
    .updateTable('webhook_deliveries')
    .set((eb) => ({ status: 'delivered', attempts: eb('attempts', '+', 1), finished_at: at }))
    .where('id', 'in', ids)
    .execute();
}

export async function updateDelivery(
  trx: Kysely<Database>,
  id: number,
  changes: Partial<Pick<WebhookDeliveryRow, 'status' | 'attempts' | 'next_attempt_at' | 'finished_at'>>,
): Promise<void> {
  await trx.updateTable('webhook_deliveries').set(changes).where('id', '=', id).execute();
}

export async function updateEndpointHealth(
  trx: Kysely<Database>,
  id: number,
  changes: Partial<Pick<WebhookEndpointRow, 'failing_since' | 'disabled_at' | 'next_attempt_at' | 'skipped_seqs'>>,
): Promise<void> {
  await trx.updateTable('webhook_endpoints').set(changes).where('id', '=', id).execute();
}

/** Removes up to `limit` finished deliveries made before `cutoff`, with their attempts; how many went. */
export async function pruneDeliveries(trx: Kysely<Database>, cutoff: string, limit: number): Promise<number> {
  const rows = await trx
    .selectFrom('webhook_deliveries')
    .select('id')
    .where('status', 'in', ['delivered', 'failed'])
    .where('created_at', '<', cutoff)
    .limit(limit)
    .execute();
  const ids = rows.map((row) => Number(row.id));
  if (ids.length === 0) return 0;
  await trx.deleteFrom('webhook_attempts').where('delivery_id', 'in', ids).execute();
  await trx.deleteFrom('webhook_deliveries').where('id', 'in', ids).execute();
  return ids.length;
}
