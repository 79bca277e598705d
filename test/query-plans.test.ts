// Every statement a request runs finds its index whatever the planner's statistics. The
// tables grow through the API, as in production, and are never analyzed (on PostgreSQL the
// test checks that no ANALYZE ran, by hand or by autovacuum): the state of a new deployment,
// or of a busy table whose autovacuum lags. Each statement the service sent during a
// workload of every operation is then explained, with its own parameters, as a custom and as
// a generic plan (PostgreSQL switches a prepared statement to the generic one after five
// runs), and must use the index meant for it, never a scan of a table. Then, on tables never
// analyzed, analyzed, and analyzed when small, the plain indexes an operator adds first are
// made one at a time: no statement may read them, and the hot ones keep their plans
// (docs/operations.md, "Indexes you may add").
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { sql } from 'kysely';
import SQLite from 'better-sqlite3';
import { BACKENDS, createTestDatabase, type Backend } from './helpers/backends.ts';
import { onConnection } from '../scripts/scratch-database.ts';
import { buildTestApp, issueTestToken, newSecretKey, openTestDatabase, type BuiltApp, type OpenDatabase } from './helpers/harness.ts';
import { runEveryOperation } from './helpers/workload.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { withUnaryPlusParameters } from '../src/db/sqlite-parameters.ts';
import { eventually } from './helpers/wait.ts';
import { retryingLockWaits } from './helpers/lock-waits.ts';

/**
 * Which index a statement must use, recognised by its SQL: on PostgreSQL by the index's name,
 * on SQLite by the search it reports (its unique constraints' indexes are unnamed there).
 */
const P = String.raw`(?:\$\d+|\?)`;
/** The keyed walk of an index on (key, team_id): a row comparison from the cursor on PostgreSQL, the key's value on SQLite (tenant.ts, keyedWalk). */
const walkOf = (key: string) => new RegExp(String.raw`${key}(?:, user_groups\.team_id\) > \(|\s*= \?)`);
/**
 * `hot`: a statement of a hot path (the lookups, get-or-create, the embed context, the listing's
 * pages, search); `batched` when PostgreSQL runs the calls of one turn as one statement.
 */
