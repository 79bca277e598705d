// The append-only history of changes. Entries are written in the same transaction as the
// change they describe, so a failed request leaves none; they never hold a token value.
// Each entry also writes the change's event to the outbox (outbox/outbox.ts): whatever is in
// the history is in the event feed, by construction (docs/architecture.md, "The path of a
// change").
import type { Kysely } from 'kysely';
import { sql } from '../db/kysely.ts';
import { multiRowInsert } from '../db/multi-row-insert.ts';
import { noteWrittenAccount } from '../db/transaction.ts';
import type { AuditLogRow, Database, Environment } from '../db/schema.ts';
import { groupWithId, ownedBy, ownedByAccount, type Tenant } from '../db/tenant.ts';
import { appendEvents, type ChangeEvent, type EventType } from '../outbox/outbox.ts';
import type { Actor } from './actor.ts';

export interface AuditEntry {
  accountId: number;
  subjectType: 'user_group' | 'api_token' | 'webhook_endpoint';
  subjectId: string | number;
  environment?: Environment | null;
  providedId?: string | null;
  action: AuditAction;
  /** A webhook endpoint's URL, its origin only (webhook-audit.ts): its path and query string may hold the receiver's credentials. */
  url?: string;
  /** A user group's token generation after the change (embed tokens carry it). */
  generation?: number;
  /** A rotation with a grace period: when the previous token stops working. */
  gracePeriodEndsAt?: Date;
  changedFields?: string[];
  details?: AuditDetails;
  actor: Actor;
  at: Date;
}

/** The old and new value of each id a change moved (rename, parent, tags); never a token. */
export type AuditDetails = Record<string, { old: unknown; new: unknown }>;

// Declared in actor.ts, which the command-line tool reads (it calls services, never a repository).
export { ACTOR_KINDS, COMMAND_LINE_ACTOR, FIRST_START_ACTOR, SERVICE_ACTOR, actorOfEntry, type Actor, type ActorKind } from './actor.ts';

/** What the history calls each change, and the type of its event. */
const EVENT_OF_ACTION = {
  'user_group.create': 'user_group.created',
  'user_group.update': 'user_group.updated',
  'user_group.rotate': 'user_group.token_rotated',
  'user_group.delete': 'user_group.deleted',
  'api_token.issue': 'api_token.created',
  'api_token.revoke': 'api_token.revoked',
  'webhook_endpoint.create': 'webhook_endpoint.created',
  'webhook_endpoint.rotate_secret': 'webhook_endpoint.secret_rotated',
  'webhook_endpoint.disable': 'webhook_endpoint.disabled',
  'webhook_endpoint.enable': 'webhook_endpoint.enabled',
  'webhook_endpoint.delete': 'webhook_endpoint.deleted',
} as const satisfies Record<string, EventType>;
export type AuditAction = keyof typeof EVENT_OF_ACTION;

/** Rows per insert statement (about 11 parameters each). */
const AUDIT_CHUNK = 200;

export async function appendAudit(db: Kysely<Database>, entry: AuditEntry): Promise<void> {
  await appendAudits(db, [entry]);
}

/** Several entries in as few statements as the parameter limits allow (a subtree deleted at once). */
export async function appendAudits(db: Kysely<Database>, entries: readonly AuditEntry[]): Promise<void> {
  // Every change of an account's rows writes its history here: its position is recorded after the commit.
  for (const entry of entries) noteWrittenAccount(entry.accountId);
  for (let start = 0; start < entries.length; start += AUDIT_CHUNK) {
    await insertAuditRows.run(db, entries.slice(start, start + AUDIT_CHUNK).map(auditRow));
  }
  await appendEvents(db, entries.map(changeEvent));
}

/** The event of a history entry (docs/api.md, "Change events"): the subject's identity and what changed. */
function changeEvent(entry: AuditEntry): ChangeEvent {
  const data = subjectData(entry);
  if (entry.changedFields) data.changed_fields = entry.changedFields;
  if (entry.details) data.changes = entry.details;
  if (entry.gracePeriodEndsAt) data.grace_period_ends_at = entry.gracePeriodEndsAt.toISOString();
  return { accountId: entry.accountId, environment: entry.environment ?? null, type: EVENT_OF_ACTION[entry.action], occurredAt: entry.at, data };
}

