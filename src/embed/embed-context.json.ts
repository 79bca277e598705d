// The embed context, written straight from the stored row, by the writer user group responses
// use (user-groups.json.ts), from the EmbedUserGroup schema's fields: mapping and properties
// are spliced in as stored, and so are the variables, whenever the computed properties cannot
// hold a key that clashes with a built-in. The output is what EmbedContextResponse describes; test/embed-context.json.test.ts
// holds it to the schema and to the clash rule.
import type { UserGroupRow } from '../db/schema.ts';
import type { EmbedGroupRow } from './embed.repository.ts';
import type { ResolvedGroup } from '../user-groups/group-chain.ts';
import { groupWriter } from '../user-groups/user-groups.json.ts';
import { EmbedUserGroup } from './embed.schemas.ts';

const quote = JSON.stringify;
/** Stored text is JSON.stringify's, which never escapes these names: a key would appear literally. */
const MENTIONS_BUILT_IN = /"user_group_(?:id|name)"/;
const BUILT_INS = new Set(['user_group_id', 'user_group_name']);

/** `user_group_id` and `user_group_name`, then every top-level key of the computed properties; the built-ins win a clash. */
export function variablesJson({
  row,
  computedProperties: properties,
}: {
  row: Pick<UserGroupRow, 'provided_id' | 'name'>;
  computedProperties: string | null;
}): string {
  const builtIns = `"user_group_id":${quote(row.provided_id)},"user_group_name":${quote(row.name)}`;
  if (properties === null || properties === '{}') return `{${builtIns}}`;
  if (!MENTIONS_BUILT_IN.test(properties)) return `{${builtIns},${properties.slice(1)}`;
  const variables: Record<string, unknown> = { user_group_id: row.provided_id, user_group_name: row.name };
  for (const [key, value] of Object.entries(JSON.parse(properties) as Record<string, unknown>)) {
    if (BUILT_INS.has(key)) continue;
    // defineProperty: a key is data, never a setter such as __proto__.
    Object.defineProperty(variables, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return quote(variables);
}

const embedUserGroupJson = groupWriter(EmbedUserGroup);

/** EmbedContextResponse: the group's public fields (EmbedUserGroup) and its dashboard variables; never a token or an internal id. */
export function embedContextJson(group: ResolvedGroup<EmbedGroupRow>): string {
  return `{"success":1,"user_group":${embedUserGroupJson(group)},"variables":${variablesJson(group)}}`;
}
