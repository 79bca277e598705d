// The tests' own build (`npm test` runs it first, as its pretest): the service compiled into
// .tmp/test-build/, a tree shaped like the checkout (dist/, bin/, console/dist/, static/docs/,
// package.json), which every server and `ugs` a test starts runs from (test/helpers/processes.ts).
// So `npm test` never rebuilds the dist/ that a running `npm start` or `npx ugs` uses: a test run
// that did once left a CLI run beside it crashing on a missing export. Packages are found in the
// checkout's node_modules, above the tree. Plain Node: it runs before anything is compiled.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// UGS_TEST_BUILD names another folder of .tmp/ (test/helpers/processes.ts, testBuildName): two runs side by side.
const buildName = process.env.UGS_TEST_BUILD || 'test-build';
if (!/^test-build[a-z0-9-]*$/.test(buildName)) {
  console.error(`build-for-tests: UGS_TEST_BUILD is a folder name of .tmp/ that starts with test-build, not ${JSON.stringify(buildName)}`);
  process.exit(2);
}
const TEST_BUILD = path.join(ROOT, '.tmp', buildName);

function run(command, args) {
  const { status, signal } = spawnSync(command, args, { cwd: ROOT, stdio: 'inherit' });
  if (status !== 0) {
    console.error(`build-for-tests: ${path.basename(command)} ${args.join(' ')} failed (${signal ?? status})`);
    process.exit(status ?? 1);
  }
}

fs.rmSync(TEST_BUILD, { recursive: true, force: true });
fs.mkdirSync(TEST_BUILD, { recursive: true });
run(path.join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json', '--outDir', path.join(TEST_BUILD, 'dist')]);
run(process.execPath, ['scripts/build-console.mjs', TEST_BUILD]);
// The pages' own files (static/: the front page, the reference page), then RapiDoc's bundle,
// which the build copies into static/docs/vendor/.
fs.cpSync(path.join(ROOT, 'static'), path.join(TEST_BUILD, 'static'), {
  recursive: true,
  filter: (source) => source !== path.join(ROOT, 'static', 'docs', 'vendor'),
});
run(process.execPath, ['scripts/build-docs-assets.mjs', TEST_BUILD]);
fs.cpSync(path.join(ROOT, 'bin'), path.join(TEST_BUILD, 'bin'), { recursive: true });
// What the compiled code and npm read of the manifest (the version, engines, the commands), and
// no dependency: `npx ugs` in this tree links it as it is, and installs nothing.
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const { name, version, license, type, engines, bin } = manifest;
const scripts = { start: manifest.scripts.start, ugs: manifest.scripts.ugs };
fs.writeFileSync(path.join(TEST_BUILD, 'package.json'), `${JSON.stringify({ name, version, license, private: true, type, engines, bin, scripts }, null, 2)}\n`);
console.log(`build-for-tests: built into ${path.relative(ROOT, TEST_BUILD)}/`);
