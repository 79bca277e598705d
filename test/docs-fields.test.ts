// docs/api.md names a user group's fields where a reader looks for them: the field table and
// the example answer of "The user group". They are held here to the schemas, which declare
// each field once (src/user-groups/user-groups.schemas.ts): a field added there and not in the
// docs, or the other way round, fails this test.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';
import { UserGroup, UserGroupFieldsBody } from '../src/user-groups/user-groups.schemas.ts';

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
