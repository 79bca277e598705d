// Field rules and limits of request bodies (docs/api.md, "The user group"), through HTTP.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { Type } from 'typebox';
import { apiTokenAccess } from '../src/auth/route-access.ts';
import { buildTestApp, forEachBackend, openTestDatabase, useTestApp, type AnyAnswer, type HttpResult, BODY_METHODS } from './helpers/harness.ts';

/** An object nested `levels` deep (the top object is level 1). */
function nested(levels: number, leaf: unknown = 1): Record<string, unknown> {
  let value: unknown = leaf;
  for (let i = 0; i < levels; i++) value = { d: value };
  return value as Record<string, unknown>;
}

function assertRefused(res: HttpResult<AnyAnswer>, field: string, issue?: string) {
  assert.equal(res.status, 400, `expected 400 for ${field}, got ${res.status} ${res.text.slice(0, 200)}`);
  assert.equal(res.body.success, 0);
  assert.equal(res.body.error.code, 'validation_failed');
  assert.ok(typeof res.body.error.message === 'string' && res.body.error.message.length > 0);
  const match = res.body.error.details?.find((d: { field: string }) => d.field === field || d.field.startsWith(`${field}.`));
  assert.ok(match, `details should name ${field}: ${JSON.stringify(res.body.error.details)}`);
  if (issue) assert.equal(match.issue, issue, `issue for ${field}`);
}

