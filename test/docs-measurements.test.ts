// Measured figures live in docs/performance.md only, with what was measured and on what
// (its section "Why the code is the way it is" holds those behind the code's choices). A
// figure copied into a comment drifts while the code and the machines change, and nothing
// tells: comments once quoted µs, percentages and "30 times slower" that no run confirmed any
// more. A comment says why, and points to the section. Limits and settings (a 5 s timeout,
// a 64 KiB limit, a default of 16) are not measurements, and none of these patterns finds
// them.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';
import { commentsOf, sourceFiles, userDocFiles } from './helpers/source-text.ts';

/** What a measured figure looks like in prose. Inline code (`…`) is left out before matching. */
const MEASUREMENTS: [what: string, pattern: RegExp][] = [
  [
    'a time in micro- or nanoseconds',
    /\d\s?(?:µs|ns|microseconds?|nanoseconds?)\b|\b(?:a|one|a few|a couple of|several|some tens of|tens of)\s+(?:micro|nano)seconds\b/i,
  ],
  [
    'a rate',
    /\d[\d,.]*k?\s?(?:req|requests|calls|ops|operations|events|groups|reads|writes)\/s\b|\d[\d,.]*k?\s(?:requests|calls|operations) (?:a|per) second\b/i,
  ],
  ['a percentage', /(?<![\w%.])\d+(?:[.,]\d+)?\s?%|\bper ?cent\b(?!-)/i],
  [
    'a ratio of costs',
    /\b(?:\d[\d.,]*\s?(?:times|x|×)|twice|half|a third|a quarter|a fifth|a tenth)\s+(?:as\s+)?(?:faster|slower|fast|slow|much|many|more|less|fewer|longer|shorter|the cost)\b/i,
  ],
  [
    'a share of a cost',
    /\b(?:twice|half|a third|a quarter|a fifth|a tenth)\s+of\s+(?:the|a|an|each|its)\s+(?:[\w-]+\s+){0,2}?(?:cost|time|hit|request|send|call|read|write|run)s?\b/i,
  ],
  [
    'what something took or cost',
    /\b(?:took|takes|cost|costs|ran|spent|measured)\s*:?\s+(?:about\s+|nearly\s+|roughly\s+|~)?(?:\d[\d.,]*\s?(?:µs|ns|ms|s|seconds?|minutes?|bytes|B|KB|KiB|MB|MiB|GB|GiB|%|times|x|×)(?!\w)|twice|half|a third|a quarter|a fifth)/i,
  ],
  ['a latency percentile', /\bp(?:50|90|95|99)\b[^.;]{0,15}\d/i],
  ['an approximate size or duration', /~\s?\d[\d.,]*\s?(?:bytes|B|KB|KiB|MB|MiB|GB|GiB|µs|ms|s|%)(?!\w)/],
];

/** Phrases that match a pattern above and are settings, not measurements. Each says why. */
const ALLOWED: [file: RegExp, phrase: RegExp, why: string][] = [
  [/^bench\//, /\b90 % of the way into the listing\b/, "where the benchmark's deep-page scenario starts: a setting of the benchmark"],
];

const CODE_DIRS = ['src', 'bench', 'scripts', 'console/src', 'packages/client/src'];

function figuresIn(file: string): string[] {
  const found: string[] = [];
  for (const { line, text } of commentsOf(fs.readFileSync(path.join(ROOT, file), 'utf8'))) {
    let prose = text.replace(/`[^`]*`/g, '`…`');
    for (const [where, phrase] of ALLOWED) if (where.test(file)) prose = prose.replace(phrase, '…');
    for (const [what, pattern] of MEASUREMENTS) {
      const match = pattern.exec(prose);
      if (match) found.push(`${file}:${line}: ${what}: "…${prose.slice(Math.max(0, match.index - 40), match.index + match[0].length + 20)}…"`);
    }
  }
  return found;
}

describe('measured figures', () => {
  it(`docs: no comment in ${CODE_DIRS.join(', ')} quotes a measured figure (they live in docs/performance.md)`, () => {
    assert.deepEqual(sourceFiles(...CODE_DIRS).flatMap(figuresIn), []);
  });

  it('docs: the patterns find the figures comments used to quote, and leave settings alone', () => {
    const quotes = (comment: string) => MEASUREMENTS.some(([, pattern]) => pattern.test(comment));
    for (const figure of [
      'crypto.randomBytes costs about 5 µs whatever its size',
      'lookups ran ~11 % faster',
      'the account was scanned (measured: 30 times slower at 20,000 groups)',
      'a first page took 50 ms instead of 0.14',
      'a new connection per delivery cost about half of each send',
      'a third of the cost of createHash, on every request',
      'a fifth of a get-or-create hit inside the loaded server',
      'a 100 MiB line cost 672 MB',
      '~250 bytes an entry',
      'answered 20,000 requests/s with a p99 of 3 ms',
      'batched half as many reads',
    ])
      assert.ok(quotes(figure), `not found: ${figure}`);
    for (const setting of [
      'gives up after 15 s',
      'at most every 50 ms',
      "the 256 KiB of a single call's body",
      'a default of 16',
      'renewed every third of it',
      'leaves them about half the time instead of none',
      'microseconds since 1970',
      'a path whose percent-escapes are not UTF-8',
      'a transaction that took number 10 may commit after the one that took 11 was read',
      'RS256 tokens and keys are several times larger',
    ])
      assert.ok(!quotes(setting), `taken for a measurement: ${setting}`);
  });

  it('docs: the comment reader finds comments only, not // inside strings, templates or regular expressions', () => {
    const source = [
      "const url = 'http://example.com/a'; // one",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text the reader is given holds a template literal
      'const t = `${a}//b ${`//c`}`; /* two',
      ' * lines */',
      'const re = /\\/\\//g; const half = x / 2; // three',
      '// four, joined',
      '// with this line',
    ].join('\n');
    assert.deepEqual(commentsOf(source), [
      { line: 1, text: 'one' },
      { line: 2, text: 'two lines' },
      { line: 4, text: 'three four, joined with this line' },
    ]);
  });
});

describe('figures that drift', () => {
  it('docs: no document states how many lines the code has', () => {
    const docs = userDocFiles();
    const found = docs.flatMap((file) => {
      const text = fs.readFileSync(path.join(ROOT, file), 'utf8').replace(/\s+/g, ' ');
      return [
        ...text.matchAll(/\b(?:a few|several|about|~)?\s?[\d,.]+k?\s+(?:thousand\s+)?lines of (?:TypeScript|code)\b|\b(?:a few|several) thousand lines\b/gi),
      ].map((m) => `${file}: "${m[0]}"`);
    });
    assert.deepEqual(found, []);
  });
});
