// The docs name a user group's fields where a reader looks for them: the field table and the
// example answer of docs/api.md's "The user group", written by hand, are held here to the
// declaration (src/user-groups/declared-fields.ts): a field added there and not in the docs, or
// the other way round, fails this test. The lists in prose (docs/api.md, docs/security.md,
// docs/cli.md) are written by `npm run generate:docs`, and held here to what it writes. A
// field the last release did not have is named in CHANGELOG.md's "Unreleased".
import { it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';
import { UserGroup, UserGroupFieldsBody } from '../src/user-groups/user-groups.schemas.ts';
import { FIELD_DOCS, LIST_NAMES, markedLists, withFieldLists } from '../scripts/generate-field-docs.ts';
import { keptReleases } from '../scripts/check-api.ts';

const API_DOCS = fs.readFileSync(path.join(ROOT, 'docs/api.md'), 'utf8');

function section(title: string): string {
  const start = API_DOCS.indexOf(`\n## ${title}\n`);
  assert.notEqual(start, -1, `docs/api.md has a section "${title}"`);
  const end = API_DOCS.indexOf('\n## ', start + 1);
  return API_DOCS.slice(start, end === -1 ? undefined : end);
}

it('docs: the field table of "The user group" names exactly the fields a request may give', () => {
  const rows = [...section('The user group').matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
  assert.deepEqual([...rows].sort(), Object.keys(UserGroupFieldsBody.properties).sort());
});

it('docs: the example answer of "The user group" shows every field of the UserGroup schema, in its order', () => {
  const example = /```json\n(\{[\s\S]*?\})\n```/.exec(section('The user group'));
  assert.ok(example, 'a JSON example');
  assert.deepEqual(Object.keys(JSON.parse(example[1])), Object.keys(UserGroup.properties));
});

it("docs: every list of a group's fields in docs/api.md, docs/security.md and docs/cli.md is the declaration's (npm run generate:docs writes them)", () => {
  const marked: string[] = [];
  for (const file of FIELD_DOCS) {
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
    assert.equal(text, withFieldLists(text, file), `${file} is out of date: run npm run generate:docs`);
    marked.push(...markedLists(text));
  }
  assert.deepEqual([...new Set(marked)].sort(), [...LIST_NAMES].sort(), 'every list the generator knows stands in some file');
});

it('docs: every field of a user group that the last release lacks is named in CHANGELOG.md, under "Unreleased"', () => {
  const last = keptReleases().at(-1);
  assert.ok(last, 'a kept OpenAPI document in docs/openapi/');
  const released = JSON.parse(fs.readFileSync(path.join(ROOT, 'docs/openapi', `${last}.json`), 'utf8')) as {
    components: { schemas: { UserGroup: { properties: Record<string, unknown> } } };
  };
  const changelog = fs.readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8');
  const unreleased = /^## \[Unreleased\]\n([\s\S]*?)^## /m.exec(changelog)?.[1] ?? '';
  const added = Object.keys(UserGroup.properties).filter((field) => !(field in released.components.schemas.UserGroup.properties));
  assert.deepEqual(
    added.filter((field) => !unreleased.includes(`\`${field}\``)),
    [],
    `fields added since ${last} that CHANGELOG.md's "Unreleased" does not name (as \`field\`)`,
  );
});
