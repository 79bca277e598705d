// Copies RapiDoc's prebuilt bundle, with its licenses, into static/docs/vendor/, which
// src/pages/docs.routes.ts serves at /docs/assets/. Run by `npm run build`. RapiDoc is a
// devDependency: the server needs this one file of it, not the 120 packages it depends on
// (which include install-time telemetry and native tree-sitter modules), so a production
// install (docs/deployment.md, "Production") never holds them. An argument names another tree to copy
// into (<tree>/static/docs/vendor/): the tests' own build, scripts/build-for-tests.mjs.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OUT = `${process.argv[2] ? `${path.resolve(process.argv[2])}/` : ROOT}static/docs/vendor/`;
const require = createRequire(import.meta.url);
const packageDir = path.dirname(require.resolve('rapidoc/package.json'));
const { version, license } = JSON.parse(fs.readFileSync(`${packageDir}/package.json`, 'utf8'));

fs.rmSync(OUT, { recursive: true, force: true });
fs.mkdirSync(OUT, { recursive: true });
const copies = {
  'rapidoc-min.js': 'dist/rapidoc-min.js',
  'rapidoc-min.js.gz': 'dist/rapidoc-min.js.gz',
  // The bundle's header points here: the licenses of what it bundles.
  'rapidoc-min.js.LICENSE.txt': 'dist/rapidoc-min.js.LICENSE.txt',
  // RapiDoc's own (MIT).
  'rapidoc-LICENSE.txt': 'LICENSE.txt',
};
for (const [to, from] of Object.entries(copies)) fs.copyFileSync(path.join(packageDir, from), `${OUT}${to}`);
console.log(`docs: RapiDoc ${version} (${license}) copied to static/docs/vendor/`);
