// The listing (docs/api.md, "GET /api/users"): a page of the caller's groups, filtered, in
// team_id order, with an opaque cursor to the next page. Its reads are in list.repository.ts.
import type { Environment } from '../../db/schema.ts';
import type { Tenant } from '../../db/tenant.ts';
import { AppError } from '../../foundations/errors.ts';
import { resolveEnvironment, type Principal } from '../../auth/principal.ts';
import * as repository from './list.repository.ts';
import { findUserGroup } from '../user-groups.repository.ts';
import { tagNamed } from '../tag-set.ts';
import type { UserGroupDeps } from '../user-groups.service.ts';

interface ListInput {
  api_environment_tag?: Environment;
  limit?: number;
  cursor?: string;
  q?: string;
  parent_user_group_id?: string;
  tag?: string;
  hierarchy_level?: string;
}

export async function listUserGroupsPage(
  deps: Pick<UserGroupDeps, 'database'>,
  principal: Principal,
  query: ListInput,
): Promise<{ objects: string; nextCursor: string | null }> {
  const tenant: Tenant = { accountId: principal.accountId, environment: resolveEnvironment(principal, query.api_environment_tag) };
  const limit = query.limit ?? 100;
  const afterTeamId = query.cursor === undefined ? 0 : decodeCursor(query.cursor);
  let parentTeamId: number | undefined;
  if (query.parent_user_group_id !== undefined) {
    const parent = await findUserGroup(deps.database.reads, { ...tenant, providedId: query.parent_user_group_id });
    // No such group has no children: an empty page, as for any filter that matches nothing.
    if (!parent) return { objects: '', nextCursor: null };
    parentTeamId = parent.row.team_id;
  }
  // A tag in NFC unless the set has it as written (tag-set.ts): an NFC tag adds no statement.
  const tag = query.tag === undefined ? undefined : await tagNamed(deps.database.db, tenant, query.tag);
  const page = await repository.listUserGroups(deps.database.db, deps.database.reads, {
    ...tenant,
    afterTeamId,
    limit,
    prefix: query.q,
    parentTeamId,
    tag,
    level: query.hierarchy_level,
  });
  return { objects: page.objects, nextCursor: page.more && page.lastTeamId !== undefined ? encodeCursor(page.lastTeamId) : null };
}

function encodeCursor(teamId: number): string {
  return Buffer.from(JSON.stringify({ after: teamId })).toString('base64url');
}

function decodeCursor(cursor: string): number {
  try {
    const after = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')).after;
    if (Number.isSafeInteger(after) && after >= 0) return after;
  } catch {
    // fall through to the error below
  }
  throw new AppError('validation_failed', 'cursor is not one this service returned', { details: [{ field: 'cursor', issue: 'invalid' }] });
}
