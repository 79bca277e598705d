// Code, tests and docs point a reader to a section of the docs by its file and heading:
// docs/api.md, "The embed side". Such a pointer is only worth following if the section is
// there: every citation of that form in src/, test/, bench/, scripts/, the console, the
// client and the Markdown docs is held here to a file and a heading that exist. Tests cite
// docs/api.md, which users read, never a numbered section of a document that is not in the
// repository, and nothing a user reads cites an issue number of this project's own tracker.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';
import { commentsOf, markdownTitles, plainHeading, sourceFiles, userDocFiles } from './helpers/source-text.ts';
import { openApiDocument } from '../scripts/openapi-document.ts';

const CODE_DIRS = ['src', 'test', 'bench', 'scripts', 'console/src', 'packages/client/src'];
/** What users and contributors read. CHANGELOG.md is history: it names sections as they were. */
const DOCS = userDocFiles();

/**
 * `docs/api.md, "A"`, `docs/api.md ("A")`, `docs/api.md, "A", "B"`, `README, "A"`, and in
 * docs/ `[api.md](api.md), "A"`: the document, then the quoted headings.
 */
const CITATION = /(?<![\w/.-])\[?((?:docs\/)?[\w-]+\.md|README)\]?(?:\([^)\s]*\))?(?:,\s*|\s*\(\s*)((?:"[^"]{1,120}"(?:\s*,\s*|\s+and\s+)?)+)/g;

/** The text of a file as one line: Markdown as is, source files' comments and strings with their line breaks and comment markers gone. */
function flattened(file: string): string {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  if (file.endsWith('.md')) return text.replace(/\s+/g, ' ');
  return text.replace(/\s*\n\s*(?:\/\/|\*(?!\/))?\s*/g, ' ');
}

function citedFile(citing: string, cited: string): string {
  if (cited === 'README') return 'README.md';
  if (cited.startsWith('docs/')) return cited;
  const beside = path.posix.join(path.posix.dirname(citing), cited);
  return fs.existsSync(path.join(ROOT, beside)) ? beside : cited;
}

const titlesOf = new Map<string, Set<string>>();

/** A title is cited whole, or without the subtitle after its colon or its final parenthesis ("Calibration" for "Calibration: what …"). */
function names(cited: string, titles: Set<string>): boolean {
  const title = plainHeading(cited);
  return titles.has(title) || [...titles].some((t) => t.startsWith(`${title}: `) || t.startsWith(`${title} (`));
}

function brokenCitations(file: string): string[] {
  const broken: string[] = [];
  for (const [citation, cited, titles] of flattened(file).matchAll(CITATION)) {
    const target = citedFile(file, cited);
    if (!fs.existsSync(path.join(ROOT, target))) {
      broken.push(`${file}: ${citation.trim()} (no file ${target})`);
      continue;
    }
    if (!titlesOf.has(target)) titlesOf.set(target, markdownTitles(target));
    for (const [, title] of titles.matchAll(/"([^"]+)"/g)) {
      if (!names(title, titlesOf.get(target) ?? new Set())) broken.push(`${file}: ${target} has no heading "${title}"`);
    }
  }
  return broken;
}

/**
 * A number in an issue tracker: `#31`, `issue 31`, `issue #31`, `ticket 7`. Not a colour
 * (`#4f46e5`, `"#333"`), a fragment (`#/groups`, `#get-/api/user`) or an entity (`&#x21a9;`).
 */
const ISSUE_NUMBER = /(?<![\w&#"'/-])#\d+(?![\w-])|\b(?:issues?|tickets?|pull requests?)\s+#?\d+\b/gi;

/** What a user or an operator reads, besides the Markdown: the pages the service serves and the console's own words. */
const PAGE_FILES = [
  ...fs
    .readdirSync(path.join(ROOT, 'static'), { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(?:html|js)$/.test(f) && !f.includes('vendor'))
    .map((f) => `static/${f}`),
  'console/index.html',
  ...sourceFiles('console/src'),
];

/** Every string of a JSON document (descriptions, summaries, examples), with where it is. */
function stringsOf(node: unknown, where = ''): { where: string; text: string }[] {
  if (typeof node === 'string') return [{ where, text: node }];
  if (node === null || typeof node !== 'object') return [];
  return Object.entries(node).flatMap(([key, value]) => stringsOf(value, `${where}/${key}`));
}

describe('citations of the docs', () => {
  it('docs: every citation of a document\'s section (docs/<file>.md, "<heading>") names a file and a heading that exist', () => {
    const files = [...sourceFiles(...CODE_DIRS).filter((file) => file !== 'test/docs-citations.test.ts'), ...DOCS];
    assert.deepEqual(files.flatMap(brokenCitations), []);
  });

  it('docs: no comment in src/ or test/ cites a numbered section or rule of a document outside the repository', () => {
    const found = sourceFiles('src', 'test').flatMap((file) =>
      commentsOf(fs.readFileSync(path.join(ROOT, file), 'utf8'))
        .filter(({ text }) =>
          /(?<!RFC \d+ )(?:§\s*\d|\b(?:section|rule|promise)s? \d)|(?<!--)\bCONTRACT\b(?! (?:changes?|steps?|migrations?)\b)|\bSEED\.md\b/i.test(text),
        )
        .map(({ line, text }) => `${file}:${line}: ${text.slice(0, 120)}`),
    );
    assert.deepEqual(found, [], 'cite docs/api.md (or docs/security.md, docs/operations.md) by its heading instead');
  });

  it('docs: nothing a user reads cites an issue number of the project (docs, README, CHANGELOG, the pages, the console, the OpenAPI document, comments in src/)', async () => {
    const markdown = [...DOCS, 'CHANGELOG.md', 'SECURITY.md'];
    const found = [
      ...[...markdown, ...PAGE_FILES].flatMap((file) =>
        fs
          .readFileSync(path.join(ROOT, file), 'utf8')
          .split('\n')
          .flatMap((line, i) => [...line.matchAll(ISSUE_NUMBER)].map((m) => `${file}:${i + 1}: ${m[0]}`)),
      ),
      ...sourceFiles('src').flatMap((file) =>
        commentsOf(fs.readFileSync(path.join(ROOT, file), 'utf8')).flatMap(({ line, text }) =>
          [...text.matchAll(ISSUE_NUMBER)].map((m) => `${file}:${line}: ${m[0]}`),
        ),
      ),
      ...stringsOf(await openApiDocument()).flatMap(({ where, text }) => [...text.matchAll(ISSUE_NUMBER)].map((m) => `/openapi.json${where}: ${m[0]}`)),
    ];
    assert.deepEqual(found, [], 'users cannot see the tracker: say what the rule or the test is instead');
  });

  it('docs: the issue-number reader finds a number in a tracker, and no colour, fragment or entity', () => {
    const found = (text: string) => [...text.matchAll(ISSUE_NUMBER)].map((m) => m[0]);
    assert.deepEqual(found('rows 1 and 1b of issue #31'), ['issue #31']);
    assert.deepEqual(found('(see #42) and issue 7, Issues 12'), ['#42', 'issue 7', 'Issues 12']);
    assert.deepEqual(found('color: #4f46e5; "#333" #/groups #get-/api/user &#x21a9; &#8617; issue `too_long`'), []);
  });

  it('docs: the citation reader finds each form a citation takes', () => {
    const found = (text: string) => [...text.matchAll(CITATION)].map((m) => [m[1], [...m[2].matchAll(/"([^"]+)"/g)].map((t) => t[1])]);
    assert.deepEqual(found('(docs/api.md, "Requests", "Errors")'), [['docs/api.md', ['Requests', 'Errors']]]);
    assert.deepEqual(found('as docs/operations.md ("PgBouncer") describes'), [['docs/operations.md', ['PgBouncer']]]);
    assert.deepEqual(found('([performance.md](performance.md), "Memory")'), [['performance.md', ['Memory']]]);
    assert.deepEqual(found('(README, "Production")'), [['README', ['Production']]]);
    assert.deepEqual(found("readFileSync('docs/api.md', 'utf8')"), []);
  });
});
