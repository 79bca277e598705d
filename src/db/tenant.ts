// Whose rows a statement may touch (docs/security.md, "Tenant isolation"). Every statement on
// a tenant's rows names its account, and its environment, as explicit conditions, whatever
// index range it also uses: an index range is an optimisation, and an optimisation must
// never be what keeps one account from another's rows. test/tenant-isolation.test.ts
// captures every statement a workload of every operation sends and fails when one lacks
// them.
import { sql } from './kysely.ts';
import type { RawBuilder } from 'kysely';
import type { Environment } from './schema.ts';

/** An account, and the one environment of it that a statement works in. */
export interface Tenant {
  accountId: number;
  environment: Environment;
}

/**
 * The tenant's rows of `table` (or of its alias), as filters on the rows an index found:
 * `account_id + 0` is a value, not the column, so that no planner takes it for an index
 * condition and walks the identity index (account_id, environment, …) where another index
 * must drive, as it would without statistics (migration 0002). For statements whose index
 * leads with the account, write the plain condition instead (it is that index's range).
 */
export function ownedBy(table: string, tenant: Tenant): RawBuilder<boolean> {
  return sql<boolean>`(${sql.ref(`${table}.account_id`)} + 0 = ${tenant.accountId} and ${sql.ref(`${table}.environment`)} = ${tenant.environment})`;
}

/**
 * `alias` holds rows of the same tenant as `of`: for a join by primary key (a parent, a
 * recursive step). The key alone would find the row; the condition keeps a broken link from
 * crossing into another account. A filter, like ownedBy's: as an index condition it made
 * PostgreSQL walk the whole tenant for each parent.
 */
export function sameTenant(alias: string, of: string): RawBuilder<boolean> {
  return sql<boolean>`${sql.ref(`${alias}.account_id`)} + 0 = ${sql.ref(`${of}.account_id`)} and ${sql.ref(`${alias}.environment`)} = ${sql.ref(`${of}.environment`)}`;
}

/** The tenant as one text, `<account_id>/<environment>`: how the listing indexes and the tag table spell it (migrations 0002, 0003). */
export function scopeOf(tenant: Tenant): string {
  return `${tenant.accountId}/${tenant.environment}`;
}
