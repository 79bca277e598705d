// The viewer of an embed token (docs/api.md, "The viewer"): the person, within the user
// group, that the caller's backend names when it mints the token. The token carries the
// viewer as its `ugs_viewer` claim; the variables gain `viewer_id` and, in a namespace of
// their own, `viewer_attributes`. The viewer's attributes never replace a property of the
// group: a token with only the `read` scope may name a viewer, and what it signs must never
// look like a value the group was given by a token with `write`. A token without a viewer
// never reaches this module: its path is the one it always was.
import type { UserGroupRow } from '../db/schema.ts';
import type { EmbedViewerClaim } from './embed.schemas.ts';

/** The variables of a viewer's token that the service sets: no property can replace them. */
const VIEWER_BUILT_INS = new Set(['user_group_id', 'user_group_name', 'viewer_id', 'viewer_attributes']);
/** The claims every embed token carries (RFC 7519 §4.1). */
const REGISTERED_CLAIMS = ['iss', 'sub', 'aud', 'exp', 'nbf', 'iat', 'jti'];
/** Names the service uses, in the claims or the variables, compared in lower case; and every `ugs_` name. */
const RESERVED_ATTRIBUTE_KEYS = new Set([...REGISTERED_CLAIMS, ...VIEWER_BUILT_INS]);
const SERVICE_PREFIX = 'ugs_';

/**
 * The keys of a viewer's attributes that are names the service uses (docs/api.md, "The
 * viewer"), in any case: a verifier or a policy that reads an attribute of such a name beside
 * the claims could take it for the service's own.
 */
export function reservedAttributeKeys(attributes: Record<string, unknown>): string[] {
  return Object.keys(attributes).filter((key) => {
    const lower = key.toLowerCase();
    return lower.startsWith(SERVICE_PREFIX) || RESERVED_ATTRIBUTE_KEYS.has(lower);
  });
}

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
 * `viewer_id`, `viewer_attributes` (when the viewer has attributes), then the group's computed
 * properties. The built-ins win every clash; an attribute never replaces a property.
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
  if (viewer.attributes !== undefined) variables.viewer_attributes = viewer.attributes;
  if (computedProperties === null) return variables;
  const properties = JSON.parse(computedProperties) as Record<string, unknown>;
  for (const key of Object.keys(properties)) if (!VIEWER_BUILT_INS.has(key)) variables[key] = properties[key];
  return variables;
}
