// npm's `prepare`: `npm install` and `npm ci` build the service (dist/, the console, the
// reference page's assets) and the client package, so that `npm start` works on a fresh
// checkout. The build needs devDependencies (TypeScript, esbuild, RapiDoc): when they were
// left out (`--omit=dev`, NODE_ENV=production) there is nothing to build with, and failing
// would fail the whole install. The build is then skipped with a notice; a production
// install builds first and prunes afterwards (docs/deployment.md, "Production").
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const omitted = (process.env.npm_config_omit ?? '').split(/[\s,]+/).includes('dev');
let haveTypeScript = true;
try {
  createRequire(import.meta.url).resolve('typescript/package.json');
} catch {
  haveTypeScript = false;
}
if (omitted || !haveTypeScript) {
  console.log(
    'prepare: devDependencies are not installed, so nothing is built; a production install runs `npm ci` and then `npm prune --omit=dev` (docs/deployment.md, "Production")',
  );
  process.exit(0);
}
for (const script of ['build', 'build:client']) {
  const { status, signal } = spawnSync('npm', ['run', script], { stdio: 'inherit' });
  if (status !== 0) {
    console.error(`prepare: npm run ${script} failed (${signal ?? status})`);
    process.exit(status ?? 1);
  }
}
