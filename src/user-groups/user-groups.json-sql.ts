// A group's object of the listing (the UserGroupPublic schema), written by the database in
// the statement that reads the page, as user-groups.json.ts writes it in JavaScript: the same
// fields in the same order, composed from the same schema field list, so that a field is
// still declared once (declared-fields.ts). A page then leaves the database as one text instead
// of a hundred rows of a dozen values each, which the driver turned into JavaScript values
// and the writer back into text (docs/performance.md, "Why the code is the way it is").
// test/user-groups.json.test.ts holds the two writers to the same bytes.
//
// What the row alone does not give, a child's parent id and computed fields, is resolved
// from its chain in JavaScript (group-chain.ts): the database writes a marker in its place,
// which written-page.ts replaces. A root's are its own values, written here.
import type { RawBuilder } from 'kysely';
import { sql } from '../db/kysely.ts';
import type { Dialect } from '../db/database.ts';
import type { InheritedFields } from './group-chain.ts';
import { GROUP_FIELDS } from './declared-fields.ts';
import { USER_GROUP_COLUMNS } from './group-sql.ts';
import { WRITTEN_FIELDS } from './user-groups.json.ts';
import { UserGroupPublic } from './user-groups.schemas.ts';

/** The answer's fields a group's chain decides: JavaScript writes them for a child (written-page.ts). */
export const RESOLVED_FIELDS = ['parent_user_group_id', 'computed_mapping', 'computed_properties'] as const;
export type ResolvedField = (typeof RESOLVED_FIELDS)[number];

/** Each computed field's own column: what a root's computed value is (group-chain.ts, resolveChain). */
const INHERITED_FROM = Object.fromEntries(
  Object.entries(GROUP_FIELDS).flatMap(([field, declaration]) => ('inherited' in declaration ? [[declaration.inherited, field]] : [])),
) as { [F in keyof InheritedFields as InheritedFields[F]]: F };

/**
 * Where a child's resolved field goes: a control character, the field's index in
 * RESOLVED_FIELDS, the group's team_id and the control character again. No JSON text the
 * database writes holds a raw control character (every string is escaped, and the stored
 * JSON texts were written by JSON.stringify), so a marker cannot be mistaken for data.
 */
export const MARKER = '\u0001';

/**
 * SQL text, built once per dialect from literals and the row's columns (no values): as text
 * it is one node of the statements that embed it, where a tree of Kysely builders was
 * compiled again for every page of the filtered listings, which Kysely builds per request.
 */
type SqlWriter = (dialect: Dialect) => string;

const column = (name: string) => `"g"."${name}"`;
const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;
/** A text value as a JSON string (null as null); both escape as JSON.stringify does. */
const quoted = (name: string) => (dialect: Dialect) =>
  dialect === 'sqlite' ? `json_quote(${column(name)})` : `coalesce(to_json(${column(name)})::text, 'null')`;
/** A column that holds JSON text as the answer shows it. */
const storedJson = (name: string) => () => `coalesce(${column(name)}, 'null')`;
const marker = (dialect: Dialect) => `${dialect === 'sqlite' ? 'char' : 'chr'}(${MARKER.charCodeAt(0)})`;

/** A resolved field: for a root what resolveChain gives it, for a child its marker. */
function resolved(field: ResolvedField, forRoot: SqlWriter): SqlWriter {
  const index = literal(String(RESOLVED_FIELDS.indexOf(field)));
  return (dialect) =>
    `case when ${column('parent_team_id')} is null then ${forRoot(dialect)} else concat(${marker(dialect)}, ${index}, ${column('team_id')}, ${marker(dialect)}) end`;
}

/** The fields that are not their own column written as JSON: the SQL twins of user-groups.json.ts's WRITTEN_AS. */
const WRITTEN_AS: Record<string, SqlWriter> = {
  parent_user_group_id: resolved('parent_user_group_id', () => "'null'"),
  computed_mapping: resolved('computed_mapping', storedJson(INHERITED_FROM.computed_mapping)),
  computed_properties: resolved('computed_properties', storedJson(INHERITED_FROM.computed_properties)),
  group_tags: () => column('group_tags'),
  mapping: storedJson('mapping'),
  properties: storedJson('properties'),
  api_environment_tag: quoted('environment'),
  is_demo_group: () => `case when ${column('is_demo_group')} = 1 then 'true' else 'false' end`,
};

const COLUMNS: ReadonlySet<string> = new Set(USER_GROUP_COLUMNS);
const isNumber = (schema: unknown) => ['integer', 'number'].includes((schema as { type?: string }).type ?? '');

// A field JavaScript writes otherwise than as its column is written otherwise here too (and no other).
for (const field of Object.keys(UserGroupPublic.properties)) {
  if (WRITTEN_FIELDS.includes(field) !== field in WRITTEN_AS) {
    throw new Error(`UserGroupPublic's field "${field}" is written by its own writer in one of user-groups.json.ts and user-groups.json-sql.ts only`);
  }
}

/** Each field of UserGroupPublic as its SQL writer, in order; a field written neither way fails at start, as in user-groups.json.ts. */
const FIELD_WRITERS: { prefix: string; write: SqlWriter }[] = Object.entries(UserGroupPublic.properties).map(([field, schema], i) => {
  const prefix = `${i === 0 ? '{' : ','}${JSON.stringify(field)}:`;
  if (field in WRITTEN_AS) return { prefix, write: WRITTEN_AS[field] };
  if (!COLUMNS.has(field)) throw new Error(`UserGroupPublic has a field "${field}" that is neither a column nor written in user-groups.json-sql.ts`);
  if (isNumber(schema)) return { prefix, write: () => `coalesce(cast(${column(field)} as text), 'null')` };
  return { prefix, write: quoted(field) };
});

/** How every object starts: its team_id, the first field, as written-page.ts finds a page's cursor from its last object. */
export const OBJECT_START = '{"team_id":';
if (FIELD_WRITERS[0].prefix !== OBJECT_START || !isNumber(UserGroupPublic.properties.team_id)) {
  throw new Error("written-page.ts reads the cursor from each object's first field, team_id, a number: keep it first in GROUP_FIELDS");
}

const OBJECT_SQL = new Map<Dialect, RawBuilder<string>>();

/** The UserGroupPublic object of the user_groups row `g`, as JSON text (with markers for a child's resolved fields). */
export function groupObjectSql(dialect: Dialect): RawBuilder<string> {
  let written = OBJECT_SQL.get(dialect);
  if (!written) {
    const parts = FIELD_WRITERS.flatMap(({ prefix, write }) => [literal(prefix), write(dialect)]);
    OBJECT_SQL.set(dialect, (written = sql.raw<string>(`concat(${[...parts, literal('}')].join(', ')})`)));
  }
  return written;
}