forEachBackend('field rules of request bodies', (backend) => {
  const t = useTestApp(backend);
  let n = 0;
  const uid = (label: string) => `val-${label}-${++n}`;

  const post = (body: unknown) => t.request('POST', '/api/user', { token: t.token, body });

  /** Number of groups (both environments) whose user_group_id or name starts with `prefix` (at most 256 characters of it). */
  async function countStored(prefix: string) {
    let total = 0;
    const q = [...prefix].slice(0, 256).join(''); // q itself is limited to 256 characters
    for (const env of ['Customer', 'Testing']) {
      const res = await t.request('GET', '/api/users', { token: t.token, query: { q, api_environment_tag: env, limit: '500' } });
      assert.equal(res.status, 200);
      total += res.body.user_groups.length;
    }
    return total;
  }

  /** Creates and refuses with the given field named; nothing with that id is stored. */
  async function assertCreateRefused(body: Record<string, unknown>, field: string, issue?: string) {
    const res = await post(body);
    assertRefused(res, field, issue);
    if (typeof body.user_group_id === 'string' && body.user_group_id.trim() !== '' && !/[\u0000-\u001f\u007f]/.test(body.user_group_id)) {
      assert.equal(await countStored(body.user_group_id), 0, 'a refused create stores nothing');
    }
  }

  // ---- user_group_id ----

  it('user_group_id: an empty string is refused (too_short)', async () => {
    await assertCreateRefused({ user_group_id: '' }, 'user_group_id', 'too_short');
  });

  it('user_group_id: 257 characters are refused (too_long), 256 are accepted', async () => {
    const base = uid('len');
    await assertCreateRefused({ user_group_id: base + 'x'.repeat(257 - base.length) }, 'user_group_id', 'too_long');
    const ok = await post({ user_group_id: base + 'x'.repeat(256 - base.length) });
    assert.equal(ok.status, 201);
  });

  it('user_group_id: control characters (U+0000-U+001F, U+007F) are refused', async () => {
    for (const ch of ['\u0000', '\u0009', '\n', '\r', '\u001f', '\u007f']) {
      await assertCreateRefused({ user_group_id: `a${ch}b` }, 'user_group_id', 'invalid_characters');
    }
  });

  it('user_group_id: only white space is refused, but white space around text is kept as given', async () => {
    for (const blank of [' ', '   ', '\u00a0', '\u3000 ']) {
      await assertCreateRefused({ user_group_id: blank }, 'user_group_id', 'invalid_characters');
    }
    const id = `  ${uid('spaced')}  `;
    const ok = await post({ user_group_id: id });
    assert.equal(ok.status, 201);
    assert.equal(ok.body.user_group.provided_id, id);
  });

  it('user_group_id: a JSON integer is accepted and stored as its decimal string', async () => {
    const res = await post({ user_group_id: 31337 });
    assert.equal(res.status, 201);
    assert.equal(res.body.user_group.provided_id, '31337');
    assert.equal(typeof res.body.user_group.provided_id, 'string');
    const zero = await post({ user_group_id: 0 });
    assert.equal(zero.status, 201);
    assert.equal(zero.body.user_group.provided_id, '0');
  });

  it('user_group_id: a fraction, boolean, null, object or array is refused as wrong_type', async () => {
    for (const value of [1.5, true, null, { id: 1 }, ['a']]) {
      await assertCreateRefused({ user_group_id: value }, 'user_group_id');
    }
  });

  it('user_group_id: an integer beyond the safe integer range is refused (it could not be stored exactly)', async () => {
    await assertCreateRefused({ user_group_id: 2 ** 53 + 2 }, 'user_group_id');
  });

  // ---- name ----

  it('name: 1-256 characters are accepted, empty and 257 characters are refused', async () => {
    await assertCreateRefused({ user_group_id: uid('n0'), name: '' }, 'name', 'too_short');
    await assertCreateRefused({ user_group_id: uid('n257'), name: 'n'.repeat(257) }, 'name', 'too_long');
    const one = await post({ user_group_id: uid('n1'), name: 'n' });
    assert.equal(one.status, 201);
    const max = await post({ user_group_id: uid('n256'), name: 'n'.repeat(256) });
    assert.equal(max.status, 201);
    assert.equal(max.body.user_group.name, 'n'.repeat(256));
  });

  it('name: control characters are refused', async () => {
    await assertCreateRefused({ user_group_id: uid('nctl'), name: 'line\nbreak' }, 'name', 'invalid_characters');
    await assertCreateRefused({ user_group_id: uid('nctl'), name: 'del\u007f' }, 'name', 'invalid_characters');
  });

  it('name: a non-string is refused as wrong_type', async () => {
    for (const value of [5, null, false, { a: 1 }]) {
      await assertCreateRefused({ user_group_id: uid('ntype'), name: value }, 'name', 'wrong_type');
    }
  });

  it('name: is returned exactly as given (Unicode, inner and outer spaces)', async () => {
    const name = '  Zürich \u{1F600} Team  ';
    const res = await post({ user_group_id: uid('nuni'), name });
    assert.equal(res.status, 201);
    assert.equal(res.body.user_group.name, name);
  });

  // ---- mapping ----

  it('mapping: string references up to 256 characters and non-negative integers are accepted and returned as given', async () => {
    const mapping = { '40': '213', schema: 0, big: 9007199254740991, ref: 'r'.repeat(256), ['k'.repeat(64)]: 'x' };
    const res = await post({ user_group_id: uid('map-ok'), mapping });
    assert.equal(res.status, 201);
    assert.deepEqual(res.body.user_group.mapping, mapping);
  });

  it('mapping: a schema id (key) that is empty or longer than 64 characters is refused', async () => {
    await assertCreateRefused({ user_group_id: uid('map-k0'), mapping: { '': 'x' } }, 'mapping');
    await assertCreateRefused({ user_group_id: uid('map-k65'), mapping: { ['k'.repeat(65)]: 'x' } }, 'mapping');
  });

  it('mapping: a value that is empty, longer than 256, negative, fractional, boolean, null or structured is refused', async () => {
    for (const value of ['', 'v'.repeat(257), -1, 1.5, true, null, { a: 1 }, ['a']]) {
      await assertCreateRefused({ user_group_id: uid('map-v'), mapping: { s: value } }, 'mapping');
    }
  });

  it('mapping: a bad value is named by its schema id (mapping.<schema id>) and nothing else', async () => {
    const res = await post({ user_group_id: uid('map-named'), mapping: { good: 1, s40: -1 } });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.error.details, [{ field: 'mapping.s40', issue: 'too_small' }]);
    assert.match(res.body.error.message, /mapping\.s40/);
    assert.doesNotMatch(res.body.error.message, /null/);
  });

  it('mapping: 100 entries are accepted, 101 are refused (too_many_entries)', async () => {
    const entries = (count: number) => Object.fromEntries(Array.from({ length: count }, (_, i) => [`s${i}`, i]));
    const ok = await post({ user_group_id: uid('map-100'), mapping: entries(100) });
    assert.equal(ok.status, 201);
    assert.equal(Object.keys(ok.body.user_group.mapping!).length, 100);
    await assertCreateRefused({ user_group_id: uid('map-101'), mapping: entries(101) }, 'mapping', 'too_many_entries');
  });

  it('mapping: an array or a scalar is refused', async () => {
    for (const value of [['a'], 'a', 3]) {
      await assertCreateRefused({ user_group_id: uid('map-type'), mapping: value }, 'mapping');
    }
  });

  // ---- properties ----

  it('properties: any JSON object is stored and returned exactly as given', async () => {
    const properties = {
      region: 'emea',
      n: -1.25,
      big: 1e21,
      ok: true,
      nothing: null,
      list: [1, 'a', [2, [3]], { x: null }],
      nested: { deeper: { deepest: 'ü \u{1F600} "quoted" \\ back' } },
      empty: {},
      '': 'empty key',
      'with space': 1,
    };
    const res = await post({ user_group_id: uid('props'), properties });
    assert.equal(res.status, 201);
    assert.deepEqual(res.body.user_group.properties, properties);
    const empty = await post({ user_group_id: uid('props-empty'), properties: {} });
    assert.equal(empty.status, 201);
    assert.deepEqual(empty.body.user_group.properties, {});
  });

  it('properties: an array, string, number or boolean is refused', async () => {
    for (const value of [[1, 2], 'text', 3, true]) {
      await assertCreateRefused({ user_group_id: uid('props-type'), properties: value }, 'properties');
    }
  });

  it('properties: nesting of depth 32 is accepted, depth 33 is refused (too_deep)', async () => {
    const ok = await post({ user_group_id: uid('depth32'), properties: nested(32) });
    assert.equal(ok.status, 201);
    assert.deepEqual(ok.body.user_group.properties, nested(32));
    await assertCreateRefused({ user_group_id: uid('depth33'), properties: nested(33) }, 'properties', 'too_deep');
    // Arrays count as levels too.
    let withArrays: unknown = 1;
    for (let i = 0; i < 32; i++) withArrays = [withArrays];
    await assertCreateRefused({ user_group_id: uid('depth-arr'), properties: { a: withArrays } }, 'properties', 'too_deep');
  });

  it('properties: 65536 bytes serialized are accepted, 65537 are refused (too_large)', async () => {
    const overhead = Buffer.byteLength(JSON.stringify({ a: '' }));
    const exact = { a: 'x'.repeat(64 * 1024 - overhead) };
    assert.equal(Buffer.byteLength(JSON.stringify(exact)), 65536);
    const ok = await post({ user_group_id: uid('size-ok'), properties: exact });
    assert.equal(ok.status, 201);
    assert.deepEqual(ok.body.user_group.properties, exact);
    await assertCreateRefused({ user_group_id: uid('size-big'), properties: { a: 'x'.repeat(64 * 1024 - overhead + 1) } }, 'properties', 'too_large');
    // Bytes, not characters: 2-byte characters count twice.
    await assertCreateRefused({ user_group_id: uid('size-utf8'), properties: { a: 'é'.repeat(33000) } }, 'properties', 'too_large');
  });

  it('properties: a key named "constructor" is ordinary data', async () => {
    const properties = { constructor: 'x', nested: { constructor: { name: 'y' } }, list: [{ constructor: 1 }] };
    const res = await post({ user_group_id: uid('ctor'), properties });
    assert.equal(res.status, 201);
    assert.deepEqual(res.body.user_group.properties, properties);
  });

  it('properties: a __proto__ key anywhere answers 400 invalid_json and creates nothing', async () => {
    const bodies = [
      (id: string) => `{"user_group_id":"${id}","properties":{"__proto__":{"admin":true}}}`,
      (id: string) => `{"user_group_id":"${id}","properties":{"a":[{"b":{"__proto__":1}}]}}`,
      (id: string) => `{"user_group_id":"${id}","mapping":{"__proto__":"x"}}`,
      (id: string) => `{"__proto__":{"x":1},"user_group_id":"${id}"}`,
      (id: string) => `{"user_group_id":"${id}","properties":{"\\u005f_proto__":{}}}`,
    ];
    for (const make of bodies) {
      const id = uid('proto');
      const res = await t.request('POST', '/api/user', { token: t.token, rawBody: make(id) });
      assert.equal(res.status, 400, make(id));
      assert.equal(res.body.error.code, 'invalid_json');
      assert.equal(await countStored(id), 0);
    }
  });

  it('properties: constructor.prototype anywhere answers 400 invalid_json and creates nothing', async () => {
    for (const make of [
      (id: string) => `{"user_group_id":"${id}","properties":{"constructor":{"prototype":{"x":1}}}}`,
      (id: string) => `{"user_group_id":"${id}","properties":{"a":{"constructor":{"prototype":null}}}}`,
    ]) {
      const id = uid('ctorproto');
      const res = await t.request('POST', '/api/user', { token: t.token, rawBody: make(id) });
      assert.equal(res.status, 400);
      assert.equal(res.body.error.code, 'invalid_json');
      assert.equal(await countStored(id), 0);
    }
  });

  it('properties: forbidden keys are refused on every method that takes a body (GET, PUT, DELETE, override)', async () => {
    const id = uid('proto-all');
    assert.equal((await post({ user_group_id: id })).status, 201);
    const raw = `{"user_group_id":"${id}","properties":{"__proto__":{"admin":true}}}`;
    for (const [method, headers] of [
      ['GET', {}],
      ['PUT', {}],
      ['POST', { 'x-http-method-override': 'GET' }],
    ] as const) {
      const res = await t.request(method, '/api/user', { token: t.token, rawBody: raw, headers });
      assert.equal(res.status, 400, method);
      assert.equal(res.body.error.code, 'invalid_json', method);
    }
    const del = await t.request('DELETE', '/api/user', { token: t.token, rawBody: `{"user_group_id":"${id}","__proto__":{}}` });
    assert.equal(del.status, 400);
    assert.equal(del.body.error.code, 'invalid_json');
    const still = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(still.status, 200);
    assert.equal(still.body.user_group.properties, null);
  });

  // ---- is_demo_group ----

  it('is_demo_group: true and false are accepted; strings, numbers and null are refused', async () => {
    const yes = await post({ user_group_id: uid('demo-t'), is_demo_group: true });
    assert.equal(yes.status, 201);
    assert.equal(yes.body.user_group.is_demo_group, true);
    const no = await post({ user_group_id: uid('demo-f'), is_demo_group: false });
    assert.equal(no.body.user_group.is_demo_group, false);
    for (const value of ['true', 1, 0, null]) {
      await assertCreateRefused({ user_group_id: uid('demo-bad'), is_demo_group: value }, 'is_demo_group', 'wrong_type');
    }
  });

  // ---- api_environment_tag ----

  it('api_environment_tag: only the exact spellings Customer and Testing are accepted', async () => {
    for (const value of ['customer', 'CUSTOMER', 'testing', 'Test', 'Production', ' Customer', '', null, 1]) {
      await assertCreateRefused({ user_group_id: uid('env-bad'), api_environment_tag: value }, 'api_environment_tag');
    }
  });

  // ---- unknown fields and wrong types ----

  it('an unknown field is refused with 400 validation_failed naming it (typo user_groupid)', async () => {
    const res = await post({ user_groupid: uid('typo') });
    assertRefused(res, 'user_groupid', 'unknown_field');
    const withId = await post({ user_group_id: uid('typo2'), nmae: 'x' });
    assertRefused(withId, 'nmae', 'unknown_field');
    assert.match(withId.body.error.message, /nmae/);
  });

  it('an unknown field is refused on PUT, GET and DELETE as well, naming it', async () => {
    const id = uid('unknown-all');
    assert.equal((await post({ user_group_id: id, name: 'Keep' })).status, 201);
    const put = await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: id, name: 'Changed', propertise: {} } });
    assertRefused(put, 'propertise', 'unknown_field');
    const get = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id, current_token: 'x' } });
    assertRefused(get, 'current_token', 'unknown_field');
    const del = await t.request('DELETE', '/api/user', { token: t.token, body: { user_group_id: id, force: true } });
    assertRefused(del, 'force', 'unknown_field');
    const still = await t.request('GET', '/api/user', { token: t.token, body: { user_group_id: id } });
    assert.equal(still.status, 200);
    assert.equal(still.body.user_group.name, 'Keep');
  });

  it('a wrong type names the field and the rule in the message', async () => {
    const res = await post({ user_group_id: uid('wt'), name: 42 });
    assertRefused(res, 'name', 'wrong_type');
    assert.match(res.body.error.message, /name/);
    assert.match(res.body.error.message, /string/);
  });

  it('several invalid fields are all named in details', async () => {
    const res = await post({ user_group_id: '', name: 7, is_demo_group: 'no', bogus: 1 });
    assert.equal(res.status, 400);
    const fields = res.body.error.details!.map((d: { field: string }) => d.field).sort();
    assert.deepEqual(fields, ['bogus', 'is_demo_group', 'name', 'user_group_id']);
  });

  // ---- numbers ----

  it('numbers: one a double cannot hold as written (1e400, 1e-400, 200,000 digits, an integer beyond ±(2^53−1)) is refused naming its path, and nothing is stored', async () => {
    const cases: [string, string, string][] = [
      ['{"properties":{"big":1e400,"tiny":1e-400}}', 'properties.big', 'number_too_large'],
      ['{"properties":{"tiny":1e-400}}', 'properties.tiny', 'number_too_small'],
      ['{"properties":{"deep":{"list":[1,2,-1e400]}}}', 'properties.deep.list.2', 'number_too_large'],
      [`{"properties":{"n":${'9'.repeat(200_000)}}}`, 'properties.n', 'number_too_large'],
      ['{"properties":{"id":9007199254740993}}', 'properties.id', 'integer_out_of_range'],
      ['{"properties":{"id":-9007199254740992}}', 'properties.id', 'integer_out_of_range'],
      ['{"mapping":{"40":12345678901234567890}}', 'mapping.40', 'integer_out_of_range'],
      ['{"user_group_id":9007199254740993}', 'user_group_id', 'integer_out_of_range'],
    ];
    for (const [fields, field, issue] of cases) {
      const id = uid('num');
      const raw = `{"user_group_id":"${id}",${fields.slice(1)}`;
      for (const method of ['POST', 'PUT', 'GET']) {
        const res = await t.request(method, '/api/user', { token: t.token, rawBody: method === 'PUT' ? raw.replace(`"${id}"`, '"val-num-existing"') : raw });
        assertRefused(res, field, issue);
        assert.match(res.body.error.message, /send it as a string/);
      }
      assert.equal(await countStored(id), 0, `${fields.slice(0, 60)}: nothing stored`);
    }
  });

  it('numbers: doubles written with a fraction or an exponent, and integers within ±(2^53−1), are stored and returned as given', async () => {
    const properties = { a: 1.5e300, b: 1e-300, c: 9007199254740991, d: -9007199254740991, e: 0.1, f: 0, g: 5e-324 };
    const res = await post({ user_group_id: uid('num-ok'), properties, mapping: { 40: 9007199254740991 } });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(res.body.user_group.properties, properties);
    assert.deepEqual(res.body.user_group.mapping, { 40: 9007199254740991 });
    // A string that merely looks like such a number is text.
    const text = await post({ user_group_id: uid('num-text'), properties: { big: '1e400', id: '9007199254740993' } });
    assert.equal(text.status, 201, text.text);
    assert.deepEqual(text.body.user_group.properties, { big: '1e400', id: '9007199254740993' });
  });

  it('a body that is a JSON array, string, number or null answers 400 validation_failed (body must be an object)', async () => {
    for (const raw of ['[]', `[{"user_group_id":"${uid('arr')}"}]`, '"text"', '42', 'null']) {
      for (const [method, headers] of BODY_METHODS) {
        const res = await t.request(method, '/api/user', { token: t.token, rawBody: raw, headers });
        assert.equal(res.status, 400, `${method} ${raw}`);
        assert.equal(res.body.error.code, 'validation_failed', `${method} ${raw}`);
        assert.equal(res.body.error.details![0].field, 'body', `${method} ${raw}`);
      }
    }
    assert.equal(await countStored('val-arr'), 0);
  });
});

