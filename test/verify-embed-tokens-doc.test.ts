// docs/verify-embed-tokens.md shows the code test/embed-interop.test.ts runs: each block under
// a `<!-- snippet: <file> -->` marker must appear verbatim in that file, and every verifier
// file the interoperability suite runs must be shown. A doc that drifts from the tested code
// fails here, not in a customer's data API.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';

const DOC = path.join(ROOT, 'docs', 'verify-embed-tokens.md');
const TESTED = [
  'examples/verify-embed-token/jose.mjs',
  'examples/verify-embed-token/jsonwebtoken.mjs',
  'examples/verify-embed-token/fast-jwt.mjs',
  'examples/verify-embed-token/pyjwt.py',
  'examples/verify-embed-token/go/main.go',
  'examples/postgres-rls/server.mjs',
];

function snippets(): { file: string; code: string }[] {
  const doc = fs.readFileSync(DOC, 'utf8');
  return [...doc.matchAll(/^<!-- snippet: (\S+) -->\n```\w*\n([\s\S]*?)^```$/gm)].map(([, file, code]) => ({ file, code }));
}

it('verify-embed-tokens.md: every snippet marked as tested is verbatim in the file the interoperability suite runs', () => {
  const found = snippets();
  assert.ok(found.length >= TESTED.length, `snippets found: ${found.length}`);
  for (const { file, code } of found) {
    const source = fs.readFileSync(path.join(ROOT, file), 'utf8');
    assert.ok(code.trim().length > 0, `${file}: an empty snippet`);
    assert.ok(source.includes(code.trimEnd()), `${file}: the snippet in docs/verify-embed-tokens.md is not in the file:\n${code}`);
  }
});

it('verify-embed-tokens.md: shows every verifier the interoperability suite runs, whole where it is a whole program', () => {
  const shown = new Set(snippets().map((s) => s.file));
  assert.deepEqual([...shown].sort(), [...TESTED].sort());
  const interop = fs.readFileSync(path.join(ROOT, 'test', 'embed-interop.test.ts'), 'utf8');
  for (const file of ['jose.mjs', 'jsonwebtoken.mjs', 'fast-jwt.mjs', 'pyjwt.py']) assert.ok(interop.includes(file), `the suite runs ${file}`);
  for (const { file, code } of snippets().filter((s) => s.file.endsWith('.mjs') && s.file.includes('verify-embed-token'))) {
    assert.equal(code, fs.readFileSync(path.join(ROOT, file), 'utf8'), `${file} is shown whole`);
  }
});
