// What the schemas cannot say about a group's fields: the depth and serialized size of
// properties, the one spelling of an id given as a JSON integer, and how each field a request
// may set is stored (declared once, for create and update alike).
import { AppError } from '../errors.ts';
import type { UserGroupsTable } from '../db/schema.ts';
import type { UserGroupInput } from './user-groups.schemas.ts';

const jsonOrNull = (value: unknown) => (value === undefined || value === null ? null : JSON.stringify(value));

/** Each field a request may set, and how it becomes its column. */
const STORED_AS = {
  name: (name: string) => name,
  mapping: (mapping: Record<string, string | number> | null) => jsonOrNull(mapping),
  properties: (properties: Record<string, unknown> | null) => jsonOrNull(properties),
  is_demo_group: (demo: boolean) => (demo ? 1 : 0),
  hierarchy_level: (level: string | null) => level,
  group_tags: (tags: string[]) => JSON.stringify(normalizeTags(tags)),
} satisfies { [F in keyof UserGroupInput & keyof UserGroupsTable]: (value: Exclude<UserGroupInput[F], undefined>) => UserGroupsTable[F] };

export type SettableField = keyof typeof STORED_AS;
export type StoredFields = { [F in SettableField]?: ReturnType<(typeof STORED_AS)[F]> };
export const SETTABLE_FIELDS = Object.keys(STORED_AS) as SettableField[];

/** The columns for the settable fields the input gives (absent fields are left out). */
export function storedFields(input: UserGroupInput): StoredFields {
  const stored: Record<string, unknown> = {};
  for (const field of SETTABLE_FIELDS) {
    const value = input[field];
    if (value !== undefined) stored[field] = (STORED_AS[field] as (v: typeof value) => unknown)(value);
  }
  return stored as StoredFields;
}

export const PROPERTIES_MAX_DEPTH = 32;
export const PROPERTIES_MAX_BYTES = 64 * 1024;

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
