// The reads of `ugs export` (transfer.service.ts): a tenant's groups one depth at a time,
// each depth in team_id order, page by page (keyset), so that a parent is always written
// before its children and memory stays flat however many groups there are.
import { sql } from '../../db/kysely.ts';
import type { Kysely } from 'kysely';
import type { Database, UserGroupRow } from '../../db/schema.ts';
import { scopeOf, walkHeldToTenant, walkLimit, type Tenant } from '../../db/tenant.ts';
import { parentJoin, USER_GROUP_COLUMNS } from '../group-sql.ts';

/** What an exported line needs of a group: its columns but its token's, and its parent's user_group_id. */
export type ExportRow = Omit<UserGroupRow, 'token_hash' | 'token_ciphertext'> & { parent_provided_id: string | null };

/** Every column but the token's: a field added to the group is exported with no change here. */
const EXPORT_COLUMNS = USER_GROUP_COLUMNS.filter((column) => column !== 'token_hash' && column !== 'token_ciphertext');
/** What each step up the walk needs of a parent: its link, its tenant, and (the first step) its user_group_id. */
const PARENT_COLUMNS = ['team_id', 'provided_id', 'parent_team_id', 'account_id', 'environment'];

/** The listing index's expression (migration 0002): the walk is a range of it, in team_id order. */
const scope = sql<string>`(cast(user_groups.account_id as text) || '/' || user_groups.environment)`;

/**
 * A page of the tenant's groups at `depth` (0: the roots) in team_id order after
 * `afterTeamId`. A group's depth is found by walking up `depth` parents by primary key: the
 * group is at that depth when the last of them has no parent.
 */
export function exportPage(db: Kysely<Database>, tenant: Tenant, depth: number, afterTeamId: number, limit: number): Promise<ExportRow[]> {
  const aliases = Array.from({ length: Math.max(depth, 1) }, (_, i) => `p${i + 1}`);
  const joins = aliases.map((alias, i) =>
    parentJoin(db, { alias, child: i === 0 ? 'user_groups' : aliases[i - 1], columns: PARENT_COLUMNS, optional: depth === 0 }),
  );
  const top = depth === 0 ? sql`user_groups.parent_team_id is null` : sql`${sql.ref(`${aliases[depth - 1]}.parent_team_id`)} is null`;
  const columns = sql.join(EXPORT_COLUMNS.map((column) => sql.ref(`user_groups.${column}`)));
  return walkHeldToTenant(
    db,
    tenant,
    { table: 'user_groups', orderBy: 'team_id' },
    (tenantBesideRange) => sql<ExportRow>`select ${columns}, p1.provided_id as parent_provided_id from user_groups ${sql.join(joins, sql` `)}
      where ${scope} = ${scopeOf(tenant)} and ${tenantBesideRange}
        and user_groups.team_id > ${afterTeamId} and ${top}
      order by user_groups.team_id limit ${walkLimit(db, limit)}`,
  );
}
