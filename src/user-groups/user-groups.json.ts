// Responses that carry user groups, written straight from the stored rows. mapping and
// properties are stored as the text JSON.stringify made of them, so parsing them only for
// a serializer to write the same text again was pure cost: measured at one connection, the
// parse, the view objects and the schema serializer took ~20 µs of a ~78 µs get-or-create
// hit (docs/performance.md). The output is what the response schemas in
// user-groups.schemas.ts describe, field for field and in their order; the schemas remain the
// reference (OpenAPI, types, the client) and test/user-groups.json.test.ts holds this file to
// them.
import type { UserGroupRow } from '../db/schema.ts';
import type { ResolvedGroup } from './group-chain.ts';

/** The stored fields a response shows: never the token hash, the ciphertext or the account. */
export type StoredUserGroup = Pick<
  UserGroupRow,
  | 'team_id'
  | 'name'
  | 'provided_id'
  | 'parent_team_id'
  | 'hierarchy_level'
  | 'group_tags'
  | 'mapping'
  | 'properties'
  | 'environment'
  | 'is_demo_group'
  | 'created_at'
  | 'updated_at'
>;

/** A group as responses show it: its row, its parent's id and its computed fields (group-chain.ts). */
export type ShownUserGroup = ResolvedGroup<StoredUserGroup>;

/** A group and its plaintext token, for the responses that hand the token out. */
export type UserGroupWithToken = ShownUserGroup & { token: string };

const quote = JSON.stringify;

function fieldsAfterToken({ row, parentId, computedMapping, computedProperties }: ShownUserGroup): string {
  return (
    `"name":${quote(row.name)},"provided_id":${quote(row.provided_id)},` +
    `"parent_user_group_id":${quote(parentId)},"hierarchy_level":${quote(row.hierarchy_level)},"group_tags":${row.group_tags},` +
    `"mapping":${row.mapping ?? 'null'},"properties":${row.properties ?? 'null'},` +
    `"computed_mapping":${computedMapping ?? 'null'},"computed_properties":${computedProperties ?? 'null'},` +
    `"api_environment_tag":${quote(row.environment)},"is_demo_group":${row.is_demo_group === 1},` +
    `"created_at":${quote(row.created_at)},"updated_at":${quote(row.updated_at)}}`
  );
}

/** The UserGroup schema: a group and its token. */
export function userGroupJson(group: UserGroupWithToken): string {
  return `{"team_id":${group.row.team_id},"token":${quote(group.token)},${fieldsAfterToken(group)}`;
}

/** The UserGroupPublic schema: a group without its token. */
export function publicUserGroupJson(group: ShownUserGroup): string {
  return `{"team_id":${group.row.team_id},${fieldsAfterToken(group)}`;
}

/** UserGroupResponse (create, rotate, update). */
export function userGroupResponseJson(group: UserGroupWithToken): string {
  return `{"success":1,"user_group":${userGroupJson(group)}}`;
}

/** GetOrCreateResponse. */
export function getOrCreateResponseJson(created: boolean, group: UserGroupWithToken): string {
  return `{"success":1,"new_user_group":${created},"user_group":${userGroupJson(group)}}`;
}

/** DeletedResponse. */
export function deletedResponseJson(group: ShownUserGroup, deletedCount: number): string {
  return `{"success":1,"user_group":${publicUserGroupJson(group)},"deleted_count":${deletedCount}}`;
}

/** ListResponse. */
export function listResponseJson(groups: ShownUserGroup[], nextCursor: string | null): string {
  return `{"success":1,"user_groups":[${groups.map(publicUserGroupJson).join(',')}],"next_cursor":${quote(nextCursor)}}`;
}
