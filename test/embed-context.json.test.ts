// The embed context is written straight from the stored row (src/embed/embed-context.json.ts).
// It must be what EmbedContextResponse describes, whatever the stored properties hold, and the
// variables must follow docs/api.md, "The embed side": the two built-ins, then every top-level key of
// properties, the built-ins winning a clash.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Ajv } from 'ajv';
import { embedContextJson } from '../src/embed/embed-context.json.ts';
import { EmbedContextResponse, EmbedUserGroup } from '../src/embed/embed.schemas.ts';
import { USER_GROUP_COLUMNS } from '../src/user-groups/group-sql.ts';
import type { EmbedGroupRow } from '../src/embed/embed.repository.ts';
import { resolveChain } from '../src/user-groups/group-chain.ts';

const validate = new Ajv({ strict: false, allErrors: true }).compile(EmbedContextResponse);

/** Every column null unless set below: a column added to user_groups is in the rows too. */
const NULL_COLUMNS = Object.fromEntries(USER_GROUP_COLUMNS.map((column) => [column, null]));

function row(properties: unknown, overrides: Partial<EmbedGroupRow> = {}): EmbedGroupRow {
  return {
    ...NULL_COLUMNS,
    team_id: 4812,
    account_id: 1,
    provided_id: 'example_1',
    name: 'Example "1" 🚀',
    environment: 'Customer',
    is_demo_group: 0,
    parent_team_id: null,
    hierarchy_level: null,
    mapping: JSON.stringify({ '40': '213', '41': 7 }),
    properties: properties === null ? null : JSON.stringify(properties),
    token_generation: 1,
    ...overrides,
  };
}

/** The documented variables, computed the plain way from the chain (group first). */
function expectedVariables(chain: EmbedGroupRow[]): Record<string, unknown> {
  const r = chain[0];
  const variables: Record<string, unknown> = {};
  const layers = chain.map((link) => (link.properties === null ? {} : JSON.parse(link.properties))).reverse();
  for (const [key, value] of layers.flatMap((layer) => Object.entries(layer))) {
    Object.defineProperty(variables, key, { value, enumerable: true, writable: true, configurable: true });
  }
  variables.user_group_id = r.provided_id;
  variables.user_group_name = r.name;
  return variables;
}

const PARENT = row(
  { region: 'world', currency: 'EUR', user_group_id: 'parent spoof' },
  { team_id: 1, provided_id: 'acme', mapping: JSON.stringify({ '40': 'acme' }) },
);

const CASES: [string, EmbedGroupRow[]][] = (
  [
    ['ordinary properties', row({ region: 'emea', plan: 'pro', seats: 3 })],
    ['no properties yet, no mapping', row(null, { mapping: null })],
    ['empty properties, a demo group in Testing', row({}, { is_demo_group: 1, environment: 'Testing' })],
    ['nested values, escapes, integer-like and constructor keys', row({ '10': 'ten', a: { b: [1, 'x"y', null] }, constructor: 'data', s: 'line\nbreak' })],
    ['a property named like a built-in (the built-in wins)', row({ user_group_id: 'spoofed', user_group_name: 'spoofed too', region: 'apac' })],
    ['a built-in name only as a nested key or as a value', row({ nested: { user_group_id: 'inner' }, label: 'user_group_name' })],
    ['a __proto__-looking key stored as data', { ...row(null), properties: '{"__proto__x":1,"k":"v"}' }],
  ] as [string, EmbedGroupRow][]
)
  .map(([label, r]) => [label, [r]] as [string, EmbedGroupRow[]])
  .concat([
    ["a child: variables from its properties over its parent's", [row({ region: 'emea', seats: 3 }, { parent_team_id: 1 }), PARENT]],
    ["a child without properties inherits all of its parent's", [row(null, { parent_team_id: 1, mapping: null }), PARENT]],
  ]);

describe('embed context JSON written from stored rows', () => {
  for (const [label, chain] of CASES) {
    it(`validates against EmbedContextResponse and carries the documented variables (${label})`, () => {
      const r = chain[0];
      const group = resolveChain(chain);
      const written = embedContextJson(group);
      const parsed = JSON.parse(written);
      assert.ok(validate(parsed), JSON.stringify(validate.errors));
      // Each field declared for dashboards (src/user-groups/declared-fields.ts): the ones written otherwise, else its column.
      const writtenOtherwise: Record<string, unknown> = {
        api_environment_tag: r.environment,
        is_demo_group: r.is_demo_group === 1,
        parent_user_group_id: chain[1]?.provided_id ?? null,
        mapping: r.mapping === null ? null : JSON.parse(r.mapping),
        properties: r.properties === null ? null : JSON.parse(r.properties),
        computed_mapping: group.computedMapping === null ? null : JSON.parse(group.computedMapping),
        computed_properties: group.computedProperties === null ? null : JSON.parse(group.computedProperties),
      };
      const expected = Object.keys(EmbedUserGroup.properties).map((field) => [
        field,
        field in writtenOtherwise ? writtenOtherwise[field] : r[field as keyof EmbedGroupRow],
      ]);
      assert.deepEqual(parsed.user_group, Object.fromEntries(expected));
      assert.equal(parsed.user_group.name, r.name);
      // A clashing property spliced after the built-ins would win JSON.parse's last-key rule and fail here.
      assert.deepEqual(parsed.variables, expectedVariables(chain));
    });
  }
});
