// The console's bundle budget: what a browser downloads to run it stays small (docs/api.md,
// "The console"). Built by `npm run build`; this reads the tests' own build (npm test builds it first).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { TEST_BUILD } from './helpers/processes.ts';
import { CONSOLE_BUDGET_GZIPPED_KIB } from './helpers/budgets.ts';

const BUDGET_GZIPPED_BYTES = CONSOLE_BUDGET_GZIPPED_KIB * 1024;
const DIST = path.join(TEST_BUILD, 'console', 'dist');

describe('the console bundle', () => {
  it(`console: the JavaScript is at most ${BUDGET_GZIPPED_BYTES / 1024} KiB gzipped, and the page loads only its own two files`, () => {
    const script = path.join(DIST, 'assets', 'console.js');
    assert.ok(fs.existsSync(script), `${script} is missing: run npm run build:tests`);
    const gzipped = zlib.gzipSync(fs.readFileSync(script)).length;
    process.stdout.write(`# console.js: ${(gzipped / 1024).toFixed(1)} KiB gzipped (budget ${BUDGET_GZIPPED_BYTES / 1024} KiB)\n`);
    assert.ok(gzipped <= BUDGET_GZIPPED_BYTES, `console.js is ${gzipped} bytes gzipped, over the budget of ${BUDGET_GZIPPED_BYTES}`);
    const html = fs.readFileSync(path.join(DIST, 'index.html'), 'utf8');
    const loaded = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    assert.deepEqual(loaded, ['data:,', '/console/assets/console.css', '/console/assets/console.js']);
  });
});
