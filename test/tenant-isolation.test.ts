// Tenant isolation by construction (docs/security.md, "Tenant isolation"), on both backends:
// - every statement a request sends names the caller's account, and the environment its
//   token is restricted to, as explicit conditions (test/helpers/tenant-predicates.ts), over
//   a workload of every operation (test/helpers/workload.ts), and so does ugs export (the
//   one reader of a tenant's groups outside a request);
// - property-based probes: two accounts whose user_group_ids, names and tags are the same,
//   environment-restricted tokens, and arbitrary input to the list, the search (any code
//   points, U+FFFF, U+10FFFF, %, _, \), every filter, cursors (tampered, another account's,
//   another filter's), limits, history, API tokens, introspection, and embed tokens (their
//   subject, and the variables a viewer's attributes cannot rewrite). No answer ever holds
//   another account's data, or an environment the token may not see: every group is created
//   with properties naming its account and environment, and no answer may hold another's.
// Reproduce a failure with ISOLATION_SEED=<seed printed by fast-check>.
import { it, before, after } from 'node:test';
import { backgroundWork } from '../src/foundations/background-work.ts';
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { decodeJwt } from 'jose';
import {
  forEachBackend,
  openTestDatabase,
  buildTestApp,
  issueTestToken,
  newSecretKey,
  type BuiltApp,
  type OpenDatabase,
  type AnyAnswer,
  type HttpResult,
} from './helpers/harness.ts';
import { runEveryOperation } from './helpers/workload.ts';
import { retryingLockWaits } from './helpers/lock-waits.ts';
import { exportUserGroupLines } from '../src/user-groups/transfer/transfer.service.ts';
import { HeavyOperations } from '../src/accounts/heavy-operations.ts';
import { tenantViolations, type Caller, type Statement } from './helpers/tenant-predicates.ts';
import type { Environment } from '../src/db/schema.ts';

const SEED = process.env.ISOLATION_SEED ? Number(process.env.ISOLATION_SEED) : Date.now() % 2 ** 31;
const RUNS = Number(process.env.ISOLATION_RUNS || 300);
const ENVIRONMENTS: Environment[] = ['Customer', 'Testing'];
const ACCOUNTS = ['alpha', 'beta'] as const;
type Account = (typeof ACCOUNTS)[number];

/** Texts at the edges of code-point order and of LIKE patterns, as ids, names, tags and searches. */
const EDGES = [
  '\uFFFF',
  '\u{10FFFF}',
  '\u{10FFFF}\u{10FFFF}',
  '\u{10FFFE}',
  '\uD7FF',
  '\uE000',
  '%',
  '_',
  '\\',
  'a%',
  'a_',
  'a\\',
  '\u{1F600}',
  'É',
  '/',
  '0',
  'Group 1',
  'g-0',
];
const PLAIN_GROUPS = 64;

interface Probe {
  name: string;
  account: Account;
  token: string;
  /** The environment the token is restricted to, or null. */
  environment: Environment | null;
  accountId: number;
}