function subjectData(entry: AuditEntry): Record<string, unknown> {
  switch (entry.subjectType) {
    case 'user_group':
      return {
        team_id: Number(entry.subjectId),
        user_group_id: entry.providedId ?? null,
        api_environment_tag: entry.environment ?? null,
        generation: entry.generation ?? null,
      };
    case 'api_token':
      return { api_token_id: Number(entry.subjectId), allowed_environment: entry.environment ?? null };
    case 'webhook_endpoint':
      return { webhook_endpoint_id: Number(entry.subjectId), url: entry.url ?? null, environment: entry.environment ?? null };
  }
}

type AuditRow = ReturnType<typeof auditRow>;

const AUDIT_COLUMNS = [
  'account_id',
  'subject_type',
  'subject_id',
  'environment',
  'provided_id',
  'action',
  'changed_fields',
  'details',
  'actor_token_id',
  'actor',
  'request_id',
  'created_at',
] as const satisfies readonly (keyof AuditRow)[];

const insertAuditRows = multiRowInsert<AuditRow>(AUDIT_COLUMNS, (db, rows) => db.insertInto('audit_log').values(rows as unknown as AuditRow[]));

function auditRow(entry: AuditEntry) {
  return {
    account_id: entry.accountId,
    subject_type: entry.subjectType,
    subject_id: String(entry.subjectId),
    environment: entry.environment ?? null,
    provided_id: entry.providedId ?? null,
    action: entry.action,
    changed_fields: entry.changedFields ? JSON.stringify(entry.changedFields) : null,
    details: entry.details ? JSON.stringify(entry.details) : null,
    actor_token_id: entry.actor.tokenId,
    actor: entry.actor.kind,
    request_id: entry.actor.requestId,
    created_at: entry.at.toISOString(),
  };
}

/**
 * A group's history, newest first. A group that exists is followed by its team_id, so its
 * history survives a rename; a deleted one is found by the user_group_id it had.
 */
export async function userGroupHistory(db: Kysely<Database>, key: Tenant & { providedId: string }, limit: number): Promise<AuditLogRow[]> {
  const group = await db
    .selectFrom('user_groups')
    .select('team_id')
    .where(groupWithId('user_groups', key, key.providedId))
    .executeTakeFirst();
  if (group) {
    return db
      .selectFrom('audit_log')
      .selectAll()
      .where('subject_type', '=', 'user_group')
      .where('subject_id', '=', String(group.team_id))
      .where(ownedBy('audit_log', key))
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
  }
  return db
    .selectFrom('audit_log')
    .selectAll()
    .where('account_id', '=', key.accountId)
    .where('environment', '=', key.environment)
    .where('provided_id', '=', key.providedId)
    .where('subject_type', '=', 'user_group')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
}

export function accountHistory(db: Kysely<Database>, accountId: number, limit: number): Promise<AuditLogRow[]> {
  return db.selectFrom('audit_log').selectAll().where('account_id', '=', accountId).orderBy('id', 'desc').limit(limit).execute();
}

/**
 * The issues and revocations of an account's API tokens, newest first; with `environment`,
 * only of the tokens restricted to it. Found by the tokens' ids on the (subject_type,
 * subject_id) index: an account's group history may be millions of entries, its token
 * history a few.
 */
export function apiTokenHistory(db: Kysely<Database>, accountId: number, environment: Environment | null, limit: number): Promise<AuditLogRow[]> {
  const tokenIds = db
    .selectFrom('api_tokens')
    .select(sql<string>`cast(id as text)`.as('id'))
    .where('account_id', '=', accountId)
    .$if(environment !== null, (q) => q.where('allowed_environment', '=', environment!));
  return (
    db
      .selectFrom('audit_log')
      .selectAll()
      .where('subject_type', '=', 'api_token')
      .where('subject_id', 'in', tokenIds)
      // A filter on the entries the index found, never a range of the account's whole history.
      .where(ownedByAccount('audit_log', accountId))
      .$if(environment !== null, (q) => q.where('audit_log.environment', '=', environment!))
      .orderBy('id', 'desc')
      .limit(limit)
      .execute()
  );
}
