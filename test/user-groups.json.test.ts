// The user group responses are written straight from stored rows (src/user-groups/user-groups.json.ts)
// rather than by the schema serializer. They must be exactly what the response schemas say:
// the same JSON as serializing the view in schema order, valid against the schema (which
// allows no other field, so no stored secret can slip in), whatever the stored text holds.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Ajv } from 'ajv';
import {
  deletedResponseJson,
  getOrCreateResponseJson,
  listResponseJson,
  publicUserGroupJson,
  userGroupResponseJson,
} from '../src/user-groups/user-groups.json.ts';
import { DeletedResponse, GetOrCreateResponse, ListResponse, UserGroup, UserGroupResponse } from '../src/user-groups/user-groups.schemas.ts';
import type { UserGroupRow } from '../src/db/schema.ts';
import { USER_GROUP_COLUMNS } from '../src/user-groups/group-sql.ts';
import { resolveChain, type ResolvedGroup } from '../src/user-groups/group-chain.ts';

const ajv = new Ajv({ strict: false, allErrors: true, formats: { 'date-time': true } });

/**
 * A row as the database returns it, with the stored JSON text the service writes
 * (JSON.stringify). Every column is null unless given here: a column added later needs no
 * edit of this fixture.
 */
function row(overrides: Partial<Omit<UserGroupRow, 'mapping' | 'properties'>> & { mapping?: unknown; properties?: unknown } = {}): UserGroupRow {
  const { mapping = { '40': '213' }, properties = { region: 'emea' }, ...rest } = overrides;
  return {
    ...(Object.fromEntries(USER_GROUP_COLUMNS.map((column) => [column, null])) as unknown as UserGroupRow),
    team_id: 4812,
    account_id: 7,
    environment: 'Customer',
    provided_id: 'example_1',
    name: 'Example 1',
    mapping: mapping === null ? null : JSON.stringify(mapping),
    properties: properties === null ? null : JSON.stringify(properties),
    is_demo_group: 0,
    group_tags: '[]',
    token_hash: 'f'.repeat(64),
    token_ciphertext: 'keyid.iv.body.tag',
    token_generation: 3,
    created_at: '2026-11-22T10:00:00.000Z',
    updated_at: '2026-11-23T11:30:00.123Z',
    ...rest,
  };
}

const parsed = (text: string | null) => (text === null ? null : JSON.parse(text));

/**
 * What a schema serializer would have been given: the view, keys in the UserGroup schema's
 * order. Each field is its column, but for these, which the API shows otherwise.
 */
function view(g: ResolvedGroup, token?: string) {
  const shown: Record<string, (g: ResolvedGroup) => unknown> = {
    parent_user_group_id: (x) => x.parentProvidedId,
    group_tags: (x) => JSON.parse(x.row.group_tags),
    mapping: (x) => parsed(x.row.mapping),
    properties: (x) => parsed(x.row.properties),
    computed_mapping: (x) => parsed(x.computedMapping),
    computed_properties: (x) => parsed(x.computedProperties),
    api_environment_tag: (x) => x.row.environment,
    is_demo_group: (x) => x.row.is_demo_group === 1,
  };
  const fields = Object.keys(UserGroup.properties).filter((field) => field !== 'token' || token !== undefined);
  return Object.fromEntries(fields.map((field) => [field, field === 'token' ? token : field in shown ? shown[field](g) : g.row[field as keyof UserGroupRow]]));
}

const COMPANY = row({ team_id: 100, provided_id: 'acme', name: 'Acme', mapping: { '40': 'acme-db' }, properties: { region: 'emea', plan: 'pro' } });
const ROOT = row({ team_id: 99, provided_id: 'holding', mapping: null, properties: { currency: 'EUR', region: 'world' } });

