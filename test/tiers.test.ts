// The test tiers (test/tiers.ts; CONTRIBUTING.md, "Test tiers"): every test file is in one
// tier, the fast one starts nothing, the npm scripts run them, and each run's scratch
// databases carry its own name (test/helpers/backends.ts) so that runs on one server never
// collide and a run sweeps only what it left itself.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ALONE_IN_CI, FAST, SERVICE, SLOW, STARTS_FIRST, tierFiles } from './tiers.ts';
import { POSTGRES_URL, TEST_RUN_ID, createTestDatabase, sweepTestRun, testDatabasePrefix, testRunId } from './helpers/backends.ts';
import { createScratchDatabase, onConnection } from '../scripts/scratch-database.ts';
import { ROOT } from './helpers/processes.ts';

const testFiles = () =>
  fs
    .readdirSync(path.join(ROOT, 'test'))
    .filter((name) => name.endsWith('.test.ts'))
    .map((name) => `test/${name}`)
    .sort();

describe('test tiers', () => {
  it('tiers: every test file is in exactly one tier (fast, npm test, slow), and every file a tier names exists', () => {
    const lists = { FAST, SERVICE, SLOW };
    const placed = new Map<string, string[]>();
    for (const [list, files] of Object.entries(lists)) for (const file of files) placed.set(file, [...(placed.get(file) ?? []), list]);
    const files = testFiles();
    assert.deepEqual(
      files.filter((file) => !placed.has(file)),
      [],
      'test files in no tier: add each to FAST, SERVICE or SLOW of test/tiers.ts (CONTRIBUTING.md, "Test tiers")',
    );
    assert.deepEqual(
      [...placed].filter(([, in_]) => in_.length > 1).map(([file, in_]) => `${file}: ${in_.join(', ')}`),
      [],
      'test files in two tiers',
    );
    assert.deepEqual(
      [...placed.keys()].filter((file) => !files.includes(file)),
      [],
      'test/tiers.ts names files that do not exist',
    );
    assert.deepEqual(tierFiles('test').sort(), [...FAST, ...SERVICE].sort(), 'npm test runs the fast files too');
    assert.deepEqual(
      STARTS_FIRST.filter((file) => !placed.has(file)),
      [],
      'STARTS_FIRST names files in no tier',
    );
    assert.deepEqual(
      ALONE_IN_CI.filter((file) => !SLOW.includes(file)),
      [],
      'ALONE_IN_CI names files of the slow tier only',
    );
  });

  it('tiers: a fast file starts no process and no browser and needs no build: it imports none of the helpers that do', () => {
    const starters = [/from ['"]node:child_process['"]/, /from ['"]\.\/helpers\/(processes|workers|browser|previous-release|production-install)\.ts['"]/];
    const found = FAST.flatMap((file) => {
      const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
      const imports = text.split('\n').filter((line) => /^import .* from /.test(line));
      return imports.filter((line) => starters.some((pattern) => pattern.test(line))).map((line) => `${file}: ${line}`);
    });
    // processes.ts's ROOT is a path, not a process: this file and a few read it.
    assert.deepEqual(
      found.filter((line) => !/import \{ ROOT \} from '\.\/helpers\/processes\.ts'/.test(line)),
      [],
      'a fast file that starts a process belongs to SERVICE (or SLOW)',
    );
  });

  it('tiers: no test, suite or hook sets a timeout of its own: the runner bounds them all alike, generously (test/run-tests.ts)', () => {
    // A bound a loaded machine exceeds is a red run that says nothing about the service: the
    // reference page's suite, bounded at 120 s, failed CI at load 12. node bounds a suite as a
    // whole, so a file's own bound would also have to grow with every test added to it.
    const optionTimeout = /\{[^{}]*\btimeout: [^{}]*\}\s*,\s*(async\s*)?\(/;
    const found = testFiles()
      .concat(
        fs
          .readdirSync(path.join(ROOT, 'test', 'helpers'))
          .filter((name) => name.endsWith('.ts'))
          .map((name) => `test/helpers/${name}`),
      )
      .filter((file) => optionTimeout.test(fs.readFileSync(path.join(ROOT, file), 'utf8').replace(/\n\s*/g, ' ')));
    assert.deepEqual(found, [], 'these files give a test, suite or hook its own timeout');
  });

  it('tiers: no browser test opens a page with Playwright’s own 30 s wait: each opens it with openContext or openPage (test/helpers/browser.ts)', () => {
    // The reference page drew its operations past 30 s at load 12, and four of its tests failed CI.
    const found = testFiles().filter((file) =>
      /\.(newPage|newContext)\(/.test(fs.readFileSync(path.join(ROOT, file), 'utf8').replaceAll('context.newPage(', '')),
    );
    assert.deepEqual(found, [], 'these files open a page whose waits end after 30 s');
  });

  it('tiers: npm test, npm run test:fast and npm run test:slow run the tiers with the runner; npm test builds first', () => {
    const { scripts } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    assert.equal(scripts.test, 'node --import tsx test/run-tests.ts test');
    assert.equal(scripts['test:fast'], 'node --import tsx test/run-tests.ts fast');
    assert.match(scripts['test:slow'], /^npm run --silent build:tests && node --import tsx test\/run-tests\.ts slow$/);
    assert.equal(scripts.pretest, 'npm run --silent build:tests');
  });
});

describe('scratch databases named after their run', () => {
  it('run id: UGS_TEST_RUN_ID names the run; without it, one of the process; anything but a-z and 0-9 is refused', () => {
    assert.equal(testRunId({ UGS_TEST_RUN_ID: 'r1abc' }), 'r1abc');
    assert.match(testRunId({}), /^p[a-z0-9]+t[a-z0-9]+$/);
    for (const bad of ['R1', 'a-b', 'a_b', 'x'.repeat(21), "a'; drop"]) assert.throws(() => testRunId({ UGS_TEST_RUN_ID: bad }), /UGS_TEST_RUN_ID/);
  });

  it('run id: a test database (SQLite) is named after this run', async () => {
    const database = await createTestDatabase('sqlite');
    try {
      assert.ok(path.basename(path.dirname(database.url.slice('sqlite:'.length))).startsWith(`ugs-test-${TEST_RUN_ID}-`), database.url);
    } finally {
      await database.drop();
    }
  });

  it('sweep: a run sweeps the SQLite directories it left, never those of a run whose id only starts like its own', async () => {
    const [mine, other] = [`s${process.pid}x`, `s${process.pid}xy`];
    const left = await createScratchDatabase('sqlite', { prefix: testDatabasePrefix(mine) });
    const others = await createScratchDatabase('sqlite', { prefix: testDatabasePrefix(other) });
    const dir = (url: string) => path.dirname(url.slice('sqlite:'.length));
    try {
      const swept = await sweepTestRun(mine, '');
      assert.deepEqual(swept, [path.basename(dir(left.url))]);
      assert.equal(fs.existsSync(dir(left.url)), false, 'its own leftover is gone');
      assert.equal(fs.existsSync(dir(others.url)), true, "the other run's is kept");
      assert.ok(dir(others.url).startsWith(os.tmpdir()));
    } finally {
      await others.drop();
      await left.drop();
    }
  });

  it('sweep: a run drops the PostgreSQL databases it left, never another run’s', { skip: POSTGRES_URL ? false : 'TEST_POSTGRES_URL is not set' }, async () => {
    const [mine, other] = [`s${process.pid}x`, `s${process.pid}xy`];
    const left = await createScratchDatabase('postgres', { prefix: testDatabasePrefix(mine), adminUrl: POSTGRES_URL });
    const others = await createScratchDatabase('postgres', { prefix: testDatabasePrefix(other), adminUrl: POSTGRES_URL });
    const name = (url: string) => new URL(url).pathname.slice(1);
    try {
      assert.ok(name(left.url).startsWith(`ugs_test_${mine}_`), left.url);
      assert.deepEqual(await sweepTestRun(mine, POSTGRES_URL), [name(left.url)]);
      // The kept one still takes connections; the swept one is gone.
      await onConnection(others.url, 'select 1');
      await assert.rejects(onConnection(left.url, 'select 1'), /does not exist/);
    } finally {
      await others.drop();
      await left.drop();
    }
  });
});
