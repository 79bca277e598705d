// The bulk upsert's cost and its parts (docs/api.md, "POST /api/users/upsert"):
// - changing many existing groups sends a few statements per part, as creating them does (on
//   PostgreSQL each statement is a round trip: one statement per item made a 600-item call
//   of changes ten times slower than one of creations);
// - a call is committed in parts of 100 items (PostgreSQL: of up to 500 new groups without
//   parent, level or tags), so a single write of another account goes in between two of them
//   instead of waiting for the whole call;
// - PostgreSQL: a part whose locks another transaction holds too long fails its items (and the
//   later ones) with lock_timeout, the parts before it stay; a first part that cannot run
//   answers 429 lock_timeout for the whole call, which then changed nothing.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { backgroundWork } from '../src/foundations/background-work.ts';
import { UPSERT_PART } from '../src/user-groups/upsert.service.ts';
import { buildTestApp, forEachBackend, issueTestToken, openTestDatabase, type BuiltApp, type OpenDatabase } from './helpers/harness.ts';

const ITEMS = 600;
/** A part's transaction, locks, read, writes per set of fields, history, events and commit, with room to spare. */
const STATEMENTS_PER_PART = 12;

forEachBackend('bulk upsert: its cost and its parts', (backend) => {
  let database: OpenDatabase;
  let built: BuiltApp;
  let token: string;
  let counting = false;
  let statements = 0;
  /** The SQL of each statement the request sends, with how many turns of the event loop had passed (`turns`). */
  let trace: { sql: string; turns: number }[] | undefined;
  let turns = 0;

  before(async () => {
    database = await openTestDatabase(backend, {
      onQuery: (event) => {
        // What the request sends, not the service's background work (the sequencer, the dispatcher).
        if (counting && backgroundWork.getStore() === undefined) statements++;
        if (trace && backgroundWork.getStore() === undefined) trace.push({ sql: event.query.sql, turns });
      },
    });
    built = await buildTestApp(database);
    token = (await issueTestToken(database.handle, { account: 'parts' })).token;
  });

  after(async () => {
    await built?.app.close();
    await database?.close();
  });

  const upsert = (items: unknown[], as = token) => built.request('POST', '/api/users/upsert', { token: as, body: { user_groups: items } });

  /** The statements the request sends, and its answer. */
  async function counted(items: unknown[]) {
    statements = 0;
    counting = true;
    try {
      const res = await upsert(items);
      assert.equal(res.status, 200, res.text);
      return { res, statements };
    } finally {
      counting = false;
    }
  }

  it(`upsert: changing ${ITEMS} existing groups sends a few statements per part, as creating them does, with an update entry and event for each`, async () => {
    const ids = Array.from({ length: ITEMS }, (_, i) => `cost-${i}`);
    const creates = await counted(ids.map((id) => ({ user_group_id: id, name: `Group ${id}`, properties: { v: 0 } })));
    assert.equal(creates.res.body.counts.created, ITEMS);
    const updates = await counted(
      ids.map((id, i) => ({ user_group_id: id, name: `Renamed ${id}`, properties: { v: 1 }, ...(i % 2 ? { mapping: { '1': 'x' } } : {}) })),
    );
    assert.equal(updates.res.body.counts.updated, ITEMS);
    // A few statements per part of UPSERT_PART items, as creations (which PostgreSQL writes in
    // larger parts still), never some per item.
    const bound = (ITEMS / UPSERT_PART) * STATEMENTS_PER_PART;
    assert.ok(
      updates.statements <= bound && creates.statements <= bound,
      `${ITEMS} changes took ${updates.statements} statements, ${ITEMS} creations ${creates.statements}: about one per item instead of a few per part (at most ${bound})`,
    );
    // The history and the events are those of single PUTs.
    const history = await built.request('GET', '/api/user/history', { token, query: { user_group_id: 'cost-1' } });
    assert.equal(history.status, 200, history.text);
    assert.deepEqual(
      history.body.entries.map((entry: { action: string; changed_fields: string[] | null }) => [entry.action, entry.changed_fields]),
      [
        ['user_group.update', ['name', 'mapping', 'properties']],
        ['user_group.create', null],
      ],
    );
    const group = await built.request('GET', '/api/user/lookup', { token, query: { user_group_id: 'cost-1' } });
    assert.deepEqual([group.body.user_group.name, group.body.user_group.properties, group.body.user_group.mapping], ['Renamed cost-1', { v: 1 }, { '1': 'x' }]);
    // Running the same call again changes nothing, and writes nothing.
    const again = await counted(
      ids.map((id, i) => ({ user_group_id: id, name: `Renamed ${id}`, properties: { v: 1 }, ...(i % 2 ? { mapping: { '1': 'x' } } : {}) })),
    );
    assert.equal(again.res.body.counts.unchanged, ITEMS);
  });

  it('upsert: an item that names a group an earlier item of the same part changed sees that change, and each gets its own history entry', async () => {
    const res = await upsert([
      { user_group_id: 'twice', name: 'first' },
      { user_group_id: 'twice', name: 'second', properties: { n: 2 } },
      { user_group_id: 'twice', name: 'second', properties: { n: 2 } },
      { user_group_id: 'twice', name: 'third' },
    ]);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.results.map((r: { status: string }) => r.status),
      ['created', 'updated', 'unchanged', 'updated'],
    );
    const history = await built.request('GET', '/api/user/history', { token, query: { user_group_id: 'twice' } });
    assert.deepEqual(
      history.body.entries.map((entry: { action: string; changed_fields: string[] | null }) => [entry.action, entry.changed_fields]),
      [
        ['user_group.update', ['name']],
        ['user_group.update', ['name', 'properties']],
        ['user_group.create', null],
      ],
    );
  });

  it('upsert: a single create of another account answers between two parts of a 1,000-item call, not after the whole call', async () => {
    const other = (await issueTestToken(database.handle, { account: 'parts-other' })).token;
    const order: string[] = [];
    const bulk = upsert(Array.from({ length: 1000 }, (_, i) => ({ user_group_id: `between-${i}`, name: `Between ${i}`, properties: { i } }))).then((res) => {
      order.push('upsert');
      return res;
    });
    const single = built.request('POST', '/api/user', { token: other, body: { user_group_id: 'meanwhile' } }).then((res) => {
      order.push('create');
      return res;
    });
    const [bulkAnswer, singleAnswer] = await Promise.all([bulk, single]);
    assert.equal(bulkAnswer.status, 200, bulkAnswer.text);
    assert.equal(singleAnswer.status, 201, singleAnswer.text);
    assert.deepEqual(order, ['create', 'upsert']);
  });

  it('upsert, SQLite: the event loop turns while a part runs, so that the process serves other work meanwhile', {
    skip: backend !== 'sqlite' && "SQLite only: PostgreSQL's statements wait for the network, and the loop turns then anyway",
  }, async () => {
    assert.equal((await upsert([{ user_group_id: 'turns-parent' }])).status, 200);
    let ticking = true;
    const tick = () => {
      turns++;
      if (ticking) setImmediate(tick);
    };
    trace = [];
    tick();
    try {
      // Items with a parent take the single writes' steps, several statements each: a long part.
      const res = await upsert(Array.from({ length: 100 }, (_, i) => ({ user_group_id: `turns-${i}`, parent_user_group_id: 'turns-parent' })));
      assert.equal(res.status, 200, res.text);
    } finally {
      ticking = false;
    }
    const statements = trace;
    trace = undefined;
    const begin = statements.findIndex((s) => /^begin immediate/.test(s.sql));
    const commit = statements.findIndex((s, i) => i > begin && /^commit/.test(s.sql));
    assert.ok(begin !== -1 && commit > begin + 100, `${commit - begin} statements in the part`);
    const part = statements.slice(begin, commit + 1);
    const turnsWithin = part.at(-1)!.turns - part[0].turns;
    assert.ok(turnsWithin >= 1, `${part.length} statements of a part, and no turn of the event loop between them`);
  });

  it('upsert, PostgreSQL: a run of new groups without parent, level or tags is committed in parts of up to 500, every other item in parts of 100', {
    skip: backend !== 'postgres' && 'PostgreSQL only: on SQLite a part holds the one write lock of every account',
  }, async () => {
    assert.equal((await upsert([{ user_group_id: 'runs-parent' }, { user_group_id: 'runs-existing' }])).status, 200);
    const items: unknown[] = Array.from({ length: 1000 }, (_, i) => ({ user_group_id: `runs-${i}`, name: `Run ${i}` }));
    items[250] = { user_group_id: 'runs-child', parent_user_group_id: 'runs-parent' };
    items[900] = { user_group_id: 'runs-existing', name: 'changed' };
    trace = [];
    const res = await upsert(items);
    const statements = trace;
    trace = undefined;
    assert.equal(res.status, 200, res.text);
    // Items 0-249 (new), 250-349 (a parent), 350-849 (new), 850-949 (a change among them), 950-999 (new, fewer than 100).
    assert.equal(statements.filter((s) => /^commit/.test(s.sql)).length, 5, 'five parts');
    assert.deepEqual(res.body.counts, { created: 999, updated: 1, unchanged: 0, failed: 0 });
  });

  it('upsert, PostgreSQL: a part whose group another transaction holds fails its items and the rest with 429 lock_timeout; the parts before it stay', {
    skip: backend !== 'postgres' && "PostgreSQL only: SQLite's one writer waits for the file's lock (docs/api.md, Concurrency)",
  }, async () => {
    const ids = Array.from({ length: 300 }, (_, i) => `held-${i}`);
    assert.equal((await upsert(ids.map((id) => ({ user_group_id: id })))).status, 200);
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query(`select 1 from user_groups where provided_id = 'held-150' for update`);
      const res = await upsert(ids.map((id) => ({ user_group_id: id, name: `changed ${id}` })));
      assert.equal(res.status, 200, res.text);
      const statuses = res.body.results.map((r: { status: string; error?: { code: string } }) => r.error?.code ?? r.status);
      assert.deepEqual(statuses.slice(0, 100), Array(100).fill('updated'), 'the first part is committed');
      assert.deepEqual(statuses.slice(100), Array(200).fill('lock_timeout'), 'the part that waited, and every part after it, failed');
      assert.deepEqual(res.body.counts, { created: 0, updated: 100, unchanged: 0, failed: 200 });
    } finally {
      await holder.query('rollback');
      await holder.end();
    }
    const first = await built.request('GET', '/api/user/lookup', { token, query: { user_group_id: 'held-99' } });
    const later = await built.request('GET', '/api/user/lookup', { token, query: { user_group_id: 'held-100' } });
    assert.deepEqual([first.body.user_group.name, later.body.user_group.name], ['changed held-99', 'held-100']);
  });

  it('upsert and PUT, PostgreSQL: a group another transaction holds past the lock timeout answers 429 lock_timeout with Retry-After, never 503, and nothing changes', {
    skip: backend !== 'postgres' && 'PostgreSQL only: lock_timeout is a PostgreSQL setting',
  }, async () => {
    assert.equal((await upsert([{ user_group_id: 'locked' }, { user_group_id: 'locked-neighbour' }])).status, 200);
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query(`select 1 from user_groups where provided_id = 'locked' for update`);
      const [bulk, put] = await Promise.all([
        upsert([
          { user_group_id: 'locked-neighbour', name: 'changed' },
          { user_group_id: 'locked', name: 'changed' },
        ]),
        built.request('PUT', '/api/user', { token, body: { user_group_id: 'locked', name: 'changed' } }),
      ]);
      for (const [what, res] of [
        ['upsert', bulk],
        ['PUT', put],
      ] as const) {
        assert.equal(res.status, 429, `${what}: ${res.text}`);
        assert.equal(res.body.error.code, 'lock_timeout');
        assert.ok(Number(res.headers['retry-after']) > 0, 'Retry-After');
      }
    } finally {
      await holder.query('rollback');
      await holder.end();
    }
    const neighbour = await built.request('GET', '/api/user/lookup', { token, query: { user_group_id: 'locked-neighbour' } });
    assert.equal(neighbour.body.user_group.name, 'locked-neighbour', 'the refused call changed nothing');
  });
});
