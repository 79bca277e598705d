// `npm run check:api`: today's OpenAPI document (GET /openapi.json, without a server) against
// the kept document of the last release (docs/openapi/<version>.json: the newest at or below
// package.json's version). `npm run check:api -- --against FILE`: against any document.
// Fails (exit 1) on a breaking change and names each; a deliberate break passes only with a
// version that may break and a CHANGELOG.md line that declares it (api-compatibility.ts;
// docs/operations.md, "Releases"). Exit 2: called the wrong way. .ci/run runs it.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { breakingChanges, compareVersions, verdict } from './api-compatibility.ts';
import { openApiDocument } from './openapi-document.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The released versions whose documents are kept, oldest first. */
export function keptReleases(): string[] {
  const dir = path.join(ROOT, 'docs/openapi');
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .map((name) => /^(\d+\.\d+\.\d+)\.json$/.exec(name)?.[1])
    .filter((version): version is string => version !== undefined)
    .sort(compareVersions);
}

async function main(argv: string[]): Promise<number> {
  const at = argv.indexOf('--against');
  if ((at !== -1 && argv[at + 1] === undefined) || argv.some((arg, i) => arg !== '--against' && i !== at + 1)) {
    console.error('usage: npm run check:api [-- --against FILE]');
    return 2;
  }
  const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  let baseline: string | undefined;
  let file: string;
  if (at !== -1) {
    file = path.resolve(argv[at + 1]);
  } else {
    baseline = keptReleases()
      .filter((kept) => compareVersions(kept, version) <= 0)
      .at(-1);
    if (baseline === undefined) {
      console.error(`check:api: no kept OpenAPI document at or below ${version} in docs/openapi/`);
      return 1;
    }
    file = path.join(ROOT, 'docs/openapi', `${baseline}.json`);
  }
  const before = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
  const changelog = fs.readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8');
  const answer = verdict(breakingChanges(before, await openApiDocument()), { baseline, version, changelog });
  (answer.ok ? console.log : console.error)(answer.lines.join('\n'));
  return answer.ok ? 0 : 1;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  process.exitCode = await main(process.argv.slice(2));
}