const EXPECTED_INDEXES: { statement: RegExp; postgres: string; sqlite: string; hot?: 'alone' | 'batched' }[] = [
  // A group by its user_group_id, alone and batched, and (the bulk upsert) several at once.
  {
    statement: /\|\| '\/' \|\| "user_groups"\."provided_id"\) (?:= |in \()/,
    postgres: 'user_groups_scoped_id',
    sqlite: 'USING INDEX user_groups_scoped_id (<expr>=?)',
    hot: 'batched',
  },
  {
    statement: new RegExp(
      String.raw`"user_groups"\."token_hash" = |user_groups\.token_hash = ${P}|token_hash = k\.token_hash|where "account_id" = ${P} and "token_hash" = `,
    ),
    postgres: 'user_groups_token_hash_key',
    sqlite: '(token_hash=?)',
    hot: 'batched',
  },
  // The group an embed token names, alone and batched.
  {
    statement: /^select [^;]*user_groups\.team_id = (?:\$\d+|\?|k\.team_id) and /,
    postgres: 'user_groups_pkey',
    sqlite: 'USING INTEGER PRIMARY KEY',
    hot: 'batched',
  },
  // Every chain reads each parent by primary key (the recursive step).
  { statement: /with recursive chain/, postgres: 'user_groups_pkey', sqlite: 'USING INTEGER PRIMARY KEY', hot: 'batched' },
  { statement: walkOf(String.raw`'/' \|\| environment\)`), postgres: 'user_groups_listing', sqlite: 'USING INDEX user_groups_listing', hot: 'batched' },
  { statement: /'\/' \|\| name\) >= /, postgres: 'user_groups_name_search', sqlite: 'USING INDEX user_groups_name_search', hot: 'batched' },
  {
    statement: /\|\| '\/' \|\| "user_groups"\."provided_id"\) >= /,
    postgres: 'user_groups_scoped_id',
    sqlite: 'USING INDEX user_groups_scoped_id (<expr>>? AND <expr><?)',
    hot: 'batched',
  },
  { statement: walkOf(String.raw`'#' \|\| hierarchy_level\)`), postgres: 'user_groups_level', sqlite: 'USING INDEX user_groups_level', hot: 'alone' },
  { statement: walkOf(String.raw`user_groups\.parent_team_id`), postgres: 'user_groups_children', sqlite: 'user_groups_children', hot: 'alone' },
  { statement: /where "parent_team_id" = /, postgres: 'user_groups_children', sqlite: 'user_groups_children' },
  { statement: /with recursive subtree/, postgres: 'user_groups_children', sqlite: 'user_groups_children' },
  // SQLite names a primary key's index sqlite_autoindex_*: recognised by its columns.
  { statement: /from "user_group_tags" inner join|exists \(select 1 from user_group_tags/, postgres: 'user_group_tags_filter', sqlite: '(scope=? AND tag=?' },
  { statement: /delete from "user_group_tags" where "team_id" = /, postgres: 'user_group_tags_team', sqlite: 'user_group_tags_team' },
  // The tag set: a tenant's tags by its key (a page, one tag), each tag's count and carriers by the tag rows' key, the renamed groups by primary key.
  { statement: /from "group_tag_set" where "account_id" = /, postgres: 'group_tag_set_key', sqlite: '(account_id=? AND environment=?' },
  { statement: /select count\(\*\) from user_group_tags where user_group_tags\.scope = /, postgres: 'user_group_tags_filter', sqlite: '(scope=? AND tag=?' },
  { statement: /delete from "user_group_tags" where "scope" = /, postgres: 'user_group_tags_filter', sqlite: '(scope=? AND tag=?' },
  { statement: /update "user_groups" set "group_tags" = case team_id /, postgres: 'user_groups_pkey', sqlite: 'USING INTEGER PRIMARY KEY' },
  // A bulk upsert's changes to existing groups: each group by primary key, never a walk of the tenant.
  { statement: /^with v\("v_team_id"[\s\S]*\) update user_groups set /, postgres: 'user_groups_pkey', sqlite: 'USING INTEGER PRIMARY KEY' },
  { statement: /from "api_tokens" where "token_hash" = /, postgres: 'api_tokens_token_hash_key', sqlite: 'SEARCH api_tokens USING INDEX', hot: 'alone' },
  { statement: /from retired_tokens\s+where retired_tokens\.token_hash = /, postgres: 'retired_tokens_pkey', sqlite: 'SEARCH retired_tokens USING INDEX' },
  { statement: /delete from "retired_tokens" where "team_id" = /, postgres: 'retired_tokens_team', sqlite: 'USING INDEX retired_tokens_team' },
  { statement: /from "audit_log" where "account_id" = /, postgres: 'audit_log_subject', sqlite: 'USING INDEX audit_log_subject' },
  { statement: /from "audit_log" where "subject_type" = /, postgres: 'audit_log_team', sqlite: 'USING INDEX audit_log_team' },
];
const HOT_INDEXES = EXPECTED_INDEXES.filter(({ hot }) => hot);
const SCANNED_TABLE =
  /Seq Scan on (user_groups|user_group_tags|group_tag_set|api_tokens|retired_tokens|audit_log)\b|\bSCAN (user_groups|user_group_tags|group_tag_set|api_tokens|retired_tokens|audit_log|p1|p2)\b/;
