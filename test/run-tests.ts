// The test command of each tier (CONTRIBUTING.md, "Test tiers"): `npm run test:fast`,
// `npm test`, `npm run test:slow`. Runs the tier's files (test/tiers.ts) with node's test
// runner, several files at a time, each in a process of its own, the longest first; ends with
// node's own summary (tests, pass, fail…), then the list of what was skipped and the slowest
// files. Every file of the run names its scratch databases after one run id (UGS_TEST_RUN_ID,
// test/helpers/backends.ts), and what a crashed file left behind is swept at the end, by this
// run only.
//
//   node --import tsx test/run-tests.ts <fast|test|slow> [test files… | --beside | --alone]
//
// Files given run instead of the tier's; --beside runs the tier's files but those CI runs
// alone (ALONE_IN_CI), --alone those; UGS_TEST_CONCURRENCY sets how many files run at once.
import crypto from 'node:crypto';
import path from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { fileURLToPath } from 'node:url';
import { ALONE_IN_CI, TIERS, tierFiles, type Tier } from './tiers.ts';
import { sweepTestRun } from './helpers/backends.ts';
import skippedReporter from './helpers/skipped-reporter.ts';
import timingReporter from './helpers/timing-reporter.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * A test, or a suite, over 20 minutes fails: a hang costs minutes, never the whole run. It is the
 * one bound of every file (no file sets a shorter one): node applies it to each suite as a whole
 * too, and a suite that takes 2 minutes on an idle machine takes 8 at load 12 (the
 * reference page's 120 s bound failed CI so). Conditions are awaited inside tests, each with its
 * own generous bound that says what it waited for.
 */
const TEST_TIMEOUT_MS = 20 * 60_000;

const [tier, ...given] = process.argv.slice(2);
if (!Object.hasOwn(TIERS, tier ?? '')) {
  console.error(`run-tests: which tier? one of ${Object.keys(TIERS).join(', ')}`);
  process.exit(2);
}
const { concurrency: tierConcurrency, isolation, sqliteOnly } = TIERS[tier as Tier];
const files = filesToRun(tier as Tier, given);
const concurrency = Number(process.env.UGS_TEST_CONCURRENCY || tierConcurrency);

// What every file's process inherits: the run's id, and for the fast tier no PostgreSQL.
const runId = process.env.UGS_TEST_RUN_ID || `r${Date.now().toString(36)}${crypto.randomBytes(2).toString('hex')}`;
process.env.UGS_TEST_RUN_ID = runId;
if (sqliteOnly) delete process.env.TEST_POSTGRES_URL;

console.log(`run-tests: ${tier} tier, ${files.length} files, ${isolation === 'none' ? 'in this process' : `${concurrency} at a time`}, run ${runId}`);
process.chdir(ROOT);
const stream = run({
  files: files.map((file) => path.join(ROOT, file)),
  concurrency,
  // Each file ends when its tests are done, taking with it any server a failed test left running.
  forceExit: true,
  timeout: TEST_TIMEOUT_MS,
  isolation,
  execArgv: ['--import', 'tsx'],
});
let failed = false;
stream.on('test:fail', () => {
  failed = true;
});
stream.on('test:summary', (summary: { file?: string; success: boolean }) => {
  if (summary.file === undefined && !summary.success) failed = true;
});
const done = (output: NodeJS.WritableStream, reporter: Parameters<typeof stream.compose>[0]) =>
  new Promise<void>((resolve, reject) => stream.compose(reporter).on('end', resolve).on('error', reject).pipe(output, { end: false }));
// node's own report on stdout (its summary last); on stderr what was skipped, and the slowest files.
await Promise.all([done(process.stdout, spec), done(process.stderr, skippedReporter), done(process.stderr, timingReporter)]);

try {
  const swept = await sweepTestRun(runId, process.env.TEST_POSTGRES_URL ?? '');
  if (swept.length > 0) console.error(`run-tests: swept what this run's files left behind: ${swept.join(', ')}`);
} catch (err) {
  console.error(`run-tests: could not sweep the scratch databases of run ${runId}: ${(err as Error).message}`);
}
process.exitCode = failed ? 1 : 0;

function filesToRun(tier: Tier, given: string[]): string[] {
  if (given.length === 1 && given[0] === '--beside') return tierFiles(tier).filter((file) => !ALONE_IN_CI.includes(file));
  if (given.length === 1 && given[0] === '--alone') return tierFiles(tier).filter((file) => ALONE_IN_CI.includes(file));
  if (given.length > 0) return given.map((file) => path.relative(ROOT, path.resolve(file)));
  return tierFiles(tier);
}