forEachBackend('integers in query strings and paths', (backend) => {
  const t = useTestApp(backend);

  it('query and path integers are decimal digits only: 0x10, 1e2, " 500", 5.0, +5 and 1e0 are refused, 0042 is 42', async () => {
    // The API tokens' history takes the admin scope, checked before the query (docs/api.md, "Scopes of the operations").
    const { token } = await t.issueToken({ scopes: ['read', 'write', 'admin'] });
    for (const limit of ['0x10', '1e2', ' 500', '%20500', '5.0', '+5', '-1', '']) {
      for (const path of ['/api/users', '/api/user/history', '/api/api_tokens/history']) {
        const query: Record<string, string> = { limit };
        if (path === '/api/user/history') query.user_group_id = 'anything';
        const res = await t.request('GET', path, { token, query });
        assertRefused(res, 'limit');
      }
    }
    const leadingZeros = await t.request('GET', '/api/users', { token: t.token, query: { limit: '0042' } });
    assert.equal(leadingZeros.status, 200, leadingZeros.text);
  });

  it('DELETE /api/api_tokens/1e0 is refused (400), and token 1 stays active', async () => {
    const admin = await t.issueToken({ scopes: ['read', 'write', 'admin'] });
    const other = await t.issueToken({ scopes: ['read'] });
    for (const id of [`${other.id}e0`, `0x${other.id.toString(16)}`, ` ${other.id}`, `${other.id}.0`]) {
      const res = await t.request('DELETE', `/api/api_tokens/${encodeURIComponent(id)}`, { token: admin.token });
      assertRefused(res, 'id', 'wrong_type');
    }
    const still = await t.request('GET', '/api/users', { token: other.token });
    assert.equal(still.status, 200, 'the token is still active');
  });
});

forEachBackend('string formats of request schemas', (backend) => {
  it('a request schema naming a format src/http/formats.ts does not hold stops the start, rather than taking every string', async () => {
    const database = await openTestDatabase(backend);
    try {
      const { app } = await buildTestApp(database);
      app.post(
        '/api/with-locale',
        { schema: { ...apiTokenAccess('write', 'none', 'setting a locale'), body: Type.Object({ locale: Type.String({ format: 'bcp-47' }) }) } },
        async () => ({ success: 1 }),
      );
      await assert.rejects(async () => await app.ready(), /unknown format "bcp-47".*src\/http\/formats\.ts \(email, iana-time-zone\)/);
      await app.close().catch(() => {});
    } finally {
      await database.close();
    }
  });
});
