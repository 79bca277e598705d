// Builds the console (console/src, Preact) into console/dist: one ES module and one style
// sheet, served by the service at /console (src/pages/console.routes.ts). Run by `npm run
// build`, so `npm install` builds it. Plain Node: it runs before anything is compiled.
// An argument names another tree to build into (<tree>/console/dist/): the tests' own build,
// scripts/build-for-tests.mjs.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OUT = `${process.argv[2] ? `${path.resolve(process.argv[2])}/` : ROOT}console/dist/`;

fs.rmSync(OUT, { recursive: true, force: true });
fs.mkdirSync(`${OUT}assets`, { recursive: true });
await esbuild.build({
  absWorkingDir: ROOT,
  entryPoints: ['console/src/main.tsx'],
  outfile: `${OUT}assets/console.js`,
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  logLevel: 'warning',
});
fs.copyFileSync(`${ROOT}console/index.html`, `${OUT}index.html`);
fs.copyFileSync(`${ROOT}console/console.css`, `${OUT}assets/console.css`);

const script = fs.readFileSync(`${OUT}assets/console.js`);
console.log(`console: ${(script.length / 1024).toFixed(1)} KiB of JavaScript, ${(zlib.gzipSync(script).length / 1024).toFixed(1)} KiB gzipped`);
