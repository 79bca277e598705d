// Every field of a user group, declared once (GROUP_FIELDS): what a request may give, what an
// answer carries, how it is stored, whether dashboards see it, whether get-or-create takes it
// by query string, and whether children inherit it. Everything that lists a group's fields
// reads this: the request bodies and answers (user-groups.schemas.ts), storing
// (stored-fields.ts), the embed view (embed/embed.schemas.ts), the export and the import
// (transfer/transfer.service.ts, transfer/import-csv.ts), the console's forms and group page (through the
// OpenAPI document and `npm run generate:client`), and the lists of docs/api.md, docs/cli.md
// and docs/security.md (`npm run generate:docs`). docs/architecture.md, "Adding a field to a user
// group", is the checklist.
import { Type, type Static, type TOptional, type TSchema } from 'typebox';
import type { UserGroupsTable } from '../db/schema.ts';
import { LABEL_TEXT, NOT_BLANK_PLAIN_TEXT, PLAIN_TEXT, Text } from '../http/text.schemas.ts';
import type { InheritedFields } from './group-chain.ts';

// The values. Text is plain (text.schemas.ts); an id must also hold something other than
// white space. Lengths count Unicode code points; ids are never trimmed. A request's text is
// `Text`, whose `format` tsc holds to the names of src/http/formats.ts.

export const EnvironmentTag = Type.Enum(['Customer', 'Testing'], {
  title: 'EnvironmentTag',
  type: 'string',
  description: "The environment: `Customer` (production) or `Testing`. Absent: the API token's default environment.",
  examples: ['Customer'],
});

export const UserGroupIdString = Text({
  minLength: 1,
  maxLength: 256,
  pattern: NOT_BLANK_PLAIN_TEXT,
  description: 'Your id for this user group: 1-256 characters, no control characters, not only white space. Case-sensitive, never trimmed.',
  examples: ['example_1'],
});

/** An id given as a JSON integer: read as its decimal string. */
export const UserGroupIdInteger = Type.Integer({ minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER });

export const UserGroupId = Type.Union([UserGroupIdString, UserGroupIdInteger], {
  title: 'UserGroupId',
  description: 'Your id for this user group. A JSON integer is accepted and stored as its decimal string.',
});

export const Name = Text({
  minLength: 1,
  maxLength: 256,
  pattern: PLAIN_TEXT,
  description: 'Display name: 1-256 characters, no control characters. Defaults to the user_group_id on creation.',
  examples: ['Example 1'],
});

const MappingValue = Type.Union([Text({ minLength: 1, maxLength: 256 }), Type.Integer({ minimum: 0 })]);

export const Mapping = Type.Unsafe<Record<string, string | number>>({
  title: 'Mapping',
  type: 'object',
  additionalProperties: MappingValue,
  propertyNames: { minLength: 1, maxLength: 64 },
  maxProperties: 100,
  description: 'Schema id (1-64 characters) to data source: a data source reference (1-256 characters) or a non-negative integer id. At most 100 entries.',
  examples: [{ '40': '213' }],
});

export const Properties = Type.Unsafe<Record<string, unknown>>({
  title: 'Properties',
  type: 'object',
  additionalProperties: true,
  description: 'Free-form JSON object, available as variables in dashboards. Any nesting up to depth 32; at most 65536 bytes serialized.',
  examples: [{ region: 'emea', plan: 'pro' }],
});

const IsDemoGroup = Type.Boolean({ description: 'A demo user group: its dashboards show a watermark.', examples: [false] });

const nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const ParentUserGroupId = Type.Union([UserGroupIdString, UserGroupIdInteger, Type.Null()], {
  title: 'ParentUserGroupId',
  description:
    "The parent's user_group_id, in the same account and environment (a JSON integer is read as its decimal string, as for ids); null for none. A hierarchy is at most UGS_MAX_HIERARCHY_DEPTH levels deep (3 by default).",
  examples: ['acme'],
});

export const HierarchyLevelName = Text({
  minLength: 1,
  maxLength: 64,
  pattern: NOT_BLANK_PLAIN_TEXT,
  description: "The group's level, such as `Customer` or `User`: 1-64 characters. When the account declares its levels, one of them, deeper than the parent's.",
  examples: ['User'],
});

/** A tag given to a group or to the tag set (docs/api.md, "Tags"): a label listed among others, so no bidirectional control and never only invisible characters. */
export const Tag = Text({
  minLength: 1,
  maxLength: 64,
  pattern: LABEL_TEXT,
  description:
    'A tag: 1-64 characters, no control or bidirectional control characters, not only white space or zero-width characters. Stored in Unicode NFC: "é" written as one code point or as e and a combining accent is one tag.',
  examples: ['beta'],
});

/**
 * A tag a request names to find it (a filter, a rename's or a delete's `name`): the rule of
 * tags before they had to be labels, so that a tag stored then can still be found, renamed
 * and deleted.
 */
export const TagReference = Text({
  minLength: 1,
  maxLength: 64,
  pattern: PLAIN_TEXT,
  description: 'A tag: 1-64 characters, no control characters.',
  examples: ['beta'],
});

