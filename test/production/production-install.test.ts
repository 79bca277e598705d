// The production install, as docs/deployment.md ("Production") tells it: a scratch clone of this
// repository's HEAD, its commands run as written, then the tree they leave is
// counted and the server started from it must serve the API, /docs (with its script) and
// /console. Slow (a whole `npm ci`), so it is not part of `npm test`: `npm run
// test:production` runs it, and CI (.ci/run) does. It tests what is committed, not the
// work tree.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, httpRequest } from '../helpers/processes.ts';
import { productionInstallCommands } from '../helpers/production-install.ts';
import { PRODUCTION_MAX_PACKAGES as MAX_PACKAGES } from '../helpers/budgets.ts';
/** Build tools, development servers and what RapiDoc and Spectral bring: none may be in production. */
const FORBIDDEN = [
  /^@scarf\/scarf$/,
  /tree-sitter/,
  /^core-js-pure$/,
  /^typescript$/,
  /^@typescript\//,
  /^tsx$/,
  /^esbuild$/,
  /^@esbuild\//,
  /^rapidoc$/,
  /spectral/,
];

interface InstalledPackage {
  name: string;
  version: string;
  dir: string;
}

/** Every package directory under node_modules, nested ones too (symlinked workspaces once). */
function installedPackages(root: string): InstalledPackage[] {
  const found: InstalledPackage[] = [];
  const visit = (modules: string) => {
    if (!fs.existsSync(modules)) return;
    for (const entry of fs.readdirSync(modules)) {
      if (entry.startsWith('.')) continue;
      const dirs = entry.startsWith('@')
        ? fs.readdirSync(path.join(modules, entry)).map((name) => path.join(modules, entry, name))
        : [path.join(modules, entry)];
      for (const dir of dirs) {
        const manifest = path.join(dir, 'package.json');
        if (!fs.existsSync(manifest)) continue;
        const { name, version } = JSON.parse(fs.readFileSync(manifest, 'utf8'));
        found.push({ name, version, dir });
        if (!fs.lstatSync(dir).isSymbolicLink()) visit(path.join(dir, 'node_modules'));
      }
    }
  };
  visit(path.join(root, 'node_modules'));
  return found;
}

function diskUsageMiB(dir: string): number {
  return Number(execFileSync('du', ['-sm', dir], { encoding: 'utf8' }).split('\t')[0]);
}

function sh(command: string, cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', command], { cwd, env: { ...process.env, CI: 'true' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c) => (output += c));
    child.stderr.on('data', (c) => (output += c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('production install from a fresh clone', () => {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-production-'));
  after(() => fs.rmSync(scratch, { recursive: true, force: true }));

  it('production: the commands of docs/deployment.md leave at most 150 packages, no build tool, and a server that serves the API, /docs and /console', async () => {
    const clone = path.join(scratch, 'ugs');
    execFileSync('git', ['clone', '--quiet', '--no-hardlinks', ROOT, clone]);
    for (const command of productionInstallCommands()) {
      const { code, output } = await sh(command, clone);
      assert.equal(code, 0, `${command} failed:\n${output.slice(-4000)}`);
    }

    const packages = installedPackages(clone);
    const forbidden = packages.filter(({ name }) => FORBIDDEN.some((pattern) => pattern.test(name)));
    const sizeMiB = diskUsageMiB(path.join(clone, 'node_modules'));
    console.log(`production tree: ${packages.length} packages, ${sizeMiB} MiB in node_modules`);
    assert.deepEqual(
      forbidden.map(({ name, version }) => `${name}@${version}`),
      [],
      'no build tool or RapiDoc/Spectral dependency in production',
    );
    assert.ok(packages.length <= MAX_PACKAGES, `${packages.length} packages: ${packages.map(({ name }) => name).join(' ')}`);

    const data = path.join(scratch, 'data');
    const server = spawn(process.execPath, ['dist/server.js'], {
      cwd: clone,
      env: {
        ...process.env,
        NODE_ENV: 'production',
        PORT: '0',
        HOST: '127.0.0.1',
        DATABASE_URL: `sqlite:${data}/ugs.sqlite`,
        UGS_KEY_FILE: `${data}/secret.key`,
        UGS_SECRET_KEY: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const exited = new Promise<number | null>((resolve) => server.on('exit', (code) => resolve(code)));
    try {
      const { baseUrl, token } = await new Promise<{ baseUrl: string; token: string }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the server did not start in 30 s:\n${output}`)), 30_000);
        const onData = (chunk: Buffer) => {
          output += chunk;
          const url = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1];
          const bootstrapToken = /^\s+(ugs_api_\S+)$/m.exec(output)?.[1];
          if (url && bootstrapToken) {
            clearTimeout(timer);
            resolve({ baseUrl: url, token: bootstrapToken });
          }
        };
        server.stdout.on('data', onData);
        server.stderr.on('data', onData);
        server.on('exit', (code) => reject(new Error(`the server exited (${code}):\n${output}`)));
      });

      const created = await httpRequest(baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'production-1' } });
      assert.equal(created.status, 201, created.text);
      assert.equal((await httpRequest(baseUrl, 'GET', '/api/user?user_group_id=production-1', { token })).body.new_user_group, false);
      assert.equal((await httpRequest(baseUrl, 'GET', '/readyz')).status, 200);

      const docs = await fetch(`${baseUrl}/docs`);
      const page = await docs.text();
      assert.equal(docs.status, 200);
      for (const [, src] of page.matchAll(/<script[^>]* src="([^"]+)"/g)) {
        const script = await fetch(new URL(src, baseUrl));
        assert.equal(script.status, 200, src);
        assert.match(script.headers.get('content-type') ?? '', /javascript/);
        assert.ok((await script.arrayBuffer()).byteLength > 0, src);
      }
      const rapidoc = await fetch(`${baseUrl}/docs/assets/rapidoc-min.js`);
      assert.equal(rapidoc.status, 200);
      assert.match((await rapidoc.text()).slice(0, 200), /RapiDoc .*rapidoc-min\.js\.LICENSE\.txt/);
      for (const license of ['rapidoc-min.js.LICENSE.txt', 'rapidoc-LICENSE.txt'])
        assert.equal((await fetch(`${baseUrl}/docs/assets/${license}`)).status, 200, license);

      const consolePage = await fetch(`${baseUrl}/console`);
      assert.equal(consolePage.status, 200);
      const consoleHtml = await consolePage.text();
      assert.match(consoleHtml, /\/console\/assets\/console\.js/);
      assert.equal((await fetch(`${baseUrl}/console/assets/console.js`)).status, 200);
    } finally {
      if (server.exitCode === null) server.kill('SIGTERM');
      assert.equal(await exited, 0, output.slice(-2000));
    }
  });
});
