// docs/verify-embed-tokens.md shows the code test/embed-interop.test.ts and test/cube.test.ts
// run: each block under a `<!-- snippet: <file> -->` marker must appear verbatim in that file,
// every verifier file the suites run must be shown, and Cube's settings are the harness's. A doc that drifts from the tested code
// fails here, not in a customer's data API.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';
import { cubeJwtSettings } from './helpers/cube.ts';

const DOC = path.join(ROOT, 'docs', 'verify-embed-tokens.md');
const TESTED = [
  'examples/verify-embed-token/jose.mjs',
  'examples/verify-embed-token/jsonwebtoken.mjs',
  'examples/verify-embed-token/fast-jwt.mjs',
  'examples/verify-embed-token/pyjwt.py',
  'examples/verify-embed-token/go/main.go',
  'examples/postgres-rls/server.mjs',
  // test/cube.test.ts runs Cube with these (test/helpers/cube.ts copies them into its project).
  'examples/cube/cube.js',
  'examples/cube/model/orders.js',
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
  for (const { file, code } of snippets().filter(
    (s) => (s.file.endsWith('.mjs') && s.file.includes('verify-embed-token')) || s.file.startsWith('examples/cube/'),
  )) {
    assert.equal(code, fs.readFileSync(path.join(ROOT, file), 'utf8'), `${file} is shown whole`);
  }
  const cubeSuite = fs.readFileSync(path.join(ROOT, 'test', 'helpers', 'cube.ts'), 'utf8');
  for (const file of ['cube.js', 'model']) assert.ok(cubeSuite.includes(`'${file}'`), `the Cube harness runs examples/cube/${file}`);
});

it("verify-embed-tokens.md: Cube's settings are the ones test/cube.test.ts starts Cube with, and the guide says not to write a checkAuth", () => {
  const doc = fs.readFileSync(DOC, 'utf8');
  const block = /^<!-- cube settings: test\/helpers\/cube\.ts -->\n```sh\n([\s\S]*?)^```$/m.exec(doc);
  assert.ok(block, 'the Cube section shows its settings under <!-- cube settings: test/helpers/cube.ts -->');
  const shown = Object.fromEntries(
    block[1]
      .trim()
      .split('\n')
      .map((line) => line.split(/=(.*)/s).slice(0, 2)),
  );
  const issuer = 'https://ugs.example.com';
  assert.deepEqual(shown, cubeJwtSettings({ jwksUrl: `${issuer}/.well-known/jwks.json`, issuer, audience: 'ugs:embed' }));
  const section = doc.slice(doc.indexOf('## Cube (tested)'), doc.indexOf('\n## ', doc.indexOf('## Cube (tested)') + 1));
  assert.match(section, /\*\*Do not write a `checkAuth`\.\*\*/);
  assert.doesNotMatch(fs.readFileSync(path.join(ROOT, 'examples', 'cube', 'cube.js'), 'utf8'), /^\s*checkAuth/m, 'the tested cube.js has no checkAuth');
  // Every tool's section says whether it was tested.
  for (const [, heading] of doc.matchAll(/^##+ (.*)$/gm)) {
    if (/^(Cube|PostgREST|Hasura|Grafana)/.test(heading)) assert.match(heading, /\((tested|not tested)\)$/, heading);
  }
});