/** At most this many tags a group (docs/api.md, "Tags"). */
const MAX_TAGS_PER_GROUP = 50;

export const GroupTags = Type.Array(Tag, {
  maxItems: MAX_TAGS_PER_GROUP,
  title: 'GroupTags',
  description: `Tags, at most ${MAX_TAGS_PER_GROUP}. Stored and returned in Unicode NFC, without duplicates, in code-point order. Replaces the tags the group had.`,
  examples: [['beta', 'enterprise']],
});

/**
 * A tag as stored: in Unicode NFC, so that the two spellings of "é" (one code point, or e and
 * a combining accent) are one tag, as they are one text to whoever reads it.
 */
export const normalizeTag = (tag: string): string => tag.normalize('NFC');

/** In NFC, distinct, in code-point order (the order of both backends' text comparison under "C"). */
export function normalizeTags(tags: readonly string[]): string[] {
  return [...new Set(tags.map(normalizeTag))].sort((a, b) => {
    const [x, y] = [[...a], [...b]];
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      if (x[i] !== y[i]) return x[i].codePointAt(0)! - y[i].codePointAt(0)!;
    }
    return x.length - y.length;
  });
}

const jsonOrNull = (value: unknown) => (value === undefined || value === null ? null : JSON.stringify(value));

const JsonObjectOrNull = <T>(description: string, example: T) =>
  Type.Union([Type.Unsafe<T>({ type: 'object', additionalProperties: true }), Type.Null()], { description, examples: [example] });

/** What one field of a group is. */
export interface FieldDeclaration {
  /** What a request may give (create, get-or-create, update, the bulk upsert and so the import and the export). None: the service sets it. */
  request?: TSchema;
  /** What every answer that carries the group says (UserGroup, UserGroupWithoutToken). */
  response: TSchema;
  /**
   * How a request's value is stored. Absent: as given, in the column of the field's name
   * (USER_GROUP_COLUMN_TYPES, src/db/schema.ts; tsc checks there is one and that it holds the
   * value). A function: that column holds what it returns. `elsewhere`: the service stores it.
   */
  stored?: ((value: never) => unknown) | { elsewhere: string };
  /** Dashboards see it: a field of the embed context's user_group (EmbedUserGroup). */
  dashboards: boolean;
  /** Get-or-create takes it by query string too (GetUserQuery), as its request schema's text or boolean form. */
  byQuery?: true;
  /** Children inherit it: the answer's field that holds it merged over the ancestors' (group-chain.ts merges it). */
  inherited?: string;
}

/**
 * What tsc checks of each declaration: a field stored as given (or by a function) has a column
 * of its name whose type holds the value, and a field inherited is one group-chain.ts merges.
 * A failed check shows as the property it names, with what to do.
 */
type Checked<F extends string, D> = StoredChecked<F, D> & InheritedChecked<F, D>;

type StoredChecked<F extends string, D> = D extends { request: infer R extends TSchema }
  ? D extends { stored: { elsewhere: string } }
    ? unknown
    : F extends keyof UserGroupsTable
      ? D extends { stored: (value: infer V) => infer C }
        ? [Static<R>] extends [V]
          ? [C] extends [UserGroupsTable[F]]
            ? unknown
            : { stored: `returns what the column ${F} cannot hold` }
          : { stored: `must take every value the request schema of ${F} allows` }
        : [Static<R>] extends [UserGroupsTable[F]]
          ? unknown
          : { stored: `the column ${F} cannot hold the value as given: say how it is stored` }
      : { stored: `there is no column ${F} in USER_GROUP_COLUMN_TYPES (src/db/schema.ts): add it and its migration, or say where the field is stored` }
  : unknown;

type InheritedChecked<F extends string, D> = D extends { inherited: infer As }
  ? F extends keyof InheritedFields
    ? [As] extends [InheritedFields[F]]
      ? unknown
      : { inherited: InheritedFields[F] }
    : { inherited: `group-chain.ts and withAncestry (group-sql.ts) merge no ${F}: inheriting a field is code there first` }
  : F extends keyof InheritedFields
    ? { inherited: InheritedFields[F] }
    : unknown;

function declareGroupFields<T extends Record<string, FieldDeclaration>>(fields: T & { [F in keyof T & string]: Checked<F, T[F]> }): T {
  return fields;
}

