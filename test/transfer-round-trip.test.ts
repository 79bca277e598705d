// `ugs export` then `ugs import`, and a CSV file then `ugs import` (docs/cli.md, "Import and
// export"), as a property: groups with every declared field set to random valid values
// (test/helpers/declared-groups.ts: Unicode, nulls, numbers, nested JSON, parents, levels,
// tags) come back into another account with every field equal. The fields are those of the
// declaration (src/user-groups/declared-fields.ts), so a field added there is checked here with
// no change, and one the export or the import misses fails here. The commands run in this
// process, through the command-line tool's own entry (runCli), on the database the app serves.
// A failure prints fast-check's seed and path; FC_SEED=<seed> runs another sequence, FC_RUNS=<n> more runs.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { runCli } from '../src/cli/main.ts';
import { requestFieldSchemas } from '../src/user-groups/declared-fields.ts';
import { forEachBackend, useTestApp } from './helpers/harness.ts';
import { csvOf, declaredGroups, type AnsweredGroup } from './helpers/declared-groups.ts';

const SEED = Number(process.env.FC_SEED ?? 20261122);
const NUM_RUNS = Number(process.env.FC_RUNS ?? 10);
const MAX_GROUPS = 8;
/** The fields an import takes and an export must give back: every request field of the declaration. */
const FIELDS = Object.keys(requestFieldSchemas);

