// The viewer of an embed token (docs/api.md, "The viewer"): the person, within the user
// group, that the caller's backend names when it mints the token. The token carries the
// viewer as its `ugs_viewer` claim; the variables gain `viewer_id` and the viewer's
// attributes over the group's computed properties. A token without a viewer never reaches
// this module: its path is the one it always was.
import type { UserGroupRow } from '../db/schema.ts';
import type { EmbedViewerClaim } from './embed.schemas.ts';

/** The variables no property or attribute can replace. */
const VIEWER_BUILT_INS = new Set(['user_group_id', 'user_group_name', 'viewer_id']);

/** The claim for a validated request's viewer: its fields in one order, absent ones left out. */
export function viewerClaim(viewer: EmbedViewerClaim): EmbedViewerClaim {
  const claim: EmbedViewerClaim = { id: viewer.id };
  if (viewer.email !== undefined) claim.email = viewer.email;
  if (viewer.name !== undefined) claim.name = viewer.name;
  if (viewer.time_zone !== undefined) claim.time_zone = viewer.time_zone;
  if (viewer.permissions !== undefined) claim.permissions = viewer.permissions;
  if (viewer.attributes !== undefined) claim.attributes = viewer.attributes;
  return claim;
}

/**
 * Whether a verified token's `ugs_viewer` has the shape the service issues. Only a signing key
 * of the service could have signed it, so this guards the code that reads it, not the service
 * against forgery: a token with any other shape is refused like a malformed one.
 */
export function isViewerClaim(value: unknown): value is EmbedViewerClaim {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const { id, attributes } = value as Record<string, unknown>;
  return typeof id === 'string' && (attributes === undefined || (attributes !== null && typeof attributes === 'object' && !Array.isArray(attributes)));
}

/**
 * The dashboard variables of a group seen by a viewer: `user_group_id`, `user_group_name`,
 * `viewer_id`, then the group's computed properties with the viewer's attributes over them.
 * The three built-ins win every clash.
 */
export function viewerVariables(
  { row, computedProperties }: { row: Pick<UserGroupRow, 'provided_id' | 'name'>; computedProperties: string | null },
  viewer: EmbedViewerClaim,
): Record<string, unknown> {
  // No prototype: a key such as __proto__ is data, never a setter.
  const variables = Object.create(null) as Record<string, unknown>;
  variables.user_group_id = row.provided_id;
  variables.user_group_name = row.name;
  variables.viewer_id = viewer.id;
  if (computedProperties !== null) addOver(variables, JSON.parse(computedProperties) as Record<string, unknown>);
  if (viewer.attributes !== undefined) addOver(variables, viewer.attributes);
  return variables;
}

function addOver(variables: Record<string, unknown>, values: Record<string, unknown>): void {
  for (const key of Object.keys(values)) if (!VIEWER_BUILT_INS.has(key)) variables[key] = values[key];
}
