// Groups with every declared field set to random valid values, for property-based tests, and
// the CSV file `ugs import` reads, written from the same declaration. The values of each field
// come from its request schema (src/user-groups/declared-fields.ts, through UpsertItem): text
// with Unicode (astral characters, combining marks, emoji sequences, right-to-left scripts),
// numbers, booleans, nulls, objects of any JSON and arrays, each within the schema's limits.
// Only what a schema cannot say is written here: parents (a hierarchy of at most three levels)
// and the environment (one per file). A string of a format is one of the format's examples
// (src/http/formats.ts). A field added to the declaration gets values with no change here.
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { Ajv } from 'ajv';
import { UpsertItem } from '../../src/user-groups/user-groups.schemas.ts';
import { CSV_CELLS, CSV_FIELDS } from '../../src/user-groups/transfer/import-csv.ts';
import { findUnrepresentableNumber } from '../../src/http/json-numbers.ts';
import { STRING_FORMATS, type StringFormat } from '../../src/http/formats.ts';

type JsonSchema = {
  type?: string;
  anyOf?: JsonSchema[];
  enum?: string[];
  items?: JsonSchema;
  additionalProperties?: boolean | JsonSchema;
  propertyNames?: JsonSchema;
  minLength?: number;
  maxLength?: number;
  format?: string;
  minimum?: number;
  maximum?: number;
  maxItems?: number;
  maxProperties?: number;
};

/** One character of text as people type it, and some that break naive code: combining marks, astral characters, joiners, right-to-left. */
const character = fc.oneof(
  { arbitrary: fc.constantFrom('a', 'Z', '0', ' ', '-', '_', ':', '.', ',', ';', '"', "'", '\\', '/', '=', '+'), weight: 4 },
  {
    arbitrary: fc.constantFrom('é', 'e\u0301', '\u0301', 'ß', 'Ω', 'ש', 'ع', '中', '😀', '👩‍👩‍👧', '𝄞', '🇫🇷', '\u00a0', '\u200b', '\ufeff'),
    weight: 3,
  },
  { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }), weight: 2 },
);

/** Any JSON, with text of those characters and of control characters (which JSON escapes). */
const jsonText = fc.string({ unit: fc.oneof({ arbitrary: character, weight: 5 }, fc.constantFrom('\n', '\t', '\u0000', '\u001f')), maxLength: 12 });
const anyJson = fc.jsonValue({ maxDepth: 3, depthSize: 'small', stringUnit: fc.oneof(character, fc.constantFrom('\n', '\t', '\u0000')) });
/** Keys that a body may not hold anywhere (docs/api.md, "Requests"): they never come from here. */
const POISON = /"(?:__proto__|constructor|prototype)"/;

const ajv = new Ajv({ strict: false });
for (const [name, { validate }] of Object.entries(STRING_FORMATS)) ajv.addFormat(name, { type: 'string', validate });

/**
 * Values the schema accepts (checked by Ajv, as the service checks them) and the service's
 * body rules (no poisoning key, no number a double cannot hold as written), never null when
 * `nonNull`.
 */
export function valuesOf(schema: JsonSchema, nonNull = false): fc.Arbitrary<unknown> {
  const valid = ajv.compile(schema);
  return arbitraryOf(schema, nonNull).filter((value) => {
    const text = JSON.stringify(value);
    return valid(value) && !POISON.test(text) && findUnrepresentableNumber(text) === undefined;
  });
}

function arbitraryOf(schema: JsonSchema, nonNull: boolean): fc.Arbitrary<unknown> {
  if (schema.anyOf) {
    const branches = schema.anyOf.filter((branch) => !(nonNull && branch.type === 'null'));
    return fc.oneof(...branches.map((branch) => arbitraryOf(branch, nonNull)));
  }
  if (schema.enum) return fc.constantFrom(...schema.enum);
  switch (schema.type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -Number.MAX_SAFE_INTEGER, max: schema.maximum ?? Number.MAX_SAFE_INTEGER });
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true, min: schema.minimum, max: schema.maximum }).map((n) => (Object.is(n, -0) ? 0 : n));
    case 'string':
      if (schema.format) return fc.constantFrom(...STRING_FORMATS[schema.format as StringFormat].examples);
      // Each character may be several code points: stay within the limit, counted in code points.
      return fc.string({ unit: character, minLength: schema.minLength ?? 0, maxLength: Math.min(16, Math.floor((schema.maxLength ?? 64) / 8)) });
    case 'array':
      return fc.array(arbitraryOf(schema.items ?? {}, true), { maxLength: Math.min(schema.maxItems ?? 5, 5) });
    case 'object': {
      const keys = schema.propertyNames ? arbitraryOf({ type: 'string', ...schema.propertyNames }, true) : jsonText;
      const values = typeof schema.additionalProperties === 'object' ? arbitraryOf(schema.additionalProperties, true) : anyJson;
      return fc.dictionary(keys as fc.Arbitrary<string>, values, { minKeys: nonNull ? 1 : 0, maxKeys: Math.min(schema.maxProperties ?? 5, 5) });
    }
    default:
      throw new Error(`no values for a schema of type ${schema.type}: teach test/helpers/declared-groups.ts this type`);
  }
}

