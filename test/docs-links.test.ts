// Every relative link between the pages a reader follows (README.md, CONTRIBUTING.md,
// docs/*.md) leads somewhere: the file or folder it names exists, and its #anchor is a heading
// of that page, spelled as GitHub spells anchors. A section renamed, moved to another page, or a
// page split, fails here instead of leaving a reader at the top of the wrong page.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';
import { userDocFiles } from './helpers/source-text.ts';

const PAGES = userDocFiles();

/** The lines of a Markdown text outside fenced code blocks, with inline code spans blanked. */
function proseLines(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').map((line) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      return '';
    }
    if (fence !== undefined) return '';
    return line.replace(/(`+)[^`]*?\1/g, '');
  });
}

/**
 * The anchor GitHub gives a heading: its text as rendered (link targets, code marks and
 * emphasis dropped), lower-cased, without the characters that are not letters, marks, digits,
 * `_`, `-` or spaces, and its spaces as `-` (what github-slugger does).
 */
function anchorOf(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a page's headings; a repeated one gets `-1`, `-2`… as on GitHub. */
function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  // Headings are read with their code spans, which the anchor keeps the text of.
  let fenced = false;
  for (const line of text.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const anchor = anchorOf(heading[1]);
    const count = seen.get(anchor) ?? 0;
    seen.set(anchor, count + 1);
    anchors.add(count === 0 ? anchor : `${anchor}-${count}`);
  }
  return anchors;
}

/** The targets of a Markdown text's links and images, `[text](target)`, `![alt](target)` and `[label]: target`, with their lines. */
function linkTargets(text: string): { line: number; target: string }[] {
  return proseLines(text).flatMap((prose, i) =>
    [
      ...[...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]),
      ...[...prose.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/g)].map((m) => m[1]),
    ].map((target) => ({ line: i + 1, target })),
  );
}

/** A page's links to files of this repository (not `https:`, `mailto:`…). */
function linksOf(file: string): { line: number; target: string }[] {
  return linkTargets(fs.readFileSync(path.join(ROOT, file), 'utf8')).filter(({ target }) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

/** What is wrong with a link, or undefined when it leads where it says. */
function brokenLink(file: string, target: string): string | undefined {
  const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined];
  const linked = pathPart === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURI(pathPart)));
  if (linked.startsWith('..')) return 'leads outside the repository';
  if (!fs.existsSync(path.join(ROOT, linked))) return `no file ${linked}`;
  if (anchor === undefined) return undefined;
  if (!linked.endsWith('.md')) return `an anchor in ${linked}, which is not a Markdown page`;
  if (!anchorsOf(linked).has(anchor)) return `${linked} has no heading whose anchor is #${anchor}`;
  return undefined;
}

describe('links between the docs', () => {
  it('docs: every relative link and #anchor in README.md, CONTRIBUTING.md and docs/*.md leads to a file and a heading that exist', () => {
    const broken = PAGES.flatMap((file) =>
      linksOf(file).flatMap(({ line, target }) => {
        const problem = brokenLink(file, target);
        return problem ? [`${file}:${line}: (${target}) ${problem}`] : [];
      }),
    );
    assert.deepEqual(broken, []);
  });

  it("docs: the README links every page of docs/, CONTRIBUTING.md and the console's picture", () => {
    const fromReadme = new Set(linksOf('README.md').map(({ target }) => path.posix.normalize(target.split('#')[0])));
    const unlinked = PAGES.filter((page) => page !== 'README.md' && !fromReadme.has(page));
    assert.deepEqual(unlinked, [], 'the README links every page of the manual');
    // The console's picture, which `npm run screenshots` takes again (test/console.browser.test.ts).
    assert.ok(fromReadme.has('docs/images/console-group.png'), "the README shows the console's picture");
  });

  it('docs: the link reader finds inline links, images and references, and skips code', () => {
    const text = [
      'See [the API](docs/api.md#errors), ![a picture](docs/images/x.png "title") and [this](#below).',
      '`[not a link](nowhere.md)` and [elsewhere](https://example.com/a.md).',
      '```',
      '[in a fence](fenced.md)',
      '```',
      '[label]: docs/cli.md',
    ].join('\n');
    assert.deepEqual(linkTargets(text), [
      { line: 1, target: 'docs/api.md#errors' },
      { line: 1, target: 'docs/images/x.png' },
      { line: 1, target: '#below' },
      { line: 2, target: 'https://example.com/a.md' },
      { line: 6, target: 'docs/cli.md' },
    ]);
  });

  it("docs: a heading's anchor is GitHub's", () => {
    assert.equal(anchorOf('Upgrades, migrations and rollback'), 'upgrades-migrations-and-rollback');
    assert.equal(anchorOf('POST /api/users/upsert: many groups in one call'), 'post-apiusersupsert-many-groups-in-one-call');
    assert.equal(anchorOf('`GET /api/events`: the feed'), 'get-apievents-the-feed');
    assert.equal(anchorOf('The command-line tool: `ugs`'), 'the-command-line-tool-ugs');
    assert.equal(anchorOf('Node.js'), 'nodejs');
    assert.equal(anchorOf('[jose](https://example.com) (tested)'), 'jose-tested');
    assert.equal(anchorOf('`UGS_WORKERS` and user_group_id'), 'ugs_workers-and-user_group_id');
  });
});
