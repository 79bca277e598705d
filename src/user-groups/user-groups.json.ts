// Responses that carry user groups, written straight from the stored rows: mapping and
// properties are stored as the text JSON.stringify made of them, so parsing them only for a
// serializer to write the same text again was the largest cost of a read (docs/performance.md).
//
// The writers are composed from the response schemas' field lists, in their order, so a field
// is declared once (user-groups.schemas.ts): a field that is its own column of text, number or
// null needs no code here; only the fields written otherwise are named below. A schema field
// with neither a writer nor a column fails at start. test/user-groups.json.test.ts holds the
// output to the schemas.
import type { UserGroupRow } from '../db/schema.ts';
import type { ChainRow, ResolvedGroup } from './group-chain.ts';
import { USER_GROUP_COLUMNS, type ListedRow } from './group-sql.ts';
import { UserGroup, UserGroupPublic } from './user-groups.schemas.ts';

/** A group and its plaintext token, for the responses that hand the token out. */
export type GroupWithToken = ResolvedGroup & { token: string };

/** What the writers read of a group: its row (all columns or some), its parent's id and, for answers, its computed fields. */
type Written = Pick<ResolvedGroup, 'parentProvidedId'> &
  Partial<Pick<ResolvedGroup, 'computedMapping' | 'computedProperties'>> & { row: Partial<UserGroupRow>; token?: string };
type FieldWriter = (group: Written) => string;

const quote = JSON.stringify;
const stored = (text: string | null | undefined) => text ?? 'null';

/** The response fields that are not their own column written as JSON. */
const WRITTEN_AS: Record<string, FieldWriter> = {
  token: (group) => quote(group.token),
  // The export's lines (transfer.service.ts) are items of the bulk upsert: the id as requests name it.
  user_group_id: (group) => quote(group.row.provided_id),
  parent_user_group_id: (group) => quote(group.parentProvidedId),
  group_tags: (group) => group.row.group_tags!, // stored as its JSON array
  mapping: (group) => stored(group.row.mapping),
  properties: (group) => stored(group.row.properties),
  computed_mapping: (group) => stored(group.computedMapping),
  computed_properties: (group) => stored(group.computedProperties),
  api_environment_tag: (group) => quote(group.row.environment),
  is_demo_group: (group) => String(group.row.is_demo_group === 1),
};

/** The fields written otherwise than as their column: user-groups.json-sql.ts must write each of them too. */
export const WRITTEN_FIELDS: readonly string[] = Object.keys(WRITTEN_AS);

/** A field that a group's chain decides, for a child's page object (user-groups.json-sql.ts writes a marker where it goes). */
export function resolvedFieldJson(field: 'parent_user_group_id' | 'computed_mapping' | 'computed_properties', group: ResolvedGroup<ChainRow>): string {
  return WRITTEN_AS[field](group);
}

const COLUMNS: ReadonlySet<string> = new Set(USER_GROUP_COLUMNS);

/**
 * A writer of the object `schema` describes, field by field in its order. Each field is its
 * writer in WRITTEN_AS, else its column as JSON (a column the caller's rows must hold). The
 * writer is compiled once into one expression, as a hand-written template would be: a loop
 * over the fields called every field's writer from one call site, which V8 cannot inline, and
 * cost more for every group of a page (docs/performance.md, "Why the code is the way it
 * is"). Its text holds only this file's writers and the schema's field names, quoted by
 * JSON.stringify.
 */
export function groupWriter(schema: { properties: Record<string, unknown>; title?: string }): (group: Written) => string {
  const writers: FieldWriter[] = [];
  const parts = Object.keys(schema.properties).map((field, i) => {
    const prefix = quote(`${i === 0 ? '{' : ','}${quote(field)}:`);
    const write = WRITTEN_AS[field];
    if (write) return `${prefix} + w[${writers.push(write) - 1}](g)`;
    if (COLUMNS.has(field)) return `${prefix} + q(g.row[${quote(field)}])`;
    throw new Error(`${schema.title ?? 'a response'} has a field "${field}" that is neither a column nor written in user-groups.json.ts`);
  });
  return new Function('w', 'q', `return (g) => ${parts.join(' + ')} + '}';`)(writers, quote);
}

/** The UserGroup schema: a group and its token. */
const userGroupJson: (group: GroupWithToken) => string = groupWriter(UserGroup);

/** The UserGroupPublic schema: a group without its token. */
export const publicUserGroupJson: (group: ResolvedGroup<ListedRow>) => string = groupWriter(UserGroupPublic);

/** UserGroupResponse (create, rotate, update, lookup). */
export function userGroupResponseJson(group: GroupWithToken): string {
  return `{"success":1,"user_group":${userGroupJson(group)}}`;
}

/** GetOrCreateResponse. */
export function getOrCreateResponseJson(created: boolean, group: GroupWithToken): string {
  return `{"success":1,"new_user_group":${created},"user_group":${userGroupJson(group)}}`;
}

/** DeletedResponse. */
export function deletedResponseJson(group: ResolvedGroup, deletedCount: number): string {
  return `{"success":1,"user_group":${publicUserGroupJson(group)},"deleted_count":${deletedCount}}`;
}

/** ListResponse, around a page's objects as the database wrote them (written-page.ts). */
export function listResponseJson(objects: string, nextCursor: string | null): string {
  return `{"success":1,"user_groups":[${objects}],"next_cursor":${quote(nextCursor)}}`;
}