const ROWS: [string, ResolvedGroup][] = (
  [
    ['plain', row()],
    ['no mapping or properties yet', row({ mapping: null, properties: null })],
    ['a demo group in Testing', row({ is_demo_group: 1, environment: 'Testing' })],
    ['quotes, backslashes, slashes and non-ASCII in name and id', row({ name: 'Ünïcødé "quoted" \\ back/slash 東京 🚀', provided_id: 'id "with" \\ 🚀' })],
    ['an integer-like id and a large team_id', row({ provided_id: '12345', team_id: 2 ** 40 + 7 })],
    [
      'properties with nesting, arrays, numbers, escapes and a constructor key',
      row({
        properties: { a: { b: [1, 2.5, -3e-7, true, null, { c: 'line\nbreak\ttab\u0001' }] }, constructor: 'data', '10': 'integer-like key', emoji: '👍🏽' },
      }),
    ],
    ['an empty mapping and empty properties', row({ mapping: {}, properties: {} })],
    ['tags and a level', row({ group_tags: '["beta","東京"]', hierarchy_level: 'User' })],
  ] as [string, UserGroupRow][]
)
  .map(([label, r]) => [label, resolveChain([r])] as [string, ResolvedGroup])
  .concat([
    ['a child: computed fields merged over its parent', resolveChain([row({ parent_team_id: 100, properties: { plan: 'free', seat: 3 } }), COMPANY])],
    [
      'a grandchild with no values of its own',
      resolveChain([row({ parent_team_id: 100, mapping: null, properties: null }), { ...COMPANY, parent_team_id: 99 }, ROOT]),
    ],
  ]);

const TOKEN = 'ugs_grp_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn';

describe('user group JSON written from stored rows', () => {
  for (const [label, g] of ROWS) {
    const r = g.row;
    it(`get-or-create, create/rotate/update and delete responses equal the schema-ordered view and validate (${label})`, () => {
      const cases: [string, object, string, unknown][] = [
        [
          'GetOrCreateResponse',
          GetOrCreateResponse,
          getOrCreateResponseJson(false, { ...g, token: TOKEN }),
          { success: 1, new_user_group: false, user_group: view(g, TOKEN) },
        ],
        [
          'GetOrCreateResponse (created)',
          GetOrCreateResponse,
          getOrCreateResponseJson(true, { ...g, token: TOKEN }),
          { success: 1, new_user_group: true, user_group: view(g, TOKEN) },
        ],
        ['UserGroupResponse', UserGroupResponse, userGroupResponseJson({ ...g, token: TOKEN }), { success: 1, user_group: view(g, TOKEN) }],
        ['DeletedResponse', DeletedResponse, deletedResponseJson(g, 3), { success: 1, user_group: view(g), deleted_count: 3 }],
      ];
      for (const [name, schema, written, expected] of cases) {
        assert.equal(written, JSON.stringify(expected), `${name} is the schema-ordered view`);
        const validate = ajv.compile(schema);
        assert.ok(validate(JSON.parse(written)), `${name} validates: ${JSON.stringify(validate.errors)}`);
        for (const secret of [r.token_hash, r.token_ciphertext]) assert.ok(!written.includes(secret), `${name} holds no stored secret`);
      }
    });
  }

  it('list responses equal the schema-ordered views and validate, with and without a next cursor', () => {
    const rows = ROWS.map(([, g]) => g);
    const validate = ajv.compile(ListResponse);
    for (const [page, cursor] of [
      [rows, 'eyJhZnRlciI6NDgxMn0'],
      [[], null],
    ] as const) {
      const objects = page.map((g) => publicUserGroupJson(g)).join(',');
      const written = listResponseJson(objects, cursor);
      assert.equal(written, JSON.stringify({ success: 1, user_groups: page.map((g) => view(g)), next_cursor: cursor }));
      assert.ok(validate(JSON.parse(written)), JSON.stringify(validate.errors));
    }
  });

  it("computed fields: the nearest value of each top-level key wins; own fields stay the group's own", () => {
    const child = ROWS.find(([label]) => label.startsWith('a child'))![1];
    const body = JSON.parse(publicUserGroupJson(child));
    assert.deepEqual(body.computed_properties, { region: 'emea', plan: 'free', seat: 3 });
    assert.deepEqual(body.properties, { plan: 'free', seat: 3 });
    assert.deepEqual(body.computed_mapping, { '40': '213' });
    assert.equal(body.parent_user_group_id, 'acme');
    const grandchild = JSON.parse(publicUserGroupJson(ROWS.find(([label]) => label.startsWith('a grandchild'))![1]));
    assert.deepEqual(grandchild.computed_properties, { currency: 'EUR', region: 'emea', plan: 'pro' });
    assert.deepEqual(grandchild.computed_mapping, { '40': 'acme-db' });
    assert.equal(grandchild.properties, null);
  });
});
