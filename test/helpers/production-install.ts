// The production install as README.md ("Production") tells it, read from the README itself,
// so that the test of it (test/production/) and the Dockerfile's check run what users read.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './processes.ts';

/** The commands of the ```bash block that follows the production-install marker in README.md. */
export function productionInstallCommands(): string[] {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const match = /<!-- production install[^>]*-->\s*```bash\n([\s\S]*?)^```$/m.exec(readme);
  assert.ok(match, 'README.md has the production install block');
  return match[1]
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line && !line.startsWith('#'));
}
