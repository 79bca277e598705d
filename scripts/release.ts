// `npm run release -- <version> [--date YYYY-MM-DD]`: cuts a release (docs/operations.md,
// "Releases"). It checks first and changes nothing when a check fails:
//   - the work tree is clean, and <version> is package.json's (without its -dev) or after it, and
//     after the previous release;
//   - CHANGELOG.md's [Unreleased] section lists changes and has an "### Upgrading" paragraph, and
//     the previous release's section lists only what its commit's CHANGELOG.md listed (an entry
//     merged into the wrong section is caught here);
//   - the API against the last kept OpenAPI document: a break only with a version that may break
//     and a "- **Breaking**" line (npm run check:api).
// Then two commits:
//   1. "Release <version>": package.json (and package-lock.json), the Dockerfile's version label,
//      CHANGELOG.md ([Unreleased] becomes [<version>] - <date>, a new empty [Unreleased] above),
//      docs/openapi/<version>.json; tagged v<version>.
//   2. release/previous.json names <version> and that commit: from here on the upgrade tests
//      upgrade from it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { breakingChanges, compareVersions, parseVersion, verdict } from './api-compatibility.ts';
import { keptReleases } from './check-api.ts';
import { openApiDocument } from './openapi-document.ts';
import { PREVIOUS_RELEASE_FILE, keptJson, keptOpenApiFile, previousRelease } from './previous-release.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');
const write = (file: string, text: string) => fs.writeFileSync(path.join(ROOT, file), text);
const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();

class Refused extends Error {}

/** CHANGELOG.md's section that starts with `## [name]`, without its heading; undefined when there is none. */
export function changelogSection(changelog: string, name: string): string | undefined {
  const sections = changelog.split(/^(?=## \[)/m);
  const section = sections.find((s) => s.startsWith(`## [${name}]`));
  return section?.slice(section.indexOf('\n') + 1);
}

/** The changelog with "Unreleased" released as `version` on `date`, and a new empty "Unreleased" above it. */
export function releasedChangelog(changelog: string, version: string, date: string): string {
  return changelog.replace(/^## \[Unreleased\]\n/m, `## [Unreleased]\n\n## [${version}] - ${date}\n`);
}

/** The checks that must pass before anything is written; each failure is one line. */
export function releaseProblems(input: {
  version: string;
  current: string;
  previous: { version: string; commit: string };
  changelog: string;
  /** CHANGELOG.md as the previous release's commit had it. */
  previousChangelog: string;
}): string[] {
  const problems: string[] = [];
  const { version, current, previous, changelog } = input;
  try {
    parseVersion(version);
  } catch {
    return [`not a version: ${version} (x.y.z)`];
  }
  if (compareVersions(version, current) < 0) problems.push(`${version} comes before package.json's ${current}`);
  if (compareVersions(version, previous.version) <= 0) problems.push(`${version} does not come after the previous release ${previous.version}`);
  const unreleased = changelogSection(changelog, 'Unreleased');
  if (!unreleased?.includes('\n- ')) problems.push('CHANGELOG.md: the "Unreleased" section lists no change');
  if (!unreleased?.includes('### Upgrading'))
    problems.push('CHANGELOG.md: the "Unreleased" section has no "### Upgrading" paragraph (how to go from the previous release to this one)');
  const released = changelogSection(changelog, previous.version) ?? '';
  const stray = released.split('\n').filter((line) => line.startsWith('- ') && !input.previousChangelog.includes(line));
  if (stray.length > 0)
    problems.push(
      `CHANGELOG.md: the section of ${previous.version} lists what its commit did not (merged into the wrong section?): ${stray.map((l) => l.slice(0, 60)).join(' | ')}`,
    );
  return problems;
}

async function main(argv: string[]): Promise<void> {
  const version = argv.find((arg) => !arg.startsWith('--'));
  const dateAt = argv.indexOf('--date');
  const date = dateAt === -1 ? new Date().toISOString().slice(0, 10) : argv[dateAt + 1];
  if (!version || !/^\d{4}-\d{2}-\d{2}$/.test(date ?? '')) throw new Refused('usage: npm run release -- <version> [--date YYYY-MM-DD]');
  if (git('status', '--porcelain') !== '') throw new Refused('the work tree has changes: commit or stash them first');
  const pkg = JSON.parse(read('package.json')) as { version: string };
  const previous = previousRelease();
  const changelog = read('CHANGELOG.md');
  const problems = releaseProblems({ version, current: pkg.version, previous, changelog, previousChangelog: git('show', `${previous.commit}:CHANGELOG.md`) });
  const document = (await openApiDocument()) as { info: { version: string } };
  const baseline = keptReleases().at(-1);
  if (baseline) {
    const answer = verdict(breakingChanges(JSON.parse(fs.readFileSync(keptOpenApiFile(baseline), 'utf8')), document), { baseline, version, changelog });
    if (!answer.ok) problems.push(...answer.lines);
  }
  if (problems.length > 0) throw new Refused(`not releasing ${version}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);

  // 1. The release commit.
  write('package.json', read('package.json').replace(/^ {2}"version": "[^"]+"/m, `  "version": "${version}"`));
  const lock = JSON.parse(read('package-lock.json'));
  lock.version = version;
  lock.packages[''].version = version;
  write('package-lock.json', `${JSON.stringify(lock, null, 2)}\n`);
  write('Dockerfile', read('Dockerfile').replace(/org\.opencontainers\.image\.version="[^"]+"/, `org.opencontainers.image.version="${version}"`));
  write('CHANGELOG.md', releasedChangelog(changelog, version, date));
  document.info.version = version; // what this release's server serves: its info.version is package.json's
  fs.writeFileSync(keptOpenApiFile(version), keptJson(document));
  git('add', 'package.json', 'package-lock.json', 'Dockerfile', 'CHANGELOG.md', path.relative(ROOT, keptOpenApiFile(version)));
  git('commit', '-q', '-m', `Release ${version}`);
  const commit = git('rev-parse', 'HEAD');
  git('tag', `v${version}`);

  // 2. Upgrades are tested from it from now on.
  fs.writeFileSync(PREVIOUS_RELEASE_FILE, `${JSON.stringify({ version, commit }, null, 2)}\n`);
  git('add', path.relative(ROOT, PREVIOUS_RELEASE_FILE));
  git('commit', '-q', '-m', `After ${version}: the upgrade tests upgrade from it (release/previous.json)`);
  console.log(`released ${version} as ${commit.slice(0, 7)} (tag v${version}); release/previous.json names it. Push the branch and the tag.`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  await main(process.argv.slice(2)).catch((err) => {
    console.error(err instanceof Refused ? err.message : err);
    process.exitCode = 1;
  });
}
