// A real Cube server (the semantic layer customers put behind embedded dashboards), as
// examples/cube runs it: Cube pinned by examples/cube/package-lock.json, installed with
// `npm ci --ignore-scripts` into a cache outside the clone, started with the settings of
// docs/verify-embed-tokens.md, "Cube (tested)" (CUBEJS_JWK_URL, CUBEJS_JWT_ISSUER, CUBEJS_JWT_AUDIENCE,
// CUBEJS_JWT_ALGS, and examples/cube/cube.js's queryRewrite) against a scratch PostgreSQL
// database that holds examples/cube/schema.sql's rows.
//
// Which Cube: 0.32.7, the newest of the npm registry that starts from the registry alone.
// Cube 0.35 and 1.x install with --ignore-scripts too, but their API gateway loads
// @cubejs-backend/native (a Rust binary that their install script downloads from GitHub) at
// start, and fails without it ("Unable to load @cubejs-backend/native"). Cube's gateway code
// for JWT checks (jsonwebtoken over keys that jwk-to-pem converts) is the same in 0.32 and 1.7.
// The cache drivers need Cube Store, a binary download too: CUBEJS_CACHE_AND_QUEUE_DRIVER=memory.
//
// Which Node: the one that runs the tests (process.execPath: Node 24 in CI, .ci/run). Cube
// 0.32.7 declares `node >=17`; it starts and answers on Node 20.20 (Debian 12's), 22.23 and 24.22.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { POSTGRES_URL, createTestDatabase, type TestDatabase } from './backends.ts';
import { ROOT, freePort, reapOnExit, runCommand } from './processes.ts';
import { GENEROUS_WAIT_MS, eventually } from './wait.ts';

/** The Cube project the tests run: the same files docs/verify-embed-tokens.md shows. */
export const CUBE_EXAMPLE = path.join(ROOT, 'examples', 'cube');

/** The Cube release examples/cube/package.json pins. */
export const CUBE_VERSION: string = JSON.parse(fs.readFileSync(path.join(CUBE_EXAMPLE, 'package.json'), 'utf8')).dependencies['@cubejs-backend/server'];

/** How long Cube may take to start and answer /readyz on a loaded machine (it compiles the model, connects to PostgreSQL). */
const CUBE_START_MS = 180_000;

export interface CubeInstall {
  /** The directory whose node_modules holds Cube. */
  dir: string;
  /** Seconds `npm ci` took, or null when the cache already held this lock's install. */
  installSeconds: number | null;
}

let installing: Promise<CubeInstall> | undefined;

/**
 * Cube, installed once per version of examples/cube/package-lock.json into
 * `~/.cache/ugs-cube/<hash of the lock>` (UGS_CUBE_CACHE moves it), never into the clone.
 * Rejects, saying why, when it cannot be installed (no registry).
 */
