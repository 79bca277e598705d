// `npm run generate:docs`: writes the lists of a user group's fields that docs/api.md,
// docs/security.md and docs/cli.md give in their prose, and docs/api.md's example answer of a
// group, from the declaration (src/user-groups/declared-fields.ts) and what follows from it.
// Each stands between `<!-- fields: <name> -->` and `<!-- /fields -->`; everything else is
// written by hand.
// test/docs-fields.test.ts fails while a file is out of date.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLEARED_BY_NULL, GetUserQuery, UpsertItem, UserGroup } from '../src/user-groups/user-groups.schemas.ts';
import { requestFieldSchemas } from '../src/user-groups/declared-fields.ts';
import { EmbedUserGroup } from '../src/embed/embed.schemas.ts';
import { CSV_FIELDS, csvFieldsOf } from '../src/user-groups/transfer/import-csv.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The files whose lists are generated. */
export const FIELD_DOCS = ['docs/api.md', 'docs/security.md', 'docs/cli.md'];

const code = (field: string) => `\`${field}\``;
/** `a`, `b` and `c` (or `a`, `b` or `c`). */
const listed = (fields: readonly string[], last = 'and') =>
  fields.length <= 1 ? fields.map(code).join('') : `${fields.slice(0, -1).map(code).join(', ')} ${last} ${code(fields[fields.length - 1])}`;

const queryFields = Object.keys(GetUserQuery.properties);
const bodyOnly = Object.keys(requestFieldSchemas).filter((field) => !queryFields.includes(field));
const is = (fields: readonly string[]) => (fields.length === 1 ? 'is' : 'are');

/** An answer's example: each field's first example, one line a field. */
function exampleOf(properties: Record<string, { examples?: unknown[] }>): string {
  const lines = Object.entries(properties).map(([field, schema]) => {
    if (!schema.examples?.length) throw new Error(`the answer's field ${field} has no example: give its response schema one (declared-fields.ts)`);
    return `  "${field}": ${JSON.stringify(schema.examples[0])}`;
  });
  return `\n\`\`\`json\n{\n${lines.join(',\n')}\n}\n\`\`\`\n`;
}

/** Each list, by the name its markers carry. */
const LISTS: Record<string, () => string> = {
  /** docs/api.md, "The user group": the example answer. */
  'user-group-example': () => exampleOf(UserGroup.properties as Record<string, { examples?: unknown[] }>),
  /** docs/api.md, "GET /api/user": the fields get-or-create takes by query string. */
  'get-or-create-query': () => `\`?${queryFields.map((field) => `${field}=…`).join('&')}\``,
  /** docs/api.md, "GET /api/user": those that need a body. */
  'get-or-create-body-only': () => listed(bodyOnly),
  /** docs/api.md, "PUT /api/user: update": the fields `null` clears. */
  'put-null-clears': () => listed(CLEARED_BY_NULL, 'or'),
  /** docs/api.md, "POST /api/users/upsert": an item's fields beside its id. */
  'upsert-item': () => listed(Object.keys(UpsertItem.properties).filter((field) => field !== 'user_group_id')),
  /** docs/api.md, "The embed side", and docs/security.md: what a dashboard sees of the group. */
  'embed-view': () => listed(Object.keys(EmbedUserGroup.properties)),
  /** docs/cli.md, "Import and export": the fields a CSV header may name. */
  'csv-header': () => listed(CSV_FIELDS),
  /** docs/cli.md, "Import and export": how the cells that are not plain text are written. */
  'csv-cells': () =>
    [
      csvFieldsOf('json').length > 0 && `${listed(csvFieldsOf('json'))} cells hold JSON text`,
      csvFieldsOf('boolean').length > 0 && `${listed(csvFieldsOf('boolean'))} ${is(csvFieldsOf('boolean'))} \`true\` or \`false\``,
      csvFieldsOf('number').length > 0 && `${listed(csvFieldsOf('number'))} ${is(csvFieldsOf('number'))} a JSON number`,
    ]
      .filter(Boolean)
      .join('; '),
};

const MARKED = /(<!-- fields: ([a-z-]+) -->)[\s\S]*?(<!-- \/fields -->)/g;

/** The text with every marked list as the declaration gives it. */
export function withFieldLists(text: string, file: string): string {
  return text.replace(MARKED, (_, open: string, name: string, close: string) => {
    const list = LISTS[name];
    if (!list) throw new Error(`${file}: no list named "${name}" (scripts/generate-field-docs.ts)`);
    return `${open}${list()}${close}`;
  });
}

/** The names of the lists a text marks. */
export const markedLists = (text: string) => [...text.matchAll(MARKED)].map((match) => match[2]);

export const LIST_NAMES = Object.keys(LISTS);

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const file of FIELD_DOCS) {
    const full = path.join(ROOT, file);
    const text = fs.readFileSync(full, 'utf8');
    const written = withFieldLists(text, file);
    if (written !== text) {
      fs.writeFileSync(full, written);
      console.log(`written: ${file}`);
    }
  }
}
