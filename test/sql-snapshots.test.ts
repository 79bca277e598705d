// The SQL of the tenant helpers (src/db/tenant.ts) and of the listing's statements
// (src/user-groups/listing/list.repository.ts), compiled for PostgreSQL and for SQLite without a
// database (a driver that connects to nothing), against the text stored in
// test/sql-snapshots/<dialect>.sql: a change to either dialect's statements shows on any
// machine, PostgreSQL or not. How they must read: docs/security.md, "Tenant isolation", and
// docs/performance.md, "Why the code is the way it is". After a deliberate change, write the
// snapshots again and read their diff:
//
//   UPDATE_SQL_SNAPSHOTS=1 node --import tsx --test test/sql-snapshots.test.ts
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type * as KyselyModule from 'kysely';
import type { CompiledQuery, DatabaseConnection, Driver, QueryResult } from 'kysely';
import { Kysely, sql } from '../src/db/kysely.ts';
import type { Database } from '../src/db/schema.ts';
import type { Dialect } from '../src/db/database.ts';
import { asSubquery, heldToTenant, keyedWalk, ownedBy, ownedByAccount, sameTenant, scopedIdOf, walkLimit, type Tenant } from '../src/db/tenant.ts';
import {
  listUserGroups,
  searchArgs,
  selectAncestors,
  selectListingPage,
  selectSearchPage,
  type ListFilter,
} from '../src/user-groups/listing/list.repository.ts';
import type { HotReads } from '../src/db/hot-reads.ts';
import { ROOT } from './helpers/processes.ts';

// The same build of Kysely as src/db/kysely.ts (its CommonJS one): dialectOf tells the dialects apart by its adapter's class.
const kysely = createRequire(import.meta.url)('kysely') as typeof KyselyModule;

/** Every statement the driver was given: the listing's answers nothing (an empty page). */
class CapturingDriver implements Driver {
  readonly statements: CompiledQuery[] = [];
  async init() {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return {
      executeQuery: async <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
        this.statements.push(query);
        return { rows: [{ objects: null, walked: 0, chains: null } as R] };
      },
      streamQuery: () => {
        throw new Error('no streams here');
      },
    };
  }
  async beginTransaction() {}
  async commitTransaction() {}
  async rollbackTransaction() {}
  async releaseConnection() {}
  async destroy() {}
}

function compileOnly(dialect: Dialect): { db: Kysely<Database>; driver: CapturingDriver } {
  const driver = new CapturingDriver();
  const db = new Kysely<Database>({
    dialect:
      dialect === 'postgres'
        ? {
            createAdapter: () => new kysely.PostgresAdapter(),
            createDriver: () => driver,
            createIntrospector: (db) => new kysely.PostgresIntrospector(db),
            createQueryCompiler: () => new kysely.PostgresQueryCompiler(),
          }
        : {
            createAdapter: () => new kysely.SqliteAdapter(),
            createDriver: () => driver,
            createIntrospector: (db) => new kysely.SqliteIntrospector(db),
            createQueryCompiler: () => new kysely.SqliteQueryCompiler(),
          },
  });
  return { db, driver };
}

const SNAPSHOTS = path.join(ROOT, 'test', 'sql-snapshots');
const UPDATE = process.env.UPDATE_SQL_SNAPSHOTS === '1';

/** The stored snapshots of a dialect: `-- name` lines, each followed by its statement and a `-- parameters:` line. */
function readSnapshots(dialect: Dialect): Map<string, string> {
  const file = path.join(SNAPSHOTS, `${dialect}.sql`);
  const snapshots = new Map<string, string>();
  if (!fs.existsSync(file)) return snapshots;
  for (const block of fs
    .readFileSync(file, 'utf8')
    .split(/^-- snapshot: /m)
    .slice(1)) {
    const newline = block.indexOf('\n');
    snapshots.set(block.slice(0, newline), block.slice(newline + 1).trimEnd());
  }
  return snapshots;
}

const tenant: Tenant = { accountId: 7, environment: 'Customer' };
const page: ListFilter = { ...tenant, afterTeamId: 100, limit: 25 };

