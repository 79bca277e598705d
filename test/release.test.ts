// Releases (docs/operations.md, "Releases"): one version, said by `ugs --version`, /healthz and
// the OpenAPI document; the previous release named once, its commit in this clone and its
// OpenAPI document kept; CHANGELOG.md's sections as `npm run release` needs them.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, runUgs } from './helpers/processes.ts';
import { startTestApp } from './helpers/harness.ts';
import { previousRelease, keptOpenApiFile } from '../scripts/previous-release.ts';
import { changelogSection, releaseProblems, releasedChangelog } from '../scripts/release.ts';

const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
const changelog = fs.readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8');

describe('releases', () => {
  it("ugs --version, GET /healthz and the OpenAPI document's info.version say package.json's version", async () => {
    const cli = await runUgs(['--version'], {});
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal(cli.stdout.trim(), version);
    const t = await startTestApp('sqlite');
    try {
      const health = await t.request('GET', '/healthz');
      assert.deepEqual(health.body, { success: 1, status: 'ok', version });
      assert.equal(JSON.parse((await t.request('GET', '/openapi.json')).text).info.version, version);
    } finally {
      await t.close();
    }
  });

  it('the previous release is named once (release/previous.json): its commit is in this clone and its OpenAPI document is kept', () => {
    const previous = previousRelease();
    // CI clones with full history; a shallow clone fails here, saying why, before the upgrade suites do.
    assert.doesNotThrow(
      () => execFileSync('git', ['cat-file', '-e', `${previous.commit}^{commit}`], { cwd: ROOT, stdio: 'ignore' }),
      `the previous release's commit ${previous.commit} is not in this clone: clone with full history (git fetch --unshallow)`,
    );
    const atCommit = JSON.parse(execFileSync('git', ['show', `${previous.commit}:package.json`], { cwd: ROOT, encoding: 'utf8' })) as { version: string };
    assert.equal(atCommit.version, previous.version, "the commit's package.json says that version");
    const kept = JSON.parse(fs.readFileSync(keptOpenApiFile(previous.version), 'utf8'));
    assert.equal(kept.info.version, previous.version);
    assert.ok(changelogSection(changelog, previous.version), `CHANGELOG.md has a section for ${previous.version}`);
  });

  it("CHANGELOG.md: the previous release's section lists only what its commit's CHANGELOG.md listed (an entry merged into it belongs under Unreleased)", () => {
    const previous = previousRelease();
    const problems = releaseProblems({
      version: '99.0.0',
      current: version,
      previous,
      changelog,
      previousChangelog: execFileSync('git', ['show', `${previous.commit}:CHANGELOG.md`], { cwd: ROOT, encoding: 'utf8' }),
    }).filter((problem) => problem.includes('lists what its commit did not'));
    assert.deepEqual(problems, []);
  });

  it('npm run release refuses what is not ready, and releases "Unreleased" under the version and date', () => {
    const previous = { version: '0.1.0', commit: 'c'.repeat(40) };
    const ready = '# Changelog\n\n## [Unreleased]\n\n### Added\n\n- A thing.\n\n### Upgrading\n\nRoll.\n\n## [0.1.0] - 2026-11-28\n\n- Old.\n';
    assert.deepEqual(releaseProblems({ version: '0.2.0', current: '0.1.0', previous, changelog: ready, previousChangelog: '- Old.\n' }), []);
    assert.deepEqual(releaseProblems({ version: '0.2.0', current: '0.2.0-dev', previous, changelog: ready, previousChangelog: '- Old.\n' }), []);
    assert.match(
      releaseProblems({ version: '0.2.0', current: '0.3.0-dev', previous, changelog: ready, previousChangelog: '- Old.\n' }).join('\n'),
      /comes before package\.json's 0\.3\.0-dev/,
    );
    assert.match(
      releaseProblems({ version: '0.1.0', current: '0.1.0', previous, changelog: ready, previousChangelog: '- Old.\n' }).join('\n'),
      /does not come after the previous release 0\.1\.0/,
    );
    assert.match(
      releaseProblems({
        version: '0.2.0',
        current: '0.1.0',
        previous,
        changelog: ready.replace('### Upgrading\n\nRoll.\n\n', ''),
        previousChangelog: '- Old.\n',
      }).join('\n'),
      /no "### Upgrading" paragraph/,
    );
    assert.match(
      releaseProblems({
        version: '0.2.0',
        current: '0.1.0',
        previous,
        changelog: ready.replace('- Old.', '- Old.\n- Merged here by mistake.'),
        previousChangelog: '- Old.\n',
      }).join('\n'),
      /the section of 0\.1\.0 lists what its commit did not/,
    );
    assert.equal(releasedChangelog(ready, '0.2.0', '2026-12-01'), ready.replace('## [Unreleased]\n', '## [Unreleased]\n\n## [0.2.0] - 2026-12-01\n'));
  });
});
