// The Node.js this service needs, checked before anything else of it loads. On an older Node
// the native SQLite module crashed the process (Node 20: "Segmentation fault", and an empty
// database file left behind) with no word of why. The server and the command-line tool import
// this module first, so that it is evaluated before any other module of theirs; npm itself
// refuses to install on such a Node (engine-strict in .npmrc).
import { createRequire } from 'node:module';

/** The message for a Node.js older than `range` (package.json's engines, ">=major.minor"), or null. */
export function unsupportedNodeMessage(range: string, found: string): string | null {
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

const { engines } = createRequire(import.meta.url)('../../package.json') as { engines: { node: string } };
const unsupported = unsupportedNodeMessage(engines.node, process.version);
if (unsupported) {
  process.stderr.write(`${unsupported}\n`);
  process.exit(1);
}