const REQUEST_FIELDS = Object.entries(UpsertItem.properties as Record<string, JsonSchema>).filter(([field]) => field !== 'user_group_id');
/** What no schema says: a parent must exist (and come first), and a file is of one environment. */
const STRUCTURAL = new Set(['parent_user_group_id', 'api_environment_tag']);

/**
 * 2 to `maxGroups` upsert items of one environment, parents first: the first a root with every
 * field set to something other than `avoid` says (a field's default) and none null, the
 * second its child, the others anywhere in a hierarchy of at most three levels, with any field
 * set or null.
 */
export function declaredGroups(maxGroups: number, avoid: Record<string, unknown> = {}) {
  const ids = fc.uniqueArray(valuesOf(UpsertItem.properties.user_group_id as JsonSchema), {
    minLength: 2,
    maxLength: maxGroups,
    selector: (id) => String(id),
  });
  const fieldsOf = (first: boolean) =>
    fc.record(
      Object.fromEntries(
        REQUEST_FIELDS.filter(([field]) => !STRUCTURAL.has(field)).map(([field, schema]) => [
          field,
          first ? valuesOf(schema, true).filter((value) => !(field in avoid) || !isDeepStrictEqual(value, avoid[field])) : valuesOf(schema),
        ]),
      ),
    );
  return fc
    .tuple(ids, fc.constantFrom('Customer', 'Testing'))
    .chain(([ids, environment]) =>
      fc.tuple(
        fc.constant(ids),
        fc.constant(environment),
        fc.tuple(...ids.map((_, i) => fieldsOf(i === 0))),
        fc.tuple(...ids.map((_, i) => fc.integer({ min: -1, max: i - 1 }))),
      ),
    )
    .map(([ids, environment, fields, parentChoices]) => {
      const depths: number[] = [];
      return ids.map((id, i): Record<string, unknown> & { user_group_id: unknown; api_environment_tag: string } => {
        let parent = i === 1 ? 0 : parentChoices[i];
        if (parent >= 0 && depths[parent] >= 3) parent = -1;
        depths.push(parent >= 0 ? depths[parent] + 1 : 1);
        return { user_group_id: id, ...fields[i], parent_user_group_id: parent >= 0 ? ids[parent] : null, api_environment_tag: environment };
      });
    });
}

/** A group as answers show it (GET /api/users). */
export type AnsweredGroup = Record<string, unknown> & { provided_id: string; parent_user_group_id: string | null };

/**
 * The CSV file `ugs import` reads for `groups` (as answers show them), parents first: a header
 * of every field an import takes, and each cell as the import reads its field's kind (CSV_CELLS).
 * A null leaves a text cell empty (absent: null for a new group).
 */
export function csvOf(groups: AnsweredGroup[]): string {
  const quoted = (cell: string) => `"${cell.replaceAll('"', '""')}"`;
  const cellOf = (field: string, value: unknown) => {
    switch (CSV_CELLS[field]) {
      case 'json':
        return JSON.stringify(value);
      case 'text':
        return value === null ? '' : String(value);
      default:
        return value === null ? '' : JSON.stringify(value);
    }
  };
  const rows = parentsFirst(groups).map((group) =>
    CSV_FIELDS.map((field) => quoted(cellOf(field, field === 'user_group_id' ? group.provided_id : group[field]))).join(','),
  );
  return `${[CSV_FIELDS.join(','), ...rows].join('\r\n')}\r\n`;
}

function parentsFirst(groups: AnsweredGroup[]): AnsweredGroup[] {
  const done = new Set<string>();
  const ordered: AnsweredGroup[] = [];
  while (ordered.length < groups.length) {
    const before = ordered.length;
    for (const group of groups) {
      if (done.has(group.provided_id) || (group.parent_user_group_id !== null && !done.has(group.parent_user_group_id))) continue;
      ordered.push(group);
      done.add(group.provided_id);
    }
    if (ordered.length === before) throw new Error('a group names a parent that is not among the groups');
  }
  return ordered;
}
