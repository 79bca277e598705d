// What the commands of a checkout (`npm start`: bin/server.js; `ugs`: bin/ugs.js) do before they
// load the service that `npm install` compiled into dist/. Plain JavaScript that any Node.js
// runs: on a fresh clone under an unsupported Node.js, `npm install` stopped with npm's
// EBADENGINE (engine-strict in .npmrc), so there is no dist/ to load, and the user must hear
// which Node.js is needed in one line, not a MODULE_NOT_FOUND stack. The rule is the one of
// src/process/node-version.ts, which `node dist/server.js` (the production command) runs first;
// test/node-version.test.ts holds both to the same line.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The message for a Node.js older than `range` (package.json's engines, ">=major.minor"), or null. */
function unsupportedNodeMessage(range, found) {
  const minimum = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range.trim());
  if (!minimum) return null; // a range this check cannot read: npm's own check stands
  const wanted = minimum.slice(1).map((part) => Number(part ?? 0));
  const have = found.replace(/^v/, '').split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    if (have[i] > wanted[i]) return null;
    if (have[i] < wanted[i]) {
      return `The User Group Service needs Node.js ${range.trim()}; this is Node.js ${found} (${process.execPath}). Install Node.js ${wanted[0]}.${wanted[1]} or newer (.nvmrc names the one CI uses) and run it again.`;
    }
  }
  return null;
}

/** Loads `entry` (relative to bin/, in dist/) as `name`, once this Node.js is known to be supported and dist/ to be built. */
export async function runCompiled(entry, name) {
  const { engines } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  const unsupported = unsupportedNodeMessage(engines.node, process.version);
  if (unsupported) {
    process.stderr.write(`${unsupported}\n`);
    process.exit(1);
  }
  const url = new URL(entry, import.meta.url);
  try {
    await import(url.href);
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes(fileURLToPath(url))) throw err;
    process.stderr.write(`${name}: dist/ is missing: run npm install (or npm run build) first\n`);
    process.exitCode = 1;
  }
}
