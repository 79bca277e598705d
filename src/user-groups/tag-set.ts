// A tenant's tag set as every write sees it (docs/api.md, "Tags"): a tag joins it when a write
// gives it to a group or creates it, and the set holds at most UGS_MAX_TAGS_PER_ENVIRONMENT
// tags. Each write that adds to it holds the tenant's lock (hierarchy.repository.ts), so the
// count it makes after its insert sees every other write's committed tags and no other write
// adds one meanwhile: the bound holds across processes. A write that would pass it throws
// `tag_limit_reached` and its transaction changes nothing.
//
// A tag is stored in NFC (normalizeTag). A request that names a tag to find it gets the tag
// spelled as it wrote it when the set has one, else its NFC form: a tag stored before tags
// were normalized can still be found, renamed and deleted.
import type { Kysely } from 'kysely';
import { sql } from '../db/kysely.ts';
import type { Database, Environment } from '../db/schema.ts';
import { scopeOf, type Tenant } from '../db/tenant.ts';
import { AppError } from '../foundations/errors.ts';
import { normalizeTag } from './declared-fields.ts';

export interface TagBound {
  /** UGS_MAX_TAGS_PER_ENVIRONMENT. */
  maxTagsPerEnvironment: number;
  /** A tag the write takes out of the set before it ends (a rename's old name): the new name counts in its place. */
  leaving?: string;
}

/**
 * Adds tags to their tenants' tag sets; a tag already there stays as it is. Every write that
 * gives a group a tag calls it in its transaction, under the lock above, so that a tag some
 * group carries is always in the set. Throws `tag_limit_reached` when a set that grew holds
 * more tags than the bound.
 */
export async function addToTagSets(trx: Kysely<Database>, entries: readonly { tenant: Tenant; tags: readonly string[] }[], bound: TagBound): Promise<void> {
  const rows = new Map<string, { account_id: number; environment: Environment; name: string }>();
  for (const { tenant, tags } of entries) {
    for (const name of tags) rows.set(`${scopeOf(tenant)}/${name}`, { account_id: tenant.accountId, environment: tenant.environment, name });
  }
  const values = [...rows.values()];
  const grown = new Map<string, Tenant>();
  for (let start = 0; start < values.length; start += 1000) {
    const inserted = await trx
      .insertInto('group_tag_set')
      .values(values.slice(start, start + 1000))
      .onConflict((conflict) => conflict.doNothing())
      .returning(['account_id', 'environment'])
      .execute();
    for (const row of inserted) {
      const tenant = { accountId: Number(row.account_id), environment: row.environment };
      grown.set(scopeOf(tenant), tenant);
    }
  }
  for (const tenant of grown.values()) await checkTagBound(trx, tenant, bound);
}

/** Throws `tag_limit_reached` when the tenant's set holds more tags than the bound allows. */
export async function checkTagBound(trx: Kysely<Database>, tenant: Tenant, bound: TagBound): Promise<void> {
  const max = bound.maxTagsPerEnvironment;
  const leaving = bound.leaving !== undefined && (await tagInSet(trx, tenant, bound.leaving)) ? 1 : 0;
  if ((await tagSetSize(trx, tenant, max + leaving + 1)) - leaving <= max) return;
  throw new AppError(
    'tag_limit_reached',
    `${tenant.environment} has ${max} tags, the most an environment may have (UGS_MAX_TAGS_PER_ENVIRONMENT=${max}): nothing was changed; give groups tags it has, or delete tags no longer needed (DELETE /api/group_tags)`,
  );
}

/** How many tags the tenant's set holds, counted up to `upTo` at most: one range of its key, never longer than the bound. */
async function tagSetSize(trx: Kysely<Database>, tenant: Tenant, upTo: number): Promise<number> {
  const counted = trx
    .selectFrom('group_tag_set')
    .select(sql<number>`1`.as('one'))
    .where('account_id', '=', tenant.accountId)
    .where('environment', '=', tenant.environment)
    .limit(upTo)
    .as('counted');
  const row = await trx.selectFrom(counted).select(sql<number | string>`count(*)`.as('size')).executeTakeFirstOrThrow();
  return Number(row.size);
}

/** Whether the tenant's set of tags has `name`, written exactly so. */
export async function tagInSet(db: Kysely<Database>, tenant: Tenant, name: string): Promise<boolean> {
  const row = await db
    .selectFrom('group_tag_set')
    .select('name')
    .where('account_id', '=', tenant.accountId)
    .where('environment', '=', tenant.environment)
    .where('name', '=', name)
    .executeTakeFirst();
  return row !== undefined;
}

/** The tag a request names to find it: as written when the set has it so, else in NFC (how every tag is written now). */
export async function tagNamed(db: Kysely<Database>, tenant: Tenant, written: string): Promise<string> {
  const normalized = normalizeTag(written);
  if (normalized === written || !(await tagInSet(db, tenant, written))) return normalized;
  return written;
}
