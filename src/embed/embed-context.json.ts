// The embed context, written straight from the stored row, by the writer user group responses
// use (user-groups.json.ts), from the EmbedUserGroup schema's fields: mapping and properties
// are spliced in as stored, and so are the variables, whenever the computed properties cannot
// hold a key that clashes with a built-in. The output is what EmbedContextResponse describes; test/embed-context.json.test.ts
// holds it to the schema and to the clash rule.
import type { UserGroupRow } from '../db/schema.ts';
import type { EmbedGroupRow } from './embed.repository.ts';
import type { ResolvedGroup } from '../user-groups/group-chain.ts';
import { groupWriter } from '../user-groups/user-groups.json.ts';
import { EmbedUserGroup, type EmbedViewerClaim } from './embed.schemas.ts';
import { viewerVariables } from './embed-viewer.ts';

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

/** A group as an embed token's viewer sees it: `viewer` is set only for a token issued with one. */
export type ViewedGroup = ResolvedGroup<EmbedGroupRow> & { viewer?: EmbedViewerClaim };

/**
 * EmbedContextResponse: the group's public fields (EmbedUserGroup), the viewer when the token
 * names one, and the dashboard variables; never a token or an internal id. Without a viewer,
 * the answer is what it was before viewers existed, byte for byte.
 */
export function embedContextJson(group: ViewedGroup): string {
  const { viewer } = group;
  if (viewer === undefined) return `{"success":1,"user_group":${embedUserGroupJson(group)},"variables":${variablesJson(group)}}`;
  return `{"success":1,"user_group":${embedUserGroupJson(group)},"viewer":${quote(viewer)},"variables":${quote(viewerVariables(group, viewer))}}`;
}