for (const dialect of ['postgres', 'sqlite'] as const) {
  describe(`SQL snapshots: ${dialect}`, () => {
    const stored = readSnapshots(dialect);
    const written = new Map<string, string>();
    const { db, driver } = compileOnly(dialect);

    const check = (name: string, query: { sql: string; parameters: readonly unknown[] }) => {
      const text = `${query.sql.replace(/\s*\n\s*/g, '\n').trim()}\n-- parameters: ${JSON.stringify(query.parameters)}`;
      written.set(name, text);
      if (UPDATE) return;
      assert.ok(stored.has(name), `no snapshot "${name}" in test/sql-snapshots/${dialect}.sql: write them with UPDATE_SQL_SNAPSHOTS=1`);
      assert.equal(
        text,
        stored.get(name),
        `the ${dialect} SQL of "${name}" changed: if it is meant to, write the snapshots again (UPDATE_SQL_SNAPSHOTS=1) and read their diff`,
      );
    };
    const expression = (name: string, builder: KyselyModule.RawBuilder<unknown>) => check(name, sql`select ${builder}`.compile(db));

    after(() => {
      if (!UPDATE) return;
      fs.mkdirSync(SNAPSHOTS, { recursive: true });
      const text = [...written].map(([name, statement]) => `-- snapshot: ${name}\n${statement}\n`).join('\n');
      fs.writeFileSync(path.join(SNAPSHOTS, `${dialect}.sql`), text);
    });

    it('the tenant helpers: ownedBy, sameTenant, ownedByAccount, scopedIdOf, walkLimit', () => {
      expression('ownedBy', ownedBy('user_groups', tenant));
      expression('sameTenant', sameTenant('parent', 'child'));
      expression('ownedByAccount', ownedByAccount('api_tokens', tenant.accountId));
      expression('scopedIdOf', scopedIdOf('g'));
      expression('walkLimit', walkLimit(db, 26));
    });

    it('the tenant helpers: heldToTenant around a walk built by Kysely and one written in SQL, asSubquery', () => {
      const built = heldToTenant(db, tenant, { table: 'user_groups', orderBy: 'team_id' }, (besideRange) =>
        db.selectFrom('user_groups').select(['team_id', 'account_id', 'environment']).where(besideRange).orderBy('team_id').limit(walkLimit(db, 26)),
      );
      check('heldToTenant (query builder)', 'isRawBuilder' in built ? built.compile(db) : built.compile());
      const written = heldToTenant(
        db,
        tenant,
        { table: 'user_groups', orderBy: ['walk_key', 'team_id'] },
        (besideRange) => sql`select team_id, account_id, environment, provided_id as walk_key from user_groups where ${besideRange} order by team_id`,
      );
      check('heldToTenant (SQL)', 'isRawBuilder' in written ? written.compile(db) : written.compile());
      expression('asSubquery', asSubquery(sql`select 1`) as KyselyModule.RawBuilder<unknown>);
    });

    it('the tenant helpers: keyedWalk', () => {
      const walk = keyedWalk(
        db,
        { name: 'user_groups_listing', key: sql`(cast(account_id as text) || '/' || environment)` },
        { value: '7/Customer', valueAgain: '7/Customer', afterTeamId: 100 },
      );
      check(
        'keyedWalk',
        sql`select user_groups.team_id${walk.walkKey} from ${walk.from} where ${walk.range} order by ${walk.orderBy} -- held by ${sql.raw(walk.heldOrder.join(', '))}`.compile(
          db,
        ),
      );
    });

    it('the listing: the prepared pages (the plain listing, a search by prefix, the ancestors), each alone and batched', () => {
      const reads = [
        ['listing page', selectListingPage.bind(db, [7, 'Customer', '7/Customer', 100, '7/Customer', 26])],
        ['search page', selectSearchPage.bind(db, searchArgs(page, 'ab', 'ac'))],
        ['ancestors', selectAncestors.bind(db, [7, 'Customer', 123])],
      ] as const;
      for (const [name, bound] of reads) {
        check(name, bound.query);
        if (bound.batch) check(`${name} (batched)`, bound.batch.compile([bound.args, bound.args]));
        else assert.equal(dialect, 'sqlite', `${name}: PostgreSQL batches it`);
      }
    });

    it('the listing: the pages driven by a tag, a parent, a level, and a prefix with other filters', async () => {
      const noHotReads = undefined as unknown as HotReads; // these pages are read on the database handle, and are empty here
      for (const [name, filter] of [
        ['page by tag', { ...page, tag: 'gold', level: 'team' }],
        ['page of children', { ...page, parentTeamId: 42, tag: 'gold' }],
        ['page by level', { ...page, level: 'team' }],
        ['search with filters', { ...page, prefix: 'ab', level: 'team' }],
      ] as const) {
        driver.statements.length = 0;
        const answer = await listUserGroups(db, noHotReads, filter);
        assert.deepEqual(answer, { objects: '', lastTeamId: undefined, more: false });
        assert.equal(driver.statements.length, 1, name);
        check(name, driver.statements[0]);
      }
    });
  });
}
