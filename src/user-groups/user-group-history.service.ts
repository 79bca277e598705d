// Reading a user group's history (docs/api.md, "GET /api/user/history").
import { resolveEnvironment, type Principal } from '../auth/principal.ts';
import { actorOfEntry, userGroupHistory, type AuditDetails } from '../audit/audit.repository.ts';
import type { Environment } from '../db/schema.ts';
import type { UserGroupDeps } from './user-groups.service.ts';

export async function userGroupHistoryEntries(
  deps: UserGroupDeps,
  principal: Principal,
  query: { user_group_id: string; api_environment_tag?: Environment; limit?: number },
) {
  const environment = resolveEnvironment(principal, query.api_environment_tag);
  const rows = await userGroupHistory(deps.database.db, { accountId: principal.accountId, environment, providedId: query.user_group_id }, query.limit ?? 100);
  return {
    provided_id: query.user_group_id,
    api_environment_tag: environment,
    entries: rows.map((row) => ({
      id: row.id,
      action: row.action,
      team_id: Number(row.subject_id),
      changed_fields: row.changed_fields === null ? null : (JSON.parse(row.changed_fields) as string[]),
      details: row.details === null ? null : (JSON.parse(row.details) as AuditDetails),
      actor: actorOfEntry(row),
      actor_token_id: row.actor_token_id,
      request_id: row.request_id,
      created_at: row.created_at,
    })),
  };
}