export function installCube(): Promise<CubeInstall> {
  installing ??= (async () => {
    const lock = fs.readFileSync(path.join(CUBE_EXAMPLE, 'package-lock.json'));
    const manifest = fs.readFileSync(path.join(CUBE_EXAMPLE, 'package.json'));
    const hash = crypto.createHash('sha256').update(manifest).update(lock).digest('hex').slice(0, 16);
    const cache = process.env.UGS_CUBE_CACHE || path.join(os.homedir(), '.cache', 'ugs-cube');
    const dir = path.join(cache, `${CUBE_VERSION}-${hash}`);
    if (fs.existsSync(path.join(dir, 'node_modules', '@cubejs-backend', 'server', 'package.json'))) return { dir, installSeconds: null };
    fs.mkdirSync(cache, { recursive: true });
    // Installed beside, then renamed: a run cut short, or another run installing at once, never leaves half an install in place.
    const partial = fs.mkdtempSync(path.join(cache, `${CUBE_VERSION}-${hash}.partial-`));
    try {
      fs.writeFileSync(path.join(partial, 'package.json'), manifest);
      fs.writeFileSync(path.join(partial, 'package-lock.json'), lock);
      const started = Date.now();
      // The npm beside this Node; --ignore-scripts: Cube's install scripts download binaries (Cube Store, the native module) it does not need here.
      const npm = path.join(path.dirname(process.execPath), 'npm');
      const installed = await runCommand(fs.existsSync(npm) ? npm : 'npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
        cwd: partial,
        env: { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH}`, npm_config_update_notifier: 'false' },
      });
      if (installed.code !== 0) throw new Error(`npm ci of Cube ${CUBE_VERSION} failed (${installed.code}):\n${installed.stderr.slice(-2000)}`);
      const installSeconds = (Date.now() - started) / 1000;
      try {
        fs.renameSync(partial, dir);
      } catch (err) {
        // Another run renamed its install first: use that one.
        if (!fs.existsSync(dir)) throw err;
        fs.rmSync(partial, { recursive: true, force: true });
      }
      return { dir, installSeconds };
    } catch (err) {
      fs.rmSync(partial, { recursive: true, force: true });
      throw err;
    }
  })();
  return installing;
}

/** Why Cube cannot run here (no PostgreSQL, no registry), or false; installs it when it can. */
export async function cubeUnavailable(): Promise<string | false> {
  if (!POSTGRES_URL) return 'TEST_POSTGRES_URL is not set: Cube reads its rows from PostgreSQL';
  try {
    await installCube();
    return false;
  } catch (err) {
    return `Cube ${CUBE_VERSION} could not be installed from the npm registry: ${(err as Error).message.split('\n')[0]}`;
  }
}

export interface CubeQuery {
  measures?: string[];
  dimensions?: string[];
  filters?: unknown[];
  order?: Record<string, 'asc' | 'desc'>;
}

export interface CubeServer {
  /** Cube's address: its REST API is `${url}/cubejs-api/v1/…`. */
  url: string;
  /** Everything Cube printed so far. */
  output(): string;
  /** `GET /cubejs-api/v1/load` with `Authorization: <token>`, as Cube's clients send it. */
  load(token: string, query: CubeQuery): Promise<{ status: number; body: CubeLoadAnswer }>;
  /** Ends Cube and drops its database. */
  stop(): Promise<void>;
}

export interface CubeLoadAnswer {
  data?: Record<string, string | number | null>[];
  error?: string;
  [field: string]: unknown;
}

export interface CubeOptions {
  /** CUBEJS_JWK_URL: the service's key set. */
  jwksUrl: string;
  /** CUBEJS_JWT_ISSUER: the service's UGS_PUBLIC_URL. */
  issuer: string;
  /** CUBEJS_JWT_AUDIENCE: the embed_id the dashboards' tokens are bound to, or ugs:embed. */
  audience: string;
  /**
   * The source of a `checkAuth(req, auth)` added to examples/cube/cube.js's configuration:
   * what docs/verify-embed-tokens.md says never to write, to show what it does.
   */
  checkAuth?: string;
}

/**
 * Cube's settings for embed tokens, exactly as docs/verify-embed-tokens.md, "Cube (tested)"
 * gives them (test/verify-embed-tokens-doc.test.ts holds the doc to this function).
 */
export function cubeJwtSettings({ jwksUrl, issuer, audience }: CubeOptions): Record<string, string> {
  return { CUBEJS_JWK_URL: jwksUrl, CUBEJS_JWT_ISSUER: issuer, CUBEJS_JWT_AUDIENCE: audience, CUBEJS_JWT_ALGS: 'ES256,RS256' };
}

/**
 * Starts Cube on a port the OS gives, against a new PostgreSQL database with
 * examples/cube/schema.sql's rows, and resolves once /readyz says it is ready.
 */
export async function startCube(options: CubeOptions): Promise<CubeServer> {
  const { dir } = await installCube();
  const database = await createTestDatabase('postgres');
  let child: ChildProcess | undefined;
  let output = '';
  // The project Cube runs: examples/cube's own files (cube.js, model/), copied so that Cube writes nothing into the clone.
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-cube-project-'));
  const stop = async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGTERM');
      const killed = setTimeout(() => child!.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killed);
    }
    fs.rmSync(project, { recursive: true, force: true });
    await database.drop();
  };
  try {
    await seed(database);
    if (options.checkAuth === undefined) fs.cpSync(path.join(CUBE_EXAMPLE, 'cube.js'), path.join(project, 'cube.js'));
    else {
      fs.cpSync(path.join(CUBE_EXAMPLE, 'cube.js'), path.join(project, 'tested-cube.js'));
      fs.writeFileSync(path.join(project, 'cube.js'), `module.exports = { ...require('./tested-cube.js'), checkAuth: ${options.checkAuth} };\n`);
    }
    fs.cpSync(path.join(CUBE_EXAMPLE, 'model'), path.join(project, 'model'), { recursive: true });
    const db = new URL(database.url);
    const port = await freePort();
    child = reapOnExit(
      spawn(process.execPath, [path.join(dir, 'node_modules', '@cubejs-backend', 'server', 'bin', 'server')], {
        cwd: project,
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          NODE_ENV: 'production',
          PORT: String(port),
          CUBEJS_DEV_MODE: 'false',
          CUBEJS_TELEMETRY: 'false',
          CUBEJS_LOG_LEVEL: 'info',
          CUBEJS_SCHEMA_PATH: 'model',
          // No Cube Store here (a binary download): Cube's in-memory cache and queue.
          CUBEJS_CACHE_AND_QUEUE_DRIVER: 'memory',
          // Signs nothing the tests send: with CUBEJS_JWK_URL, tokens are verified against the key set only.
          CUBEJS_API_SECRET: crypto.randomBytes(32).toString('hex'),
          CUBEJS_DB_TYPE: 'postgres',
          CUBEJS_DB_HOST: db.hostname,
          CUBEJS_DB_PORT: db.port || '5432',
          CUBEJS_DB_NAME: db.pathname.slice(1),
          CUBEJS_DB_USER: decodeURIComponent(db.username),
          CUBEJS_DB_PASS: decodeURIComponent(db.password),
          ...cubeJwtSettings(options),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    const url = `http://127.0.0.1:${port}`;
    const running = child;
    await eventually(
      () => `Cube ${CUBE_VERSION} answering /readyz at ${url} (its output: ${output.slice(-3000)})`,
      async () => {
        if (running.exitCode !== null || running.signalCode !== null)
          throw new Error(`Cube exited (${running.exitCode ?? running.signalCode}) before it was ready:\n${output}`);
        const res = await fetch(`${url}/readyz`).catch(() => undefined);
        return res?.status === 200;
      },
      { timeoutMs: CUBE_START_MS, everyMs: 250 },
    );
    return {
      url,
      output: () => output,
      async load(token, query) {
        const res = await fetch(`${url}/cubejs-api/v1/load?query=${encodeURIComponent(JSON.stringify(query))}`, {
          headers: { authorization: token },
          signal: AbortSignal.timeout(GENEROUS_WAIT_MS * 2),
        });
        const text = await res.text();
        let body: CubeLoadAnswer;
        try {
          body = JSON.parse(text) as CubeLoadAnswer;
        } catch {
          body = { error: text };
        }
        return { status: res.status, body };
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** examples/cube/schema.sql into the new database. */
async function seed(database: TestDatabase): Promise<void> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    await client.query(fs.readFileSync(path.join(CUBE_EXAMPLE, 'schema.sql'), 'utf8'));
  } finally {
    await client.end();
  }
}