/** A range of every team_id above a cursor, read as an index condition: as costly as a scan. */
const TEAM_ID_RANGE = /user_groups_pkey[^\n]*\n\s*Index Cond: \(team_id > |USING INTEGER PRIMARY KEY \(rowid>\?\)/;

interface Captured {
  sql: string;
  parameters: readonly unknown[];
}

const GROUPS = 3000;

/**
 * Grows the tables through the API: two accounts, both environments, the way real tables
 * grow. Some of the caller's groups carry a tag, and some are children of one parent, for the
 * pages those filters walk. `atCount(n)` runs after each batch, with the groups made so far.
 */
async function growThroughApi(built: BuiltApp, { token, other }: { token: string; other: string }, atCount?: (made: number) => Promise<void>): Promise<void> {
  assert.equal((await built.request('POST', '/api/user', { token, body: { user_group_id: 'grown-parent' } })).status, 201);
  for (let start = 0; start < GROUPS; start += 50) {
    const batch = Array.from({ length: 50 }, (_, j) => start + j);
    const answers = await Promise.all(
      batch.map((i) =>
        // Creates of one tag wait for its count's row: on a loaded machine past the lock timeout.
        retryingLockWaits(() =>
          built.request('POST', '/api/user', {
            token: i % 3 === 0 ? other : token,
            body: {
              user_group_id: `grown-${i}`,
              name: `Grown ${i}`,
              properties: { n: i },
              api_environment_tag: i % 5 === 0 ? 'Testing' : 'Customer',
              ...(i % 4 === 1 ? { group_tags: ['grown'] } : {}),
              ...(i % 3 !== 0 && i % 5 !== 0 && i % 7 === 2 ? { parent_user_group_id: 'grown-parent' } : {}),
            },
          }),
        ),
      ),
    );
    for (const answer of answers) assert.equal(answer.status, 201, answer.text);
    await atCount?.(start + 50);
  }
}

interface GrownTables {
  /** The grown database, closed: opened only as the template of each suite's copy. */
  url: string;
  drop(): Promise<void>;
  keys: Buffer[];
  token: string;
  other: string;
}

const grown = new Map<Backend, Promise<GrownTables>>();

/**
 * The tables of `backend` grown once through the API (growThroughApi) and never analyzed;
 * each suite that reads them opens a copy of its own (scripts/scratch-database.ts), which holds
 * the same rows, pages and planner statistics (none), and which its workload and indexes may
 * change. Growing them cost most of this file's time, once for every suite.
 */
function grownTables(backend: Backend): Promise<GrownTables> {
  let tables = grown.get(backend);
  if (!tables) {
    tables = (async () => {
      const database = await createTestDatabase(backend);
      const { handle } = await openMigratedDatabase({ databaseUrl: database.url });
      const keys = [newSecretKey()];
      const built = await buildTestApp({ handle }, { keys, config: { webhookAllowPrivate: true } });
      try {
        const token = (await issueTestToken(handle, { account: 'plans', scopes: ['read', 'write', 'admin'] })).token;
        const other = (await issueTestToken(handle, { account: 'plans-other' })).token;
        await growThroughApi(built, { token, other });
        return { url: database.url, keys, token, other, drop: database.drop };
      } finally {
        await built.app.close();
        await handle.close();
      }
    })();
    grown.set(backend, tables);
  }
  return tables;
}

after(async () => {
  for (const tables of grown.values()) await (await tables.catch(() => undefined))?.drop();
});

/** The caller's own groups in Customer (see growThroughApi): not every third, not every fifth. */
const EXISTING = Array.from({ length: GROUPS }, (_, i) => i)
  .filter((i) => i % 3 !== 0 && i % 5 !== 0)
  .map((i) => `grown-${i}`);

for (const backend of BACKENDS) {
  describe(`[${backend}] query plans on tables that were never analyzed`, () => {
    let database: OpenDatabase;
    let built: BuiltApp;
    let token: string;
    const captured: Captured[] = [];
    let capturing = false;

    let tables: GrownTables;

    before(async () => {
      tables = await grownTables(backend);
      database = await openTestDatabase(
        backend,
        {
          onQuery: (event) => {
            if (capturing) captured.push({ sql: event.query.sql, parameters: event.query.parameters });
          },
        },
        { copyOf: tables.url },
      );
      built = await buildTestApp(database, { keys: tables.keys, config: { webhookAllowPrivate: true } }); // the workload's webhook endpoint is on 127.0.0.1
      token = tables.token;
    });

    after(async () => {
      await built?.app.close();
      await database?.close();
    });

    /** Runs every operation of the API once (test/helpers/workload.ts), capturing its statements. */
    async function workload(): Promise<Captured[]> {
      captured.length = 0;
      capturing = true;
      try {
        await runEveryOperation({
          app: built.app,
          request: built.request,
          token,
          environment: 'Customer',
          existing: EXISTING,
          search: { id: 'grown-1', name: 'Grown 2' },
          run: 'plan',
        });
      } finally {
        capturing = false;
      }
      const distinct = new Map<string, Captured>();
      for (const statement of captured) if (/^\s*(select|insert|update|delete|with)\b/i.test(statement.sql)) distinct.set(statement.sql, statement);
      return [...distinct.values()];
    }

    it('plans: the tables grew through the API and were never analyzed', {
      skip: backend !== 'postgres' && "PostgreSQL only: it reads PostgreSQL's pg_stat_user_tables",
    }, async () => {
      // The grown tables' own counters (a copy's start at zero), then the copy's planner
      // statistics, which it took from them: none.
      const grownClient = new pg.Client({ connectionString: tables.url });
      await grownClient.connect();
      try {
        const { rows } = await grownClient.query(
          `select relname, last_analyze, last_autoanalyze, n_live_tup from pg_stat_user_tables where relname in ('user_groups', 'audit_log')`,
        );
        assert.equal(rows.length, 2);
        for (const row of rows) {
          assert.equal(row.last_analyze, null, `${row.relname} was analyzed`);
          assert.equal(row.last_autoanalyze, null, `${row.relname} was analyzed by autovacuum`);
        }
      } finally {
        await grownClient.end();
      }
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        const { rows } = await client.query(
          `select c.relname, c.reltuples, (select count(*) from pg_statistic s where s.starelid = c.oid)::int as statistics
             from pg_class c where c.relname in ('user_groups', 'audit_log') and c.relkind = 'r'`,
        );
        assert.equal(rows.length, 2);
        for (const row of rows)
          assert.deepEqual([row.relname, row.reltuples, row.statistics], [row.relname, -1, 0], `${row.relname} of the copy has statistics`);
      } finally {
        await client.end();
      }
    });

    it("plans: the service's connections never JIT-compile a statement, which a large never-analyzed table's estimates would make it do", {
      skip: backend !== 'postgres' && 'PostgreSQL only: SQLite has no JIT',
    }, async () => {
      // At 1,000,000 groups a batched search page's estimated cost passed jit_above_cost, and
      // compiling it took longer than its pages (docs/performance.md, "Why the code is the way it is").
      const sessions = await Promise.all(
        Array.from({ length: 3 }, () => sql<{ jit: string }>`select current_setting('jit') as jit, pg_sleep(0.05)`.execute(database.handle.db)),
      );
      assert.deepEqual(
        sessions.map(({ rows }) => rows[0]!.jit),
        ['off', 'off', 'off'],
        'every pooled connection, not only the first',
      );
    });

    it('plans: every statement a request runs uses its index, on a custom and on a generic plan', async () => {
      const statements = await workload();
      assert.ok(statements.length >= 15, `captured ${statements.length} statements`);
      const plans = backend === 'postgres' ? await postgresPlans(database.url, statements) : sqlitePlans(database.url, statements);
      const report = plans.map((p) => `${p.sql}\n  ${p.plan.replace(/\n/g, '\n  ')}`).join('\n\n');
      for (const { sql, plan } of plans) {
        assert.doesNotMatch(plan, SCANNED_TABLE, `a table scan:\n${sql}\n${plan}\n\nall plans:\n${report}`);
        assert.doesNotMatch(plan, TEAM_ID_RANGE, `a scan of every team_id above the cursor:\n${sql}\n${plan}`);
        for (const { statement, ...expected } of EXPECTED_INDEXES) {
          const index = expected[backend];
          if (statement.test(sql)) assert.ok(plan.includes(index), `expected ${index}:\n${sql}\n${plan}`);
        }
      }
      // A page of the listing, of a level or of a parent's children is walked by its index up
      // to the page's end, and only then held to the tenant: below the Limit, the tenant's two
      // conditions made PostgreSQL, without statistics, expect one row and sort the tenant's
      // whole range instead of walking it in order (docs/performance.md, "Why the code is the way it is").
      if (backend === 'postgres') {
        for (const { sql, plan } of plans) {
          const page = /as walk_key/.test(sql);
          if (!page) continue;
          for (const part of plan.split(/^generic:$/m)) {
            const tenantFilter = part.search(/account_id \+ 0\) = /);
            assert.ok(tenantFilter !== -1 && tenantFilter < part.indexOf('Limit'), `the tenant's conditions below the page's Limit:\n${sql}\n${plan}`);
          }
        }
      }
      // The hot statements were among them, on both the single and (PostgreSQL) the batched path.
      const seen = (pattern: RegExp) => plans.some((p) => pattern.test(p.sql));
      for (const { statement, ...expected } of EXPECTED_INDEXES) assert.ok(seen(statement), `no statement for ${expected[backend]}:\n${report}`);
      if (backend === 'postgres') {
        assert.ok(seen(/cross join lateral[\s\S]*= k\.scoped_id/), 'the batched identity lookup ran');
        assert.ok(seen(/cross join lateral[\s\S]*token_hash = k\.token_hash/), 'the batched token lookup ran');
      }
    });

    it('plans: a page at limit 100 and 500, of the listing, a search, a tag, a parent or a level, walks its index in order', async () => {
      captured.length = 0;
      capturing = true;
      try {
        for (const limit of ['100', '500']) {
          for (const filter of <Record<string, string>[]>[
            {},
            { q: 'grown-1' },
            { q: 'Grown 2' },
            { tag: 'grown' },
            { parent_user_group_id: 'grown-parent' },
            { hierarchy_level: 'User' },
          ]) {
            const page = await built.request('GET', '/api/users', { token, query: { limit, ...filter } });
            assert.equal(page.status, 200, page.text);
          }
        }
        // Pages asked for together: on PostgreSQL they go as one statement (the batched form),
        // and each answers what it answers alone.
        const queries: Record<string, string>[] = [
          { limit: '500' },
          { limit: '100' },
          { limit: '500', q: 'grown-1' },
          { limit: '100', q: 'Grown 2' },
          { limit: '100', parent_user_group_id: 'grown-parent' },
        ];
        const alone: string[] = [];
        for (const query of queries) alone.push((await built.request('GET', '/api/users', { token, query })).text);
        const together = await Promise.all(
          Array.from({ length: 10 }, () => queries)
            .flat()
            .map((query) => built.request('GET', '/api/users', { token, query })),
        );
        together.forEach((page, i) => assert.equal(page.text, alone[i % queries.length], `page ${i} asked for together`));
      } finally {
        capturing = false;
      }
      const pages = [
        ...new Map(
          captured
            .filter((c) => /\buser_groups\b/.test(c.sql) && /\blimit\b/i.test(c.sql) && (!/with recursive/.test(c.sql) || /with ordinality/.test(c.sql)))
            .map((c) => [c.sql, c]),
        ).values(),
      ];
      assert.ok(pages.length >= 5, `captured ${pages.length} page statements`);
      if (backend === 'postgres') {
        assert.ok(pages.filter((p) => /with ordinality/.test(p.sql) && !/with recursive/.test(p.sql)).length >= 2, 'the batched pages ran');
        assert.ok(
          pages.some((p) => /with recursive chain[\s\S]*with ordinality/.test(p.sql)),
          'the batched chains of the parents ran',
        );
      }
      const plans = backend === 'postgres' ? await postgresPlans(database.url, pages) : sqlitePlans(database.url, pages);
      for (const { sql, plan } of plans) {
        assert.doesNotMatch(plan, SCANNED_TABLE, `a table scan:\n${sql}\n${plan}`);
        for (const { statement, ...expected } of EXPECTED_INDEXES) {
          if (statement.test(sql)) assert.ok(plan.includes(expected[backend]), `expected ${expected[backend]}:\n${sql}\n${plan}`);
        }
        // PostgreSQL without statistics guesses a tenant's range at a few rows: a `limit`
        // above that guess made it read the whole range and sort it under the page's Limit, at
        // the cost of the whole tenant. A walk reads in its index's order up to its Limit: no
        // sort and no bitmap scan (which reads a range unordered) below it. A search is the
        // exception: it sorts what its two prefix ranges matched, never the tenant.
        if (backend !== 'postgres' || /union all/i.test(sql)) continue;
        for (const part of plan.split(/^generic:$/m)) {
          const belowLimit = part.slice(Math.max(0, part.search(/->\s+Limit|^\s*Limit/m)));
          assert.doesNotMatch(belowLimit, /\bSort\b|Bitmap Heap Scan/, `a page sorted or read unordered below its Limit:\n${sql}\n${plan}`);
        }
      }
    });
  });
}

