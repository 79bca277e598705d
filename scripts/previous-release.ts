// The previous release, built from its commit, for what must work across an upgrade: the
// upgrade tests (test/upgrade-*.test.ts) run its server and its `ugs` beside this code, and
// `npm run generate:openapi-release` asks it for its OpenAPI document. release/previous.json
// names it (its version and commit), and nothing else does.
//
// The build is the release's own install: its files as `git archive` gives them (no worktree
// is registered in this repository), `npm ci` with this Node.js (its `prepare` builds dist/),
// in a cache outside the repository, kept between runs: ~/.cache/ugs-releases/<commit>, or
// $UGS_RELEASE_CACHE/<commit>. The first build takes a minute or two, later ones nothing.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const PREVIOUS_RELEASE_FILE = path.join(ROOT, 'release/previous.json');
const BUILT_MARKER = '.ugs-release-built';

export interface Release {
  version: string;
  commit: string;
}

/** The previous release, as release/previous.json names it. */
export function previousRelease(): Release {
  const release = JSON.parse(fs.readFileSync(PREVIOUS_RELEASE_FILE, 'utf8')) as Release;
  if (!/^\d+\.\d+\.\d+$/.test(release.version) || !/^[0-9a-f]{40}$/.test(release.commit))
    throw new Error(`${PREVIOUS_RELEASE_FILE} must hold {"version": "x.y.z", "commit": "<40 hex digits>"}`);
  return release;
}

function cacheRoot(): string {
  return process.env.UGS_RELEASE_CACHE ?? path.join(os.homedir(), '.cache/ugs-releases');
}

/**
 * The directory where `release` is built (its dist/, bin/, node_modules/), building it first
 * when it is not there yet. Fails with one sentence when its commit is not in this clone.
 */
export function buildRelease(release: Release = previousRelease(), log: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): string {
  const dir = path.join(cacheRoot(), release.commit);
  if (fs.existsSync(path.join(dir, BUILT_MARKER))) return dir;
  const known = spawnSync('git', ['cat-file', '-e', `${release.commit}^{commit}`], { cwd: ROOT });
  if (known.status !== 0)
    throw new Error(
      `the previous release ${release.version} (commit ${release.commit}, release/previous.json) is not in this clone: ` +
        'the upgrade tests build it from its commit, so clone with full history (git fetch --unshallow)',
    );
  log(`building release ${release.version} (${release.commit.slice(0, 7)}) in ${dir}: git archive, npm ci`);
  fs.mkdirSync(cacheRoot(), { recursive: true });
  // Built beside its place and renamed into it: an interrupted build never looks finished.
  const scratch = fs.mkdtempSync(path.join(cacheRoot(), `.building-${release.commit.slice(0, 7)}-`));
  try {
    execFileSync('sh', ['-c', `git archive --format=tar "$0" | tar -x -C "$1"`, release.commit, scratch], { cwd: ROOT, stdio: 'inherit' });
    // This Node.js, first on the PATH, for npm and for the native build (its headers).
    const nodeHome = path.dirname(path.dirname(process.execPath));
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? ''}`, npm_config_nodedir: nodeHome };
    delete env.NODE_ENV; // the build needs its devDependencies
    const npm = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: scratch, env, encoding: 'utf8' });
    if (npm.status !== 0) throw new Error(`npm ci of release ${release.version} failed (${npm.status}):\n${npm.stdout}\n${npm.stderr}`);
    if (!fs.existsSync(path.join(scratch, 'dist/server.js'))) throw new Error(`release ${release.version} built no dist/server.js`);
    fs.writeFileSync(path.join(scratch, BUILT_MARKER), `${new Date().toISOString()}\n`);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(scratch, dir);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  log(`built release ${release.version}`);
  return dir;
}

/** Where a release's OpenAPI document is kept: docs/openapi/<version>.json. */
export function keptOpenApiFile(version: string): string {
  return path.join(ROOT, 'docs/openapi', `${version}.json`);
}

/** A document as the repository keeps it: two-space JSON and a final newline (docs/openapi/ is left out of Biome's format). */
export function keptJson(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

/** The OpenAPI document that release's own server serves (GET /openapi.json), from its build on a throwaway SQLite file. */
export async function releaseOpenApiDocument(dir: string): Promise<unknown> {
  const data = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-release-openapi-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: '0',
    HOST: '127.0.0.1',
    UGS_BOOTSTRAP: 'false',
    DATABASE_URL: `sqlite:${path.join(data, 'ugs.sqlite')}`,
  };
  delete env.UGS_SECRET_KEY;
  env.UGS_KEY_FILE = path.join(data, 'secret.key');
  const child = spawn(process.execPath, ['dist/server.js'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let output = '';
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
        if (match) resolve(match[1]);
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.on('exit', (code) => reject(new Error(`the release's server exited (${code}) before listening:\n${output}`)));
    });
    const answer = await fetch(`${url}/openapi.json`);
    if (!answer.ok) throw new Error(`GET /openapi.json answered ${answer.status}`);
    return await answer.json();
  } finally {
    child.kill('SIGKILL');
    fs.rmSync(data, { recursive: true, force: true });
  }
}

// `tsx scripts/previous-release.ts`: builds the previous release (CI's cache warms here) and
// prints its directory. `--openapi` (npm run generate:openapi-previous): writes its OpenAPI
// document to docs/openapi/<version>.json, as its server serves it.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const dir = buildRelease();
  if (process.argv.includes('--openapi')) {
    const release = previousRelease();
    const file = keptOpenApiFile(release.version);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, keptJson(await releaseOpenApiDocument(dir)));
    console.log(`wrote ${path.relative(ROOT, file)}: the OpenAPI document of release ${release.version} (${release.commit.slice(0, 7)})`);
  } else console.log(dir);
}