forEachBackend('ugs export and ugs import: a round trip keeps every declared field', (backend) => {
  const t = useTestApp(backend);
  let dir: string;
  let run = 0;
  /** A group given nothing but its id, as answers show it: what each field is when not set. */
  let defaults: AnsweredGroup;

  /** `ugs <args>` through the command-line tool's entry, on the app's database and key; its output kept, not printed. */
  async function ugs(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    const saved = { DATABASE_URL: process.env.DATABASE_URL, UGS_SECRET_KEY: process.env.UGS_SECRET_KEY };
    Object.assign(process.env, { DATABASE_URL: t.databaseUrl, UGS_SECRET_KEY: t.secretKey });
    const output = { stdout: '', stderr: '' };
    const writes = { stdout: process.stdout.write, stderr: process.stderr.write };
    for (const stream of ['stdout', 'stderr'] as const) {
      // Text is the tool's; the test runner's own reports are buffers, and pass.
      process[stream].write = ((chunk: string | Uint8Array, ...rest: never[]) => {
        if (typeof chunk !== 'string') return writes[stream].call(process[stream], chunk, ...rest);
        output[stream] += chunk;
        return true;
      }) as typeof process.stdout.write;
    }
    try {
      return { code: await runCli(args), ...output };
    } finally {
      process.stdout.write = writes.stdout;
      process.stderr.write = writes.stderr;
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  }

  async function groupsOf(token: string, environment: string): Promise<AnsweredGroup[]> {
    const res = await t.request('GET', '/api/users', { token, query: { api_environment_tag: environment, limit: '500' } });
    assert.equal(res.status, 200, res.text);
    return res.body.user_groups as unknown as AnsweredGroup[];
  }

  /** Every declared field of every group equal, or the list of those that are not. */
  function assertSameFields(expected: AnsweredGroup[], actual: AnsweredGroup[], how: string): void {
    assert.deepEqual(actual.map((g) => g.provided_id).sort(), expected.map((g) => g.provided_id).sort(), `${how}: the same groups`);
    const byId = new Map(actual.map((group) => [group.provided_id, group]));
    const differences = expected.flatMap((group) =>
      FIELDS.filter((field) => !isDeepStrictEqual(byId.get(group.provided_id)?.[field], group[field])).map(
        (field) =>
          `${field} of ${JSON.stringify(group.provided_id)}: ${JSON.stringify(byId.get(group.provided_id)?.[field])}, not ${JSON.stringify(group[field])}`,
      ),
    );
    assert.deepEqual(differences, [], `${how}: every declared field comes back`);
  }

  /**
   * The listing's objects are written by the database, a lookup's in JavaScript
   * (docs/api.md, "GET /api/users: list"): for every declared field, the same bytes.
   */
  async function assertListedAsLookedUp(token: string, environment: string, groups: AnsweredGroup[]): Promise<void> {
    const listed = await t.request('GET', '/api/users', { token, query: { api_environment_tag: environment, limit: '500' } });
    const lookedUp: unknown[] = [];
    for (const group of groups) {
      const res = await t.request('GET', '/api/user', { token, body: { user_group_id: group.provided_id, api_environment_tag: environment } });
      assert.equal(res.status, 200, res.text);
      const { token: _token, ...answered } = res.body.user_group;
      lookedUp.push(answered);
    }
    assert.equal(listed.text, JSON.stringify({ success: 1, user_groups: lookedUp, next_cursor: null }), 'the page is what lookups answer');
  }

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-round-trip-'));
    const bare = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: 'bare' } });
    assert.equal(bare.status, 201, bare.text);
    defaults = bare.body.user_group as unknown as AnsweredGroup;
  });
  after(() => dir && fs.rmSync(dir, { recursive: true, force: true }));

  it('round trip: random groups (Unicode, nulls, numbers, nested JSON, parents, levels, tags) exported then imported elsewhere, as NDJSON and as CSV, come back field by field', async () => {
    // The first group sets every field to something other than its default, so a field dropped anywhere shows.
    const notDefault = Object.fromEntries(FIELDS.map((field) => [field, defaults[field]]).filter(([, value]) => value !== defaults.provided_id));
    await fc.assert(
      fc.asyncProperty(declaredGroups(MAX_GROUPS, notDefault), async (items) => {
        fc.pre(items[0].name !== items[0].user_group_id);
        run++;
        const environment = items[0].api_environment_tag;
        const [source, viaNdjson, viaCsv] = ['source', 'ndjson', 'csv'].map((kind) => `${kind}-${run}`);
        const tokens = await Promise.all([source, viaNdjson, viaCsv].map(async (account) => (await t.issueToken({ account })).token));

        const upserted = await t.request('POST', '/api/users/upsert', { token: tokens[0], body: { user_groups: items } });
        assert.equal(upserted.status, 200, upserted.text);
        assert.equal(upserted.body.counts.created, items.length, JSON.stringify(upserted.body.results.filter((r) => r.status === 'failed')));
        const groups = await groupsOf(tokens[0], environment);
        await assertListedAsLookedUp(tokens[0], environment, groups);

        const ndjson = path.join(dir, `${source}.ndjson`);
        const exported = await ugs('export', '--account', source, '--env', environment, '--output', ndjson);
        assert.equal(exported.code, 0, exported.stderr);
        const imported = await ugs('import', ndjson, '--account', viaNdjson, '--env', environment, '--json');
        assert.equal(imported.code, 0, `${imported.stdout}${imported.stderr}`);
        assertSameFields(groups, await groupsOf(tokens[1], environment), 'ugs export, then ugs import of its NDJSON');

        const csv = path.join(dir, `${source}.csv`);
        fs.writeFileSync(csv, csvOf(groups));
        const fromCsv = await ugs('import', csv, '--account', viaCsv, '--env', environment, '--json');
        assert.equal(
          fromCsv.code,
          0,
          `${fromCsv.stdout}${fromCsv.stderr}${fs.existsSync(`${csv}.errors.ndjson`) ? fs.readFileSync(`${csv}.errors.ndjson`, 'utf8') : ''}`,
        );
        assertSameFields(groups, await groupsOf(tokens[2], environment), 'a CSV file of every field, then ugs import');
      }),
      { seed: SEED, numRuns: NUM_RUNS, interruptAfterTimeLimit: 120_000, markInterruptAsFailure: true },
    );
  });
});