forEachBackend('tenant isolation', (backend) => {
  let database: OpenDatabase;
  let built: BuiltApp;
  /** The app's key, which a second app over the same database (the tag bound's, below) shares. */
  const secretKey = newSecretKey();
  const captured: Statement[] = [];
  let capturing = false;
  // Statements sent for a request, not by the service's background work (src/foundations/background-work.ts:
  // the event sequencer moves every account's events, and names each account in what it writes).
  const probes: Probe[] = [];
  /** Every team_id, by account: an answer may name only its caller's. */
  const teamIds: Record<Account, Set<number>> = { alpha: new Set(), beta: new Set() };
  /** Cursors of other callers' pages, to be replayed by the wrong caller. */
  const cursors: string[] = [];
  /** The same, of the lists of tags. */
  const tagCursors: string[] = [];
  const embedTokens: Record<Account, Record<Environment, string[]>> = { alpha: { Customer: [], Testing: [] }, beta: { Customer: [], Testing: [] } };

  before(async () => {
    database = await openTestDatabase(backend, {
      onQuery: (event) => {
        if (capturing && backgroundWork.getStore() === undefined) captured.push({ sql: event.query.sql, parameters: event.query.parameters });
      },
    });
    // Webhook endpoints on 127.0.0.1 (a port nobody listens on): the workload creates one.
    built = await buildTestApp(database, { keys: [secretKey], config: { webhookAllowPrivate: true } });
    const issue = async (account: Account, environment: Environment | null, scopes: ('read' | 'write' | 'admin')[]) => {
      const issued = await issueTestToken(database.handle, { account, env: environment, scopes });
      return issued.token;
    };
    // beta first on odd runs of the clock, so either account may be the one whose scope sorts first.
    const order = SEED % 2 === 0 ? ACCOUNTS : ([...ACCOUNTS].reverse() as Account[]);
    for (const account of order) {
      const admin = await issue(account, null, ['read', 'write', 'admin']);
      const accountId = Number((await database.handle.db.selectFrom('accounts').select('id').where('slug', '=', account).executeTakeFirstOrThrow()).id);
      probes.push({ name: `${account} admin`, account, token: admin, environment: null, accountId });
      probes.push({
        name: `${account} Testing admin`,
        account,
        token: await issue(account, 'Testing', ['read', 'write', 'admin']),
        environment: 'Testing',
        accountId,
      });
      probes.push({ name: `${account} Customer read`, account, token: await issue(account, 'Customer', ['read']), environment: 'Customer', accountId });
      for (const env of ENVIRONMENTS) await seed(account, env, admin);
    }
  });

  after(async () => {
    await built?.app.close();
    await database?.close();
  });

  /** The same ids, names and tags in every account and environment; properties say whose they are. */
  async function seed(account: Account, env: Environment, token: string): Promise<void> {
    const mark = { owner: account, env };
    // 16 creates of one tag at once wait for its count's row: on a loaded machine past the lock
    // timeout, whose 429 a caller sends again after Retry-After (test/helpers/lock-waits.ts).
    const create = async (body: Record<string, unknown>) => {
      const res = await retryingLockWaits(() => built.request('POST', '/api/user', { token, body: { api_environment_tag: env, properties: mark, ...body } }));
      assert.equal(res.status, 201, res.text);
      teamIds[account].add(res.body.user_group.team_id);
    };
    for (let start = 0; start < PLAIN_GROUPS; start += 16) {
      await Promise.all(Array.from({ length: 16 }, (_, j) => create({ user_group_id: `g-${start + j}`, name: `Group ${start + j}`, group_tags: ['t'] })));
    }
    for (const [i, edge] of EDGES.entries()) await create({ user_group_id: `${edge}-${i}`, name: edge, group_tags: [edge] });
    await create({ user_group_id: 'parent', name: 'Parent', hierarchy_level: 'L1', group_tags: ['family'] });
    await create({ user_group_id: 'child', name: 'Child', parent_user_group_id: 'parent', hierarchy_level: 'L2', group_tags: ['family'] });
    // A tag only this account and environment has: no other caller's list of tags may show it.
    await create({ user_group_id: 'marked', name: 'Marked', group_tags: [`mark-${account}-${env}`] });
    const tags = await built.request('GET', '/api/group_tags', { token, query: { api_environment_tag: env, limit: '2' } });
    tagCursors.push(tags.body.next_cursor!);
    for (const id of ['g-1', 'g-2', 'child']) {
      const minted = await built.request('POST', '/api/embed_token', { token, body: { user_group_id: id, api_environment_tag: env } });
      assert.equal(minted.status, 200, minted.text);
      embedTokens[account][env].push(minted.body.embed_token);
    }
    const page = await built.request('GET', '/api/users', { token, query: { api_environment_tag: env, limit: '7' } });
    cursors.push(page.body.next_cursor!);
    const tagged = await built.request('GET', '/api/users', { token, query: { api_environment_tag: env, limit: '3', tag: 't' } });
    cursors.push(tagged.body.next_cursor!);
  }

  /** What no answer to `probe` may hold: another account's marks, and the marks of an environment it may not see. */
  function assertOwnDataOnly(probe: Probe, res: HttpResult<AnyAnswer>, what: string): void {
    const where = `${probe.name}: ${what} -> ${res.status} ${res.text.slice(0, 400)}`;
    assert.ok(res.status < 500, where);
    const other = ACCOUNTS.find((account) => account !== probe.account)!;
    assert.ok(!res.text.includes(`"owner":"${other}"`), `another account's data: ${where}`);
    if (probe.environment !== null) {
      const forbidden = ENVIRONMENTS.find((env) => env !== probe.environment)!;
      assert.ok(!res.text.includes(`"env":"${forbidden}"`), `a forbidden environment's data: ${where}`);
    }
    for (const match of res.text.matchAll(/"team_id":(\d+)/g)) {
      const teamId = Number(match[1]);
      assert.ok(!teamIds[other].has(teamId), `another account's team_id ${teamId}: ${where}`);
    }
  }

  it("every statement of a workload of every operation names the caller's account", async () => {
    await workloadViolations(probes.find((p) => p.account === 'alpha' && p.environment === null)!, 'Customer');
  });

  it('every statement of a workload by a token restricted to Testing also names that environment', async () => {
    await workloadViolations(probes.find((p) => p.account === 'beta' && p.environment === 'Testing')!, 'Testing');
  });

  async function workloadViolations(probe: Probe, env: Environment): Promise<void> {
    captured.length = 0;
    capturing = true;
    try {
      const existing = Array.from({ length: PLAIN_GROUPS }, (_, i) => `g-${i}`);
      await runEveryOperation({
        app: built.app,
        request: built.request,
        token: probe.token,
        environment: env,
        existing,
        search: { id: 'g-1', name: 'Group 2' },
        run: `wl-${env}`,
      });
    } finally {
      capturing = false;
    }
    const caller: Caller = { accountId: probe.accountId, environment: probe.environment };
    const tenantStatements = captured.filter((s) =>
      /user_groups|user_group_tags|group_tag_set|retired_tokens|audit_log|api_tokens|accounts|event|webhook/.test(s.sql),
    );
    assert.ok(tenantStatements.length >= 40, `captured ${tenantStatements.length} statements on tenant tables`);
    const violations = tenantStatements.flatMap((statement) =>
      tenantViolations(statement, caller).map((problem) => `${problem}\n  ${statement.sql}\n  ${JSON.stringify(statement.parameters)}`),
    );
    assert.deepEqual([...new Set(violations)], [], `statements without the tenant's conditions:\n${[...new Set(violations)].join('\n\n')}`);
  }

  it("every statement of ugs export names the account and the environment it exports, and it writes only that tenant's groups", async () => {
    const alpha = probes.find((p) => p.account === 'alpha' && p.environment === null)!;
    captured.length = 0;
    capturing = true;
    const lines: string[] = [];
    try {
      const heavyOperations = new HeavyOperations(database.handle, { perAccount: 1, waitMs: 1000 });
      for await (const line of exportUserGroupLines(database.handle, { accountId: alpha.accountId, environment: 'Testing' }, heavyOperations)) lines.push(line);
    } finally {
      capturing = false;
    }
    assert.ok(lines.length >= PLAIN_GROUPS, `exported ${lines.length} groups`);
    for (const line of lines) assert.deepEqual(JSON.parse(line).properties, { owner: 'alpha', env: 'Testing' }, line);
    const statements = captured.filter((s) => /user_groups/.test(s.sql));
    assert.ok(statements.length > 0, 'the export was captured');
    const violations = statements.flatMap((statement) =>
      tenantViolations(statement, { accountId: alpha.accountId, environment: 'Testing' }).map((problem) => `${problem}\n  ${statement.sql}`),
    );
    assert.deepEqual([...new Set(violations)], [], `statements without the tenant's conditions:\n${[...new Set(violations)].join('\n\n')}`);
  });

  // ---- property-based probes ----

  const text = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...EDGES) },
    // The top of code-point order, where a prefix has no upper bound.
    { weight: 1, arbitrary: fc.array(fc.constantFrom('\u{10FFFF}', '\uFFFF'), { minLength: 1, maxLength: 3 }).map((parts) => parts.join('')) },

    { weight: 2, arbitrary: fc.array(fc.constantFrom(...EDGES, 'a', 'g', 'G', '-', ' '), { minLength: 1, maxLength: 4 }).map((parts) => parts.join('')) },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 6 }) },
    { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 8 }) },
  );
  const cursor = fc.oneof(
    fc.constantFrom(...[0, 1, 5].map((n) => `c${n}`)), // replaced below by the collected cursors
    fc.nat({ max: 100_000 }).map((after) => Buffer.from(JSON.stringify({ after })).toString('base64url')),
    fc.string({ maxLength: 12 }),
    fc.constantFrom(Buffer.from('{"after":-1}').toString('base64url'), Buffer.from('{"after":1e300}').toString('base64url'), 'e30', ''),
  );
  const limit = fc.oneof(fc.integer({ min: -2, max: 600 }).map(String), fc.constantFrom('0x10', '1e2', ' 500', '%20500', '5.0', '+5', '', '9'.repeat(30)));
  /** Present one time in `1 + absent`: a query with every filter at once would hide what one filter alone lets through. */
  const sometimes = <T>(arbitrary: fc.Arbitrary<T>, absent = 2) => fc.oneof({ weight: absent, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary });
  const listQuery = fc
    .record({
      q: sometimes(text, 1),
      tag: sometimes(text, 3),
      parent_user_group_id: sometimes(fc.oneof(fc.constantFrom('parent', 'child', 'g-1'), text), 3),
      hierarchy_level: sometimes(fc.oneof(fc.constantFrom('L1', 'L2'), text), 3),
      limit: sometimes(limit),
      cursor: sometimes(cursor),
      api_environment_tag: sometimes(fc.constantFrom(...ENVIRONMENTS), 1),
    })
    .map((query) => Object.fromEntries(Object.entries(query).filter(([, value]) => value !== undefined)) as Record<string, string>);
  const probe = () => fc.constantFrom(...probes);

  it(`list and search: any query, filter, cursor and limit answers only the caller's groups, in its environments (seed ${SEED})`, async () => {
    await fc.assert(
      fc.asyncProperty(probe(), listQuery, fc.nat(), async (caller, rawQuery, pick) => {
        const query: Record<string, string> = { ...rawQuery };
        if (query.cursor?.startsWith('c') && query.cursor.length === 2) query.cursor = cursors[pick % cursors.length];
        // The one environment a page may hold: the one asked for, else the token's own.
        const environment = query.api_environment_tag ?? caller.environment ?? 'Customer';
        // Follow the pages: a cursor leads on only within the caller's own groups.
        for (let page = 0; page < 3; page++) {
          const res = await built.request('GET', '/api/users', { token: caller.token, query });
          assertOwnDataOnly(caller, res, `GET /api/users ${JSON.stringify(query)}`);
          if (res.status !== 200) break;
          for (const group of res.body.user_groups) {
            const where = `${caller.name}: GET /api/users ${JSON.stringify(query)} answered ${group.provided_id} (${group.api_environment_tag})`;
            assert.equal(group.api_environment_tag, environment, where);
          }
          if (!res.body.next_cursor) break;
          query.cursor = res.body.next_cursor;
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true, includeErrorInReport: true },
    );
  });

  it(`tags: any prefix, cursor and limit lists only the caller's tags, of the environment it may see (seed ${SEED})`, async () => {
    const tagQuery = fc
      .record({
        q: sometimes(text, 1),
        limit: sometimes(limit),
        cursor: sometimes(cursor),
        api_environment_tag: sometimes(fc.constantFrom(...ENVIRONMENTS), 1),
      })
      .map((query) => Object.fromEntries(Object.entries(query).filter(([, value]) => value !== undefined)) as Record<string, string>);
    await fc.assert(
      fc.asyncProperty(probe(), tagQuery, fc.nat(), async (caller, rawQuery, pick) => {
        const query: Record<string, string> = { ...rawQuery };
        if (query.cursor?.startsWith('c') && query.cursor.length === 2) query.cursor = tagCursors[pick % tagCursors.length];
        const environment = query.api_environment_tag ?? caller.environment ?? 'Customer';
        for (let page = 0; page < 3; page++) {
          const res = await built.request('GET', '/api/group_tags', { token: caller.token, query });
          assertOwnDataOnly(caller, res, `GET /api/group_tags ${JSON.stringify(query)}`);
          if (res.status !== 200) break;
          for (const tag of res.body.group_tags) {
            if (tag.name.startsWith('mark-'))
              assert.equal(tag.name, `mark-${caller.account}-${environment}`, `${caller.name}: GET /api/group_tags ${JSON.stringify(query)}`);
          }
          if (!res.body.next_cursor) break;
          query.cursor = res.body.next_cursor;
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true, includeErrorInReport: true },
    );
  });

  it(`history, get-or-create and embed tokens: any user_group_id reaches only the caller's own groups (seed ${SEED})`, async () => {
    const id = fc.oneof(fc.constantFrom('g-1', 'parent', 'child', `${EDGES[1]}-1`), text);
    await fc.assert(
      fc.asyncProperty(probe(), id, fc.constantFrom(...ENVIRONMENTS), async (caller, user_group_id, env) => {
        const query = { user_group_id, api_environment_tag: env };
        assertOwnDataOnly(caller, await built.request('GET', '/api/user/history', { token: caller.token, query }), `history ${JSON.stringify(query)}`);
        assertOwnDataOnly(caller, await built.request('GET', '/api/user', { token: caller.token, query }), `get-or-create ${JSON.stringify(query)}`);
        const minted = await built.request('POST', '/api/embed_token', { token: caller.token, body: query });
        assertOwnDataOnly(caller, minted, `embed_token ${JSON.stringify(query)}`);
        if (minted.status === 200) {
          const context = await built.request('GET', '/api/embed/context', { bearer: minted.body.embed_token });
          assertOwnDataOnly(caller, context, 'the context of the minted token');
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true, includeErrorInReport: true },
    );
  });

  /** docs/api.md, "The viewer": names the service uses, in any case, are refused as attribute keys. */
  const isReservedAttribute = (key: string) =>
    key.toLowerCase().startsWith('ugs_') ||
    ['iss', 'sub', 'aud', 'exp', 'nbf', 'iat', 'jti', 'user_group_id', 'user_group_name', 'viewer_id', 'viewer_attributes'].includes(key.toLowerCase());

  it(`embed tokens: any id and any viewer attributes, minted by any caller, name the caller's account and environment in sub, and sign the group's properties as the group has them (seed ${SEED})`, async () => {
    const id = fc.oneof(fc.constantFrom('g-1', 'parent', 'child', 'marked', `${EDGES[1]}-1`), text);
    const attributes = fc.dictionary(
      fc.oneof(fc.constantFrom('owner', 'env', 'region', 'sub', 'ugs_account', 'UGS_Environment', 'viewer_id'), fc.stringMatching(/^[a-z_]{1,10}$/)),
      fc.oneof(fc.constantFrom(...ACCOUNTS, ...ENVIRONMENTS), fc.stringMatching(/^[a-z]{0,8}$/), fc.integer()),
      { maxKeys: 4 },
    );
    await fc.assert(
      fc.asyncProperty(probe(), id, fc.constantFrom(...ENVIRONMENTS), attributes, async (caller, user_group_id, env, attrs) => {
        const what = `${caller.name} minting ${JSON.stringify({ user_group_id, env, attrs })}`;
        const minted = await built.request('POST', '/api/embed_token', {
          token: caller.token,
          body: { user_group_id, api_environment_tag: env, viewer: { id: 'v', attributes: attrs } },
        });
        assertOwnDataOnly(caller, minted, what);
        const reserved = Object.keys(attrs).filter(isReservedAttribute);
        if (reserved.length > 0) {
          // Refused: for those names, unless the body broke a rule of its schema first (an id with a control character).
          assert.equal(minted.status, 400, `${what}: ${minted.text}`);
          const details = minted.body.error.details ?? [];
          const named = reserved.map((key) => ({ field: `viewer.attributes.${key}`, issue: 'reserved' }));
          assert.ok(isDeepStrictEqual(details, named) || details.every((detail) => detail.issue !== 'reserved'), `${what}: ${minted.text}`);
          return;
        }
        if (minted.status !== 200) return; // not the caller's group, or an environment it may not use: answered elsewhere
        const claims = decodeJwt(minted.body.embed_token);
        assert.deepEqual(
          [claims.sub, claims.ugs_account, claims.ugs_environment, claims.ugs_user_group_id],
          [`${caller.account}:${env}:${user_group_id}`, caller.account, env, user_group_id],
          what,
        );
        const {
          user_group_id: _id,
          user_group_name: _name,
          viewer_id: _viewer,
          viewer_attributes,
          ...properties
        } = claims.ugs_variables as Record<string, unknown>;
        assert.deepEqual(viewer_attributes, { ...attrs }, what);
        const group = await built.request('GET', '/api/user/lookup', { token: caller.token, query: { user_group_id, api_environment_tag: env } });
        assert.equal(group.status, 200, `${what}: ${group.text}`);
        assert.deepEqual(properties, group.body.user_group.computed_properties ?? {}, `${what}: the variables are the group's properties`);
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true, includeErrorInReport: true },
    );
  });

  it(`introspection: another account's embed tokens, and those of a forbidden environment, are never active (seed ${SEED})`, async () => {
    await fc.assert(
      fc.asyncProperty(probe(), fc.constantFrom(...ACCOUNTS), fc.constantFrom(...ENVIRONMENTS), fc.nat(), async (caller, account, env, pick) => {
        const tokens = embedTokens[account][env];
        const res = await built.request('POST', '/api/embed/introspect', { token: caller.token, body: { token: tokens[pick % tokens.length] } });
        assert.equal(res.status, 200, res.text);
        const visible = account === caller.account && (caller.environment === null || caller.environment === env);
        assert.equal(res.body.active, visible, `${caller.name} introspecting ${account}/${env}: ${res.text}`);
        assertOwnDataOnly(caller, res, `introspect ${account}/${env}`);
      }),
      { numRuns: 60, seed: SEED, endOnFailure: true, includeErrorInReport: true },
    );
  });

  it(`API tokens: an admin sees and revokes only its account's tokens, and only its environment's when restricted (seed ${SEED})`, async () => {
    const admins = () => fc.constantFrom(...probes.filter((p) => p.name.includes('admin')));
    await fc.assert(
      fc.asyncProperty(admins(), fc.nat(), async (caller, pick) => {
        // Every token as the database has it (the workloads above created some over HTTP).
        const rows = await database.handle.db.selectFrom('api_tokens').select(['id', 'account_id', 'allowed_environment']).execute();
        const owner = new Map(rows.map((row) => [Number(row.id), row]));
        const mine = (id: number) =>
          Number(owner.get(id)?.account_id) === caller.accountId && (caller.environment === null || owner.get(id)?.allowed_environment === caller.environment);
        const listed = await built.request('GET', '/api/api_tokens', { token: caller.token });
        assert.equal(listed.status, 200, listed.text);
        for (const token of listed.body.api_tokens) assert.ok(mine(token.id), `${caller.name} lists token ${token.id}, not its to see`);
        const history = await built.request('GET', '/api/api_tokens/history', { token: caller.token });
        assert.equal(history.status, 200, history.text);
        for (const entry of history.body.entries) assert.ok(mine(entry.api_token_id), `${caller.name} sees the history of token ${entry.api_token_id}`);
        const ids = [...owner.keys()];

        const target = ids[pick % ids.length];
        const visible = listed.body.api_tokens.some((token: { id: number }) => token.id === target);
        // Revoking what it may not see is not found, and changes nothing; what it sees is left alone here.
        if (!visible) {
          const res = await built.request('DELETE', `/api/api_tokens/${target}`, { token: caller.token });
          assert.equal(res.status, 404, `${caller.name} revoking ${target}: ${res.text}`);
        }
      }),
      { numRuns: 60, seed: SEED, endOnFailure: true, includeErrorInReport: true },
    );
  });

  it('tags: one tenant at its tag bound refuses only its own new tags; every other account and environment adds tags as before, and its answers hold only its own data', async () => {
    const admin = (account: Account) => probes.find((p) => p.account === account && p.environment === null)!;
    async function tagsOf(caller: Probe, env: Environment): Promise<string[]> {
      const names: string[] = [];
      const query: Record<string, string> = { api_environment_tag: env, limit: '500' };
      for (;;) {
        const res = await built.request('GET', '/api/group_tags', { token: caller.token, query });
        assertOwnDataOnly(caller, res, `GET /api/group_tags ${env}`);
        names.push(...res.body.group_tags.map((tag) => tag.name));
        if (!res.body.next_cursor) return names;
        query.cursor = res.body.next_cursor;
      }
    }
    // An app over the same database whose bound is just above every tenant's set; alpha's Customer is filled up to it.
    const sizes = new Map<string, number>();
    for (const account of ACCOUNTS) for (const env of ENVIRONMENTS) sizes.set(`${account}/${env}`, (await tagsOf(admin(account), env)).length);
    const bound = Math.max(...sizes.values()) + 2;
    const bounded = await buildTestApp(database, { keys: [secretKey], config: { webhookAllowPrivate: true, maxTagsPerEnvironment: bound } });
    try {
      const alpha = admin('alpha');
      for (let i = sizes.get('alpha/Customer')!; i < bound; i++) {
        const res = await bounded.request('POST', '/api/group_tags', { token: alpha.token, body: { name: `fill-${i}`, api_environment_tag: 'Customer' } });
        assert.equal(res.status, 201, res.text);
      }
      const mark = (account: Account, env: Environment) => ({ owner: account, env });
      const refused = await bounded.request('POST', '/api/user', {
        token: alpha.token,
        body: { user_group_id: 'over-the-bound', api_environment_tag: 'Customer', properties: mark('alpha', 'Customer'), group_tags: ['one-more'] },
      });
      assert.equal(refused.status, 409, refused.text);
      assert.equal(refused.body.error.code, 'tag_limit_reached');
      assertOwnDataOnly(alpha, refused, 'the refusal');
      assert.equal((await tagsOf(alpha, 'Customer')).length, bound);
      // Every other tenant, with every token that may write there.
      for (const caller of probes.filter((p) => p.name.includes('admin'))) {
        for (const env of ENVIRONMENTS) {
          if ((caller.account === 'alpha' && env === 'Customer') || (caller.environment !== null && caller.environment !== env)) continue;
          const res = await bounded.request('POST', '/api/user', {
            token: caller.token,
            body: { user_group_id: `bound-${caller.name}-${env}`, api_environment_tag: env, properties: mark(caller.account, env), group_tags: ['one-more'] },
          });
          assert.equal(res.status, 201, `${caller.name} in ${env}: ${res.text}`);
          assertOwnDataOnly(caller, res, `${caller.name} adding a tag in ${env}`);
          teamIds[caller.account].add(res.body.user_group.team_id);
        }
      }
      // The tenant at its bound still reads: its groups, a tag's groups, its tags.
      const page = await bounded.request('GET', '/api/users', { token: alpha.token, query: { api_environment_tag: 'Customer', tag: 't', limit: '500' } });
      assert.equal(page.status, 200, page.text);
      assertOwnDataOnly(alpha, page, 'the listing at the bound');
      assert.equal(page.body.user_groups.length, PLAIN_GROUPS);
    } finally {
      await bounded.app.close();
    }
  });
});
