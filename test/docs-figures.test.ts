// Figures the docs give of what is measured: the production tree's packages and the console's
// size. Written down by hand, they drifted apart (95 and 105 packages; "about 20 KiB" for a
// bundle the build printed as 24.1 KiB). The docs state the bounds the tests enforce
// (test/helpers/budgets.ts) and nothing else; the measurements are printed where they are made.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';
import { userDocFiles } from './helpers/source-text.ts';
import { CONSOLE_BUDGET_GZIPPED_KIB, PRODUCTION_MAX_PACKAGES } from './helpers/budgets.ts';

/** README.md, CONTRIBUTING.md and docs/*.md, each as one line (a figure may be split over two). */
function userDocs(): { file: string; text: string }[] {
  const files = userDocFiles();
  return files.map((file) => ({ file, text: fs.readFileSync(path.join(ROOT, file), 'utf8').replace(/\s+/g, ' ') }));
}

describe('figures in the docs', () => {
  it('docs: the production tree and the console bundle are described only by the bounds the tests hold them to', () => {
    const found: string[] = [];
    for (const { file, text } of userDocs()) {
      for (const [figure, count] of text.matchAll(/\b(?:about |~)?(\d[\d,]*) (?:production )?packages\b/g)) {
        if (Number(count.replace(/,/g, '')) !== PRODUCTION_MAX_PACKAGES) found.push(`${file}: "${figure}"`);
      }
      for (const [figure, size] of text.matchAll(/\b(?:about |~)?(\d+(?:\.\d+)?) KiB gzipped/g)) {
        if (Number(size) !== CONSOLE_BUDGET_GZIPPED_KIB) found.push(`${file}: "${figure}"`);
      }
    }
    assert.deepEqual(found, [], 'a measured figure written into the docs: state the bound, or print the measurement where it is made');
  });
});