/** A group's fields, in the order answers show them. */
export const GROUP_FIELDS = declareGroupFields({
  team_id: {
    response: Type.Integer({ description: 'Internal id, unique across the service, never reused.', examples: [4812] }),
    dashboards: false,
  },
  name: {
    request: Name,
    response: Type.String({ examples: ['Example 1'] }),
    dashboards: true,
    byQuery: true,
  },
  provided_id: {
    response: Type.String({ description: 'The user_group_id.', examples: ['example_1'] }),
    dashboards: true,
  },
  parent_user_group_id: {
    request: ParentUserGroupId,
    response: Type.Union([Type.String(), Type.Null()], { description: "The parent's user_group_id; null for a group without parent.", examples: [null] }),
    stored: { elsewhere: "parent_team_id, the parent's team_id, which the service finds and checks (hierarchy.ts)" },
    dashboards: true,
    byQuery: true,
  },
  hierarchy_level: {
    request: nullable(HierarchyLevelName),
    response: Type.Union([Type.String(), Type.Null()], { examples: [null] }),
    dashboards: true,
    byQuery: true,
  },
  group_tags: {
    request: GroupTags,
    response: Type.Array(Type.String(), { description: 'Distinct, in code-point order.', examples: [['beta']] }),
    stored: (tags: string[]) => JSON.stringify(normalizeTags(tags)),
    dashboards: false,
  },
  // Answered as stored: any key is kept (an allow-list of keys would drop data here).
  mapping: {
    request: nullable(Mapping),
    response: JsonObjectOrNull<Record<string, string | number>>("The group's own mapping.", { '40': '213' }),
    stored: jsonOrNull,
    dashboards: true,
    inherited: 'computed_mapping',
  },
  properties: {
    request: nullable(Properties),
    response: JsonObjectOrNull<Record<string, unknown>>("The group's own properties.", { region: 'emea' }),
    stored: jsonOrNull,
    dashboards: true,
    inherited: 'computed_properties',
  },
  computed_mapping: {
    response: JsonObjectOrNull<Record<string, string | number>>(
      "The group's mapping over its ancestors', key by key, the nearest winning; null when none of them has one.",
      { '40': '213' },
    ),
    dashboards: true,
  },
  computed_properties: {
    response: JsonObjectOrNull<Record<string, unknown>>(
      "The group's properties over its ancestors', key by key at the top level, the nearest winning: what dashboards get as variables.",
      { region: 'emea' },
    ),
    dashboards: true,
  },
  api_environment_tag: {
    request: EnvironmentTag,
    response: EnvironmentTag,
    stored: { elsewhere: 'environment, chosen on creation (the tenant): never changed afterwards' },
    dashboards: true,
    byQuery: true,
  },
  is_demo_group: {
    request: IsDemoGroup,
    response: IsDemoGroup,
    stored: (demo: boolean) => (demo ? 1 : 0),
    dashboards: true,
    byQuery: true,
  },
  created_at: { response: Type.String({ format: 'date-time', examples: ['2026-11-22T10:00:00.000Z'] }), dashboards: false },
  updated_at: { response: Type.String({ format: 'date-time', examples: ['2026-11-22T10:00:00.000Z'] }), dashboards: false },
});

// What follows from the declaration: each list of fields, in the declaration's order.

type Declared = typeof GROUP_FIELDS;
type FieldName = keyof Declared;
type FieldsWhere<Condition> = { [F in FieldName]: Declared[F] extends Condition ? F : never }[FieldName];
type RequestSchemaOf<F extends FieldName> = Declared[F] extends { request: infer R extends TSchema } ? R : never;

/** Each field and its declaration, in order. */
export const DECLARED_FIELDS = Object.entries(GROUP_FIELDS) as [FieldName, FieldDeclaration][];
const schemasOf = (schemaOf: (declaration: FieldDeclaration) => TSchema | undefined) =>
  Object.fromEntries(DECLARED_FIELDS.flatMap(([field, declaration]) => (schemaOf(declaration) ? [[field, schemaOf(declaration)]] : [])));

/** What a request may say about a group besides its id: every body that takes fields composes these. */
export const requestFieldSchemas = schemasOf((field) => field.request && Type.Optional(field.request)) as {
  [F in FieldsWhere<{ request: TSchema }>]: TOptional<RequestSchemaOf<F>>;
};

/** What every answer that carries a group says, the token aside. */
export const responseFieldSchemas = schemasOf((field) => field.response) as { [F in FieldName]: Declared[F]['response'] };

/** What dashboards see of the group viewing them (the embed context). */
export const dashboardFieldSchemas = schemasOf((field) => (field.dashboards ? field.response : undefined)) as {
  [F in FieldsWhere<{ dashboards: true }>]: Declared[F]['response'];
};

/**
 * What get-or-create takes by query string besides the id: each field's request schema in the
 * form a query string can spell (no null; an id as text). Typed as the request schema, which
 * holds what the query's form does.
 */
export const queryFieldSchemas = schemasOf((field) => (field.byQuery && field.request ? Type.Optional(textForm(field.request)) : undefined)) as {
  [F in FieldsWhere<{ byQuery: true }>]: TOptional<RequestSchemaOf<F>>;
};

/** A request schema without its null branch, and, where it may be text, without the branches that are not. */
function textForm(schema: TSchema): TSchema {
  const branches = (schema as { anyOf?: TSchema[] }).anyOf;
  if (!branches) return schema;
  const kept = branches.filter((branch) => (branch as { type?: string }).type !== 'null');
  const text = kept.filter((branch) => (branch as { type?: string }).type === 'string');
  const form = text.length > 0 ? text : kept;
  return form.length === 1 ? form[0] : Type.Union(form);
}
