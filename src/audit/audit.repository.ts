// The append-only history of changes. Entries are written in the same transaction as the
// change they describe, so a failed request leaves none; they never hold a token value.
import type { Kysely } from 'kysely';
import type { AuditLogRow, Database, Environment } from '../db/schema.ts';

export interface AuditEntry {
  accountId: number;
  subjectType: 'user_group' | 'api_token';
  subjectId: string | number;
  environment?: Environment | null;
  providedId?: string | null;
  action: string;
  changedFields?: string[];
  actorTokenId?: number | null;
  requestId?: string | null;
  at: Date;
}

/** Who acts: an API token during a request, or the command-line tool (no token). */
export interface Actor {
  tokenId: number | null;
  requestId: string | null;
}

export async function appendAudit(db: Kysely<Database>, entry: AuditEntry): Promise<void> {
  await db
    .insertInto('audit_log')
    .values({
      account_id: entry.accountId,
      subject_type: entry.subjectType,
      subject_id: String(entry.subjectId),
      environment: entry.environment ?? null,
      provided_id: entry.providedId ?? null,
      action: entry.action,
      changed_fields: entry.changedFields ? JSON.stringify(entry.changedFields) : null,
      actor_token_id: entry.actorTokenId ?? null,
      request_id: entry.requestId ?? null,
      created_at: entry.at.toISOString(),
    })
    .execute();
}

export function userGroupHistory(
  db: Kysely<Database>,
  key: { accountId: number; environment: Environment; providedId: string },
  limit: number,
): Promise<AuditLogRow[]> {
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
