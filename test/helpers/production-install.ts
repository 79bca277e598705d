// The production install as docs/deployment.md ("Production") tells it, read from that page itself,
// so that the test of it (test/production/) and the Dockerfile's check run what users read.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './processes.ts';

/** Where the production install is written down for users. */
const PRODUCTION_INSTALL_DOC = 'docs/deployment.md';

/** The commands of the ```bash block that follows the production-install marker in docs/deployment.md. */
export function productionInstallCommands(): string[] {
  const text = fs.readFileSync(path.join(ROOT, PRODUCTION_INSTALL_DOC), 'utf8');
  const match = /<!-- production install[^>]*-->\s*```bash\n([\s\S]*?)^```$/m.exec(text);
  assert.ok(match, `${PRODUCTION_INSTALL_DOC} has the production install block`);
  return match[1]
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line && !line.startsWith('#'));
}
