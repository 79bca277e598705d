// The test command of each tier (CONTRIBUTING.md, "Test tiers"): `npm run test:fast`,
// `npm test`, `npm run test:slow`. Runs the tier's files (test/tiers.ts) with node's test
// runner, several files at a time, in one run whose last lines are node's own summary (tests,
// pass, fail…), then the list of what was skipped and the slowest files. Every file of the run
// names its scratch databases after one run id (UGS_TEST_RUN_ID, test/helpers/backends.ts), and
// what a crashed file left behind is swept at the end, by this run only.
//
//   tsx scripts/run-tests.ts <fast|test|slow> [node's test options…] [test files…]
//
// Files given run instead of the tier's (each must be in the tier); UGS_TEST_CONCURRENCY sets
// how many files run at once.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TIERS, tierFiles, testCommand, type Tier } from '../test/tiers.ts';
import { sweepTestRun } from '../test/helpers/backends.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const [tier, ...rest] = process.argv.slice(2);
if (!(tier in TIERS)) {
  console.error(`run-tests: which tier? one of ${Object.keys(TIERS).join(', ')}`);
  process.exit(2);
}
const { concurrency: tierConcurrency, sqliteOnly } = TIERS[tier as Tier];
const options = rest.filter((arg) => arg.startsWith('-'));
const given = rest.filter((arg) => !arg.startsWith('-')).map((file) => path.relative(ROOT, path.resolve(file)));
const files = tierFiles(tier as Tier);
const outside = given.filter((file) => !files.includes(file));
if (outside.length > 0) {
  console.error(`run-tests: not in the ${tier} tier (test/tiers.ts): ${outside.join(', ')}`);
  process.exit(2);
}

const concurrency = Number(process.env.UGS_TEST_CONCURRENCY || tierConcurrency);
const runId = process.env.UGS_TEST_RUN_ID || `r${Date.now().toString(36)}${crypto.randomBytes(2).toString('hex')}`;
const env: NodeJS.ProcessEnv = { ...process.env, UGS_TEST_RUN_ID: runId };
// The fast tier is the routes on SQLite: PostgreSQL is for `npm test`.
if (sqliteOnly) delete env.TEST_POSTGRES_URL;

const run = given.length > 0 ? given : files;
console.log(`run-tests: ${tier} tier, ${run.length} files, ${concurrency} at a time, run ${runId}`);
const child = spawn(process.execPath, [...testCommand({ concurrency }), ...options, ...run], { cwd: ROOT, env, stdio: 'inherit' });
// Ctrl-C reaches the test runner through the terminal; here it only waits for it to end.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));

try {
  const swept = await sweepTestRun(runId, env.TEST_POSTGRES_URL ?? '');
  if (swept.length > 0) console.error(`run-tests: swept what this run's files left behind: ${swept.join(', ')}`);
} catch (err) {
  console.error(`run-tests: could not sweep the scratch databases of run ${runId}: ${(err as Error).message}`);
}
process.exitCode = signal === null ? (code ?? 1) : 1;
