// What the schemas cannot say about a group's fields: the depth and serialized size of
// properties, the one spelling of an id given as a JSON integer, and how each field a request
// may set is stored (for create and update alike): a request field that is also a column is
// stored as given unless STORED_AS says otherwise, so a plain field needs no code here.
import { AppError } from '../errors.ts';
import type { UserGroupsTable } from '../db/schema.ts';
import { UserGroupFieldsBody, type UserGroupInput } from './user-groups.schemas.ts';
import { USER_GROUP_COLUMNS } from './group-sql.ts';

const jsonOrNull = (value: unknown) => (value === undefined || value === null ? null : JSON.stringify(value));

/** The fields a request may set that are columns of their own (a field declared in groupFields and as a column is one). */
type SettableField = keyof UserGroupInput & keyof UserGroupsTable;
type StoredFields = { [F in SettableField]?: UserGroupsTable[F] };

/** How a settable field becomes its column, where it is not stored as given. */
const STORED_AS: { [F in SettableField]?: (value: Exclude<UserGroupInput[F], undefined>) => UserGroupsTable[F] } = {
  mapping: (mapping) => jsonOrNull(mapping),
  properties: (properties) => jsonOrNull(properties),
  is_demo_group: (demo) => (demo ? 1 : 0),
  group_tags: (tags) => JSON.stringify(normalizeTags(tags)),
};

const COLUMNS: ReadonlySet<string> = new Set(USER_GROUP_COLUMNS);
const SETTABLE_FIELDS = Object.keys(UserGroupFieldsBody.properties).filter((field): field is SettableField => COLUMNS.has(field));

/** The columns for the settable fields the input gives (absent fields are left out). */
export function storedFields(input: UserGroupInput): StoredFields {
  const stored: Record<string, unknown> = {};
  for (const field of SETTABLE_FIELDS) {
    const value = input[field];
    if (value === undefined) continue;
    const convert = STORED_AS[field] as ((value: unknown) => unknown) | undefined;
    stored[field] = convert ? convert(value) : value;
  }
  return stored as StoredFields;
}

const PROPERTIES_MAX_DEPTH = 32;
const PROPERTIES_MAX_BYTES = 64 * 1024;

/** Distinct, in code-point order (the order of both backends' text comparison under "C"). */
export function normalizeTags(tags: readonly string[]): string[] {
  return [...new Set(tags)].sort((a, b) => {
    const [x, y] = [[...a], [...b]];
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      if (x[i] !== y[i]) return x[i].codePointAt(0)! - y[i].codePointAt(0)!;
    }
    return x.length - y.length;
  });
}

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
