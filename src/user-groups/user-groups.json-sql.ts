// A group's object of the listing (the UserGroupPublic schema), written by the database in
// the statement that reads the page, as user-groups.json.ts writes it in JavaScript: the same
// fields in the same order, composed from the same schema field list, so that a field is
// still declared once (group-fields.ts). A page then leaves the database as one text instead
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
import { GROUP_FIELDS } from './group-fields.ts';
import { USER_GROUP_COLUMNS } from './group-sql.ts';
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
export const MARKERS = /\u0001(\d)(\d+)\u0001/g;

interface SqlWriting {
  dialect: Dialect;
  /** The alias of the user_groups row being written. */
  alias: string;
}

type SqlWriter = (w: SqlWriting) => RawBuilder<string>;

const column = (w: SqlWriting, name: string) => sql.ref(`${w.alias}.${name}`);
/** A text value as a JSON string (null as null); both escape as JSON.stringify does. */
const quoted = (w: SqlWriting, name: string) =>
  w.dialect === 'sqlite' ? sql<string>`json_quote(${column(w, name)})` : sql<string>`coalesce(to_json(${column(w, name)})::text, 'null')`;
/** A column that holds JSON text as the answer shows it. */
const storedJson = (w: SqlWriting, name: string) => sql<string>`coalesce(${column(w, name)}, 'null')`;
const controlCharacter = (w: SqlWriting) => (w.dialect === 'sqlite' ? sql`char(1)` : sql`chr(1)`);

/** A resolved field: for a root what resolveChain gives it, for a child its marker. */
function resolved(field: ResolvedField, forRoot: SqlWriter): SqlWriter {
  const index = sql.lit(String(RESOLVED_FIELDS.indexOf(field)));
  return (w) =>
    sql<string>`case when ${column(w, 'parent_team_id')} is null then ${forRoot(w)}
      else concat(${controlCharacter(w)}, ${index}, ${column(w, 'team_id')}, ${controlCharacter(w)}) end`;
}

/** The fields that are not their own column written as JSON: the SQL twins of user-groups.json.ts's WRITTEN_AS. */
const WRITTEN_AS: Record<string, SqlWriter> = {
  parent_user_group_id: resolved('parent_user_group_id', () => sql<string>`'null'`),
  computed_mapping: resolved('computed_mapping', (w) => storedJson(w, INHERITED_FROM.computed_mapping)),
  computed_properties: resolved('computed_properties', (w) => storedJson(w, INHERITED_FROM.computed_properties)),
  group_tags: (w) => sql<string>`${column(w, 'group_tags')}`,
  mapping: (w) => storedJson(w, 'mapping'),
  properties: (w) => storedJson(w, 'properties'),
  api_environment_tag: (w) => quoted(w, 'environment'),
  is_demo_group: (w) => sql<string>`case when ${column(w, 'is_demo_group')} = 1 then 'true' else 'false' end`,
};

const COLUMNS: ReadonlySet<string> = new Set(USER_GROUP_COLUMNS);
const isNumber = (schema: unknown) => ['integer', 'number'].includes((schema as { type?: string }).type ?? '');

/** Each field of UserGroupPublic as its SQL writer, in order; a field written neither way fails at start, as in user-groups.json.ts. */
const FIELD_WRITERS: { prefix: string; write: SqlWriter }[] = Object.entries(UserGroupPublic.properties).map(([field, schema], i) => {
  const prefix = `${i === 0 ? '{' : ','}${JSON.stringify(field)}:`;
  if (field in WRITTEN_AS) return { prefix, write: WRITTEN_AS[field] };
  if (!COLUMNS.has(field)) throw new Error(`UserGroupPublic has a field "${field}" that is neither a column nor written in user-groups.json-sql.ts`);
  if (isNumber(schema)) return { prefix, write: (w) => sql<string>`coalesce(cast(${column(w, field)} as text), 'null')` };
  return { prefix, write: (w) => quoted(w, field) };
});

/** How every object starts: its team_id, the first field, as written-page.ts finds a page's cursor from its last object. */
export const OBJECT_START = '{"team_id":';
if (FIELD_WRITERS[0].prefix !== OBJECT_START || !isNumber(UserGroupPublic.properties.team_id)) {
  throw new Error("written-page.ts reads the cursor from each object's first field, team_id, a number: keep it first in GROUP_FIELDS");
}

/** The UserGroupPublic object of the row `alias`, as JSON text (with markers for a child's resolved fields). */
export function groupObjectSql(dialect: Dialect, alias: string): RawBuilder<string> {
  const w = { dialect, alias };
  const parts = FIELD_WRITERS.flatMap(({ prefix, write }) => [sql.lit(prefix), write(w)]);
  return sql<string>`concat(${sql.join([...parts, sql.lit('}')])})`;
}