// ---- The tag set at 100,000 tags (docs/api.md, "Tags") ----
// One tenant grown to 100,000 tags the way an account gets there, through the bulk upsert (two
// calls of 1,000 groups with 50 new tags each), beside another tenant's, never analyzed. A page
// of the list counts each of its tags' groups: that count must be a lookup of the tag in the
// tag rows' key (scope, tag), never a read of every tag row of the tenant with the tag as a
// filter, which is what comparing the set's names ("C" collation on PostgreSQL) with the tag
// rows' (the default collation) did: 4.3 s for a page of 100, a statement timeout at 500.
const TAG_GROUPS_PER_CALL = 1000;
const NEW_TAGS_PER_GROUP = 50;
const TAGS = 2 * TAG_GROUPS_PER_CALL * NEW_TAGS_PER_GROUP;
/** The count of one tag's groups, by the tag rows' key: the scope and the tag both in the index condition. */
const COUNT_BY_TAG = /Index (?:Only )?Scan using user_group_tags_filter on user_group_tags[^\n]*\n\s*Index Cond: \(\(scope = [^\n]*\) AND \(tag = /;

for (const backend of BACKENDS) {
  describe(`[${backend}] query plans of the tag set at ${TAGS.toLocaleString('en-US')} tags, never analyzed`, () => {
    let database: OpenDatabase;
    let built: BuiltApp;
    let token: string;
    const captured: Captured[] = [];
    let capturing = false;

    before(async () => {
      database = await openTestDatabase(backend, {
        onQuery: (event) => {
          if (capturing) captured.push({ sql: event.query.sql, parameters: event.query.parameters });
        },
      });
      built = await buildTestApp(database, { config: { maxTagsPerEnvironment: 2 * TAGS } });
      token = (await issueTestToken(database.handle, { account: 'tag-plans' })).token;
      const other = (await issueTestToken(database.handle, { account: 'tag-plans-other' })).token;
      const upsert = async (caller: string, groups: Record<string, unknown>[]) => {
        const res = await built.request('POST', '/api/users/upsert', { token: caller, body: { user_groups: groups } });
        assert.equal(res.status, 200, res.text.slice(0, 500));
        assert.equal(res.body.counts.created, groups.length, res.text.slice(0, 500));
      };
      await upsert(
        other,
        Array.from({ length: 100 }, (_, g) => ({ user_group_id: `other-${g}`, group_tags: Array.from({ length: 5 }, (_, j) => `tag-${g}-${j}`) })),
      );
      for (let call = 0; call < 2; call++) {
        await upsert(
          token,
          Array.from({ length: TAG_GROUPS_PER_CALL }, (_, i) => {
            const g = call * TAG_GROUPS_PER_CALL + i;
            return { user_group_id: `tagged-${g}`, group_tags: Array.from({ length: NEW_TAGS_PER_GROUP }, (_, j) => `tag-${g}-${j}`) };
          }),
        );
      }
    });

    after(async () => {
      await built?.app.close();
      await database?.close();
    });

    it('plans: the tag tables grew through the API and were never analyzed', {
      skip: backend !== 'postgres' && "PostgreSQL only: it reads PostgreSQL's pg_stat_user_tables",
    }, async () => {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        // A backend reports its transactions' counts to pg_stat_user_tables a second or so after
        // they commit: the bulk upsert's last parts may not be counted yet.
        const rows = await eventually(
          () => `the tag tables' counts in pg_stat_user_tables (${TAGS} rows each)`,
          async () => {
            const { rows } = await client.query(
              `select relname, last_analyze, last_autoanalyze, n_live_tup from pg_stat_user_tables where relname in ('user_group_tags', 'group_tag_set')`,
            );
            return rows.length === 2 && rows.every((row) => Number(row.n_live_tup) >= TAGS) ? rows : undefined;
          },
        );
        for (const row of rows) {
          assert.equal(row.last_analyze, null, `${row.relname} was analyzed`);
          assert.equal(row.last_autoanalyze, null, `${row.relname} was analyzed by autovacuum`);
        }
      } finally {
        await client.end();
      }
    });

    it("plans: a page of the tag list at limit 100 and 500 counts each tag's groups by its index (scope and tag), on a custom and a generic plan", async () => {
      captured.length = 0;
      capturing = true;
      try {
        // The first page, then the next one at the larger limit.
        const cursors: (string | null)[] = [null];
        for (const limit of ['100', '500']) {
          const page = await built.request('GET', '/api/group_tags', { token, query: { limit, cursor: cursors[cursors.length - 1] } });
          assert.equal(page.status, 200, page.text.slice(0, 500));
          assert.equal(page.body.group_tags.length, Number(limit));
          assert.ok(
            page.body.group_tags.every((tag) => tag.user_group_count === 1),
            'each tag is on one group',
          );
          cursors.push(page.body.next_cursor);
        }
        const search = await built.request('GET', '/api/group_tags', { token, query: { limit: '500', q: 'tag-1999-' } });
        assert.deepEqual(
          search.body.group_tags.map((tag) => tag.name),
          Array.from({ length: NEW_TAGS_PER_GROUP }, (_, j) => `tag-1999-${j}`).sort(),
        );
      } finally {
        capturing = false;
      }
      const statements = [...new Map(captured.filter((c) => /\bgroup_tag_set\b/.test(c.sql)).map((c) => [c.sql, c])).values()];
      assert.ok(
        statements.some((c) => /select count\(\*\) from user_group_tags/.test(c.sql)),
        'the counts ran',
      );
      const plans = backend === 'postgres' ? await postgresPlans(database.url, statements) : sqlitePlans(database.url, statements);
      for (const { sql, plan } of plans) {
        assert.doesNotMatch(plan, SCANNED_TABLE, `a table scan:\n${sql}\n${plan}`);
        if (!/select count\(\*\) from user_group_tags/.test(sql)) continue;
        if (backend === 'sqlite') {
          assert.ok(plan.includes('(scope=? AND tag=?)'), `the count by scope and tag:\n${sql}\n${plan}`);
          continue;
        }
        for (const part of plan.split(/^generic:$/m)) {
          assert.match(part, COUNT_BY_TAG, `the count must look the tag up in the index:\n${sql}\n${plan}`);
          assert.doesNotMatch(part, /Filter: \(+tag = /, `the tag read as a filter over the tenant's tag rows:\n${sql}\n${plan}`);
        }
      }
    });
  });
}

/**
 * The plain indexes an operator, or a reporting tool, adds first to user_groups: the tenant, then
 * the listing's order or the name; the account; the caller's id (docs/operations.md, "Indexes
 * you may add").
 */
const OPERATOR_INDEXES = ['account_id, environment, team_id', 'account_id', 'account_id, environment, name', 'provided_id'];

/** The planner's statistics: none; taken on the grown tables; taken when they held a few groups, and never again. */
const STATISTICS = [
  { state: 'never analyzed', analyzeAt: undefined },
  { state: 'analyzed', analyzeAt: GROUPS },
  { state: 'analyzed when small', analyzeAt: 50 },
] as const;

/**
 * What a plan reads, in order: each table scan and index scan, on PostgreSQL for the custom and
 * the generic plan, on SQLite each step. Costs and estimates move when an index is made (it
 * counts the table's rows); the way to the rows must not.
 */
function accessPaths(backend: Backend, plan: string): string[] {
  if (backend === 'sqlite') return plan.split('\n').filter((step) => /^(SEARCH|SCAN) /.test(step));
  return [...plan.matchAll(/^(custom|generic):$|Seq Scan on \w+|(?<=(?:Index|Index Only|Bitmap Index) Scan(?: Backward)? (?:using|on) )\w+/gm)].map(
    (m) => m[0],
  );
}

async function onDatabase(url: string, statement: string): Promise<void> {
  if (url.startsWith('sqlite:')) {
    const connection = new SQLite(url.slice('sqlite:'.length));
    try {
      connection.exec(statement);
    } finally {
      connection.close();
    }
    return;
  }
  await onConnection(url, statement);
}

for (const backend of BACKENDS) {
  for (const { state, analyzeAt } of STATISTICS) {
    describe(`[${backend}] query plans with an index an operator added, tables ${state}`, () => {
      let database: OpenDatabase;
      let statements: Captured[];

      before(async () => {
        const captured: Captured[] = [];
        let capturing = false;
        const capture = (event: { query: { sql: string; parameters: readonly unknown[] } }) => {
          if (capturing) captured.push({ sql: event.query.sql, parameters: event.query.parameters });
        };
        // Statistics taken while the tables were small need tables grown of their own; the
        // others start from a copy of the tables grown once (grownTables), analyzed or not.
        const grownOnce = analyzeAt === 50 ? undefined : await grownTables(backend);
        database = await openTestDatabase(backend, { onQuery: (event) => capture(event) }, { copyOf: grownOnce?.url });
        const built = await buildTestApp(database, { keys: grownOnce?.keys, config: { webhookAllowPrivate: true } });
        try {
          let token: string;
          if (grownOnce) {
            token = grownOnce.token;
            if (analyzeAt === GROUPS) await onDatabase(database.url, 'analyze');
          } else {
            token = (await issueTestToken(database.handle, { account: 'plans', scopes: ['read', 'write', 'admin'] })).token;
            const other = (await issueTestToken(database.handle, { account: 'plans-other' })).token;
            await growThroughApi(built, { token, other }, async (made) => {
              if (made === analyzeAt) await onDatabase(database.url, 'analyze');
            });
          }
          capturing = true;
          await runEveryOperation({
            app: built.app,
            request: built.request,
            token,
            environment: 'Customer',
            existing: EXISTING,
            search: { id: 'grown-1', name: 'Grown 2' },
            run: 'plan',
          });
          // Pages alone, then asked for together (ten of each, as the page test above asks): on
          // PostgreSQL those of one turn go as one statement.
          const pages: Record<string, string>[] = [{}, { q: 'grown-1' }, { q: 'Grown 2' }, { parent_user_group_id: 'grown-parent' }, { tag: 'grown' }];
          for (const query of pages) assert.equal((await built.request('GET', '/api/users', { token, query })).status, 200);
          // Whether pages meet in one turn depends on the machine's load: asked again, a few
          // rounds at most, until PostgreSQL ran the listing's batched form.
          const listing = EXPECTED_INDEXES.find((expected) => expected.postgres === 'user_groups_listing')!.statement;
          const batchedListingRan = () => captured.some((s) => listing.test(s.sql) && /with ordinality/.test(s.sql));
          for (let round = 0; round < 5 && (round === 0 || (backend === 'postgres' && !batchedListingRan())); round++) {
            const together = await Promise.all(
              Array.from({ length: 10 }, () => pages)
                .flat()
                .map((query) => built.request('GET', '/api/users', { token, query })),
            );
            for (const page of together) assert.equal(page.status, 200, page.text);
          }
        } finally {
          capturing = false;
          await built.app.close();
        }
        const distinct = new Map<string, Captured>();
        for (const statement of captured) if (/^\s*(select|insert|update|delete|with)\b/i.test(statement.sql)) distinct.set(statement.sql, statement);
        statements = [...distinct.values()];
      });

      after(async () => {
        await database?.close();
      });

      it(`plans: with each plain index an operator adds first, no statement reads it and the hot ones keep their plans, alone and batched, custom and generic (tables ${state})`, async () => {
        const plansNow = () => (backend === 'postgres' ? postgresPlans(database.url, statements) : sqlitePlans(database.url, statements));
        const changed: string[] = [];
        // Each hot statement ran, and on PostgreSQL each batched one in its batched form too.
        for (const { statement, hot, ...expected } of EXPECTED_INDEXES.filter(({ hot }) => hot)) {
          const ran = statements.filter((s) => statement.test(s.sql));
          if (ran.length === 0) changed.push(`no statement for ${expected[backend]} ran`);
          else if (backend === 'postgres' && hot === 'batched' && !ran.some((s) => /with ordinality/.test(s.sql)))
            changed.push(`no batched statement for ${expected[backend]} ran`);
        }
        // Making any index also counts the table's rows and pages into the planner's figures
        // (PostgreSQL's index build updates reltuples and relpages; SQLite's sqlite_stat1 is
        // untouched). With figures of 50 groups, a join the planner thinks never runs (a parent
        // no group had then) is a tie between indexes, and the count alone can flip it. So the
        // plans without an operator's index are taken after an index no statement can use was
        // made and dropped, in the same figures the operator's index leaves behind.
        await onDatabase(database.url, 'create index counting_rows on user_groups (created_at)');
        await onDatabase(database.url, 'drop index counting_rows');
        const without = await plansNow();
        for (const { sql, plan } of without) {
          // api_tokens holds two rows here: with statistics, PostgreSQL rightly scans its one page.
          for (const { statement, ...expected } of HOT_INDEXES.filter(({ postgres }) => state === 'never analyzed' || !postgres.startsWith('api_tokens'))) {
            if (statement.test(sql) && !plan.includes(expected[backend]))
              changed.push(`expected ${expected[backend]}, without an index of the operator's:\n${sql}\n${plan}`);
          }
        }
        for (const columns of OPERATOR_INDEXES) {
          await onDatabase(database.url, `create index operator_index on user_groups (${columns})`);
          let withIndex: { sql: string; plan: string }[];
          try {
            withIndex = await plansNow();
          } finally {
            await onDatabase(database.url, 'drop index operator_index');
          }
          // No statement reads the operator's index, and a hot one reads what it read without it.
          withIndex.forEach(({ sql, plan }, i) => {
            const [now, was] = [accessPaths(backend, plan), accessPaths(backend, without[i].plan)];
            const hot = HOT_INDEXES.some(({ statement }) => statement.test(sql));
            if (now.some((step) => step.includes('operator_index')) || (hot && now.join('\n') !== was.join('\n')))
              changed.push(`with an index on (${columns}):\n${sql}\nwithout it: ${was.join(', ')}\nwith it: ${now.join(', ')}`);
          });
        }
        assert.deepEqual(changed, [], `tables ${state}: ${changed.length} plans not the ones their statements were written for:\n\n${changed.join('\n\n')}`);
      });
    });
  }
}

/**
 * Custom and generic plans of each statement, with its own parameters, as a prepared statement
 * gets them: PREPARE, then EXPLAIN EXECUTE under force_custom_plan (planned with the values, as
 * for its first five runs) and under force_generic_plan (what PostgreSQL may switch to after).
 */
async function postgresPlans(url: string, statements: Captured[]): Promise<{ sql: string; plan: string }[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const literal = (value: unknown): string => {
    if (value === null || value === undefined) return 'NULL';
    if (Array.isArray(value)) return client.escapeLiteral(`{${value.map((v) => `"${String(v).replace(/[\\"]/g, (c) => `\\${c}`)}"`).join(',')}}`);
    return client.escapeLiteral(String(value));
  };
  const text = (result: pg.QueryResult) => result.rows.map((r) => r['QUERY PLAN']).join('\n');
  try {
    const plans: { sql: string; plan: string }[] = [];
    for (const [i, { sql, parameters }] of statements.entries()) {
      await client.query(`prepare plan_${i} as ${sql}`);
      const args = parameters.length > 0 ? `(${parameters.map(literal).join(', ')})` : '';
      await client.query(`set plan_cache_mode = force_custom_plan`);
      const custom = await client.query(`explain execute plan_${i}${args}`);
      await client.query(`set plan_cache_mode = force_generic_plan`);
      const generic = await client.query(`explain execute plan_${i}${args}`);
      await client.query(`reset plan_cache_mode`);
      plans.push({ sql, plan: `custom:\n${text(custom)}\ngeneric:\n${text(generic)}` });
    }
    return plans;
  } finally {
    await client.end();
  }
}

function sqlitePlans(url: string, statements: Captured[]): { sql: string; plan: string }[] {
  const connection = new SQLite(url.slice('sqlite:'.length), { readonly: true });
  try {
    return statements.map(({ sql, parameters }) => ({
      sql,
      plan: (connection.prepare(`explain query plan ${withUnaryPlusParameters(sql)}`).all(...(parameters as unknown[])) as { detail: string }[])
        .map((r) => r.detail)
        .join('\n'),
    }));
  } finally {
    connection.close();
  }
}
