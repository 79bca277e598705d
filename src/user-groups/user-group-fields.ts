// Field rules that JSON Schema cannot say: the depth and serialized size of properties,
// and the one spelling of an id given as a JSON integer.
import { AppError } from '../errors.ts';

export const PROPERTIES_MAX_DEPTH = 32;
export const PROPERTIES_MAX_BYTES = 64 * 1024;

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
