// The embed context, written straight from the stored row, as user group responses are
// (see user-groups.json.ts for why): mapping and properties are spliced in as stored, and so
// are the variables, whenever the computed properties cannot hold a key that clashes with a
// built-in. The output is what EmbedContextResponse describes; test/embed-context.json.test.ts
// holds it to the schema and to the clash rule.
import type { UserGroupRow } from '../db/schema.ts';
import type { EmbedGroup } from './embed.repository.ts';

const quote = JSON.stringify;
/** Stored text is JSON.stringify's, which never escapes these names: a key would appear literally. */
const MENTIONS_BUILT_IN = /"user_group_(?:id|name)"/;
const BUILT_INS = new Set(['user_group_id', 'user_group_name']);

/** `user_group_id` and `user_group_name`, then every top-level key of the computed properties; the built-ins win a clash. */
export function variablesJson({ row, computedProperties: properties }: { row: Pick<UserGroupRow, 'provided_id' | 'name'>; computedProperties: string | null }): string {
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

/** EmbedContextResponse: the group's public fields and its dashboard variables; never a token or an internal id. */
export function embedContextJson(group: EmbedGroup): string {
  const { row } = group;
  return (
    `{"success":1,"user_group":{"provided_id":${quote(row.provided_id)},"name":${quote(row.name)},` +
    `"api_environment_tag":${quote(row.environment)},"is_demo_group":${row.is_demo_group === 1},` +
    `"parent_user_group_id":${quote(group.parentId)},"hierarchy_level":${quote(row.hierarchy_level)},` +
    `"mapping":${row.mapping ?? 'null'},"properties":${row.properties ?? 'null'},` +
    `"computed_mapping":${group.computedMapping ?? 'null'},"computed_properties":${group.computedProperties ?? 'null'}},` +
    `"variables":${variablesJson(group)}}`
  );
}
