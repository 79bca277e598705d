// How a request names a tag of the tenant's set (docs/api.md, "Tags"). A tag is stored in NFC
// (normalizeTag). A request that names a tag to find it gets the tag spelled as it wrote it
// when the set has one, else its NFC form: a tag stored before tags were normalized can still
// be found, renamed and deleted.
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { Tenant } from '../db/tenant.ts';
import { normalizeTag } from './group-fields.ts';

async function tagInSet(db: Kysely<Database>, tenant: Tenant, name: string): Promise<boolean> {
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
