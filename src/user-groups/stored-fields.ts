// What the schemas cannot say about a group's fields: the depth and serialized size of
// properties, the one spelling of an id given as a JSON integer, and the columns a request's
// fields become (for create and update alike), as each field's declaration says
// (GROUP_FIELDS, declared-fields.ts): a plain field is stored as given and needs no code here.
import { AppError } from '../foundations/errors.ts';
import type { UserGroupsTable } from '../db/schema.ts';
import type { UserGroupInput } from './user-groups.schemas.ts';
import { DECLARED_FIELDS } from './declared-fields.ts';
import { USER_GROUP_COLUMNS } from './group-sql.ts';

/** The fields a request may set that are columns of their own (declared with a request schema, and a column of the same name). */
type SettableField = keyof UserGroupInput & keyof UserGroupsTable;
type StoredFields = { [F in SettableField]?: UserGroupsTable[F] };

/** Each request field stored in the column of its name, and how its value becomes that column (none: as given). */
const STORED = DECLARED_FIELDS.flatMap(([field, { request, stored }]) => {
  if (request === undefined || (stored !== undefined && typeof stored !== 'function')) return [];
  // tsc holds the declaration to USER_GROUP_COLUMN_TYPES; this stops a cast from slipping by.
  if (!(USER_GROUP_COLUMNS as string[]).includes(field)) throw new Error(`the field ${field} is stored as a column, and user_groups has no column ${field}`);
  return [{ field: field as SettableField, convert: stored as ((value: unknown) => unknown) | undefined }];
});

/** The columns for the settable fields the input gives (absent fields are left out). */
export function storedFields(input: UserGroupInput): StoredFields {
  const columns: Record<string, unknown> = {};
  for (const { field, convert } of STORED) {
    const value = input[field];
    if (value === undefined) continue;
    columns[field] = convert ? convert(value) : value;
  }
  return columns as StoredFields;
}

const PROPERTIES_MAX_DEPTH = 32;
const PROPERTIES_MAX_BYTES = 64 * 1024;

export function normalizeUserGroupId(id: string | number): string {
  return typeof id === 'number' ? String(id) : id;
}

export function checkProperties(properties: Record<string, unknown> | null | undefined): void {
  if (properties === null || properties === undefined) return;
  if (depthExceeds(properties, PROPERTIES_MAX_DEPTH)) {
    throw new AppError('validation_failed', `properties must not be nested deeper than ${PROPERTIES_MAX_DEPTH} levels`, {
      details: [{ field: 'properties', issue: 'too_deep' }],
    });
  }
  if (Buffer.byteLength(JSON.stringify(properties)) > PROPERTIES_MAX_BYTES) {
    throw new AppError('validation_failed', `properties must be at most ${PROPERTIES_MAX_BYTES} bytes serialized`, {
      details: [{ field: 'properties', issue: 'too_large' }],
    });
  }
}

/** True if the value nests objects or arrays more than `limit` levels (the top object is level 1). Stops early. */
function depthExceeds(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (limit === 0) return true;
  const children = Array.isArray(value) ? value : Object.values(value);
  return children.some((child) => depthExceeds(child, limit - 1));
}
