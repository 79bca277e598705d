// A newcomer on a machine whose Node.js is older than `engines` (Node 20 is still many machines'
// default): npm refuses to install with its own error, and `npm start`, the server and `ugs` say in
// one line which Node.js they need and which they found, before the native SQLite module loads
// (on Node 20 it crashed with "Segmentation fault" and left an empty database file), also on a
// fresh clone, where the refused `npm install` built no dist/. Run with the machine's own older
// Node, as a real process.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, SERVER_ENTRY, TEST_BUILD, UGS_ENTRY, requireTestBuild, runCommand } from './helpers/processes.ts';

/** The machine's own Node.js, where Debian (or NodeSource) installs it. */
const OLD_NODE = '/usr/bin/node';
const { engines } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
const minimumMajor = Number(/^>=(\d+)/.exec(engines.node)?.[1]);
const oldVersion = fs.existsSync(OLD_NODE) ? execFileSync(OLD_NODE, ['--version'], { encoding: 'utf8' }).trim() : '';
const skip = !oldVersion
  ? `no ${OLD_NODE} on this machine`
  : Number(oldVersion.slice(1).split('.')[0]) >= minimumMajor
    ? `${OLD_NODE} is ${oldVersion}, not older than ${engines.node}`
    : false;

/** Runs a command with the old Node first on PATH (so npm, and what npm starts, run on it). */
function runOnOldNode(command: string, args: string[], options: { cwd?: string; env?: Record<string, string> } = {}) {
  return runCommand(command, args, {
    cwd: options.cwd ?? ROOT,
    env: { ...process.env, PATH: `${path.dirname(OLD_NODE)}:${process.env.PATH}`, npm_config_nodedir: '', ...options.env },
  });
}

describe('an unsupported Node.js', { skip }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-old-node-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const data = path.join(dir, 'data');
  const env = { DATABASE_URL: `sqlite:${data}/ugs.sqlite`, UGS_KEY_FILE: `${data}/secret.key`, UGS_SECRET_KEY: '', PORT: '0', HOST: '127.0.0.1' };
  const NEEDED = new RegExp(`needs Node\\.js ${engines.node.replace(/[.]/g, '\\.')}; this is Node\\.js ${oldVersion.replace(/[.]/g, '\\.')} \\(${OLD_NODE}\\)`);

  /** One line on stderr naming the versions, nothing on stdout, status 1, and no data directory or database file left. */
  const assertRefusedInOneLine = (run: { code: number | null; stdout: string; stderr: string }) => {
    assert.equal(run.code, 1, run.stderr);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, NEEDED);
    assert.equal(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
    assert.equal(fs.existsSync(data), false, 'no data directory, no empty database file');
  };

  /** npm's own lines around a script's output (`> user-group-service@… start`), which are not the script's. */
  const withoutNpmBanner = (stderr: string) => stderr.replace(/^> .*\n|^\n/gm, '');

  /** `npm start` ended with that one line, status 1, no crash, no stack and no database file. */
  const assertNpmStartRefused = (run: { code: number | null; stdout: string; stderr: string }) => {
    assert.equal(run.code, 1, run.stderr);
    assert.equal(run.stderr.match(new RegExp(NEEDED, 'g'))?.length, 1, run.stderr);
    assert.doesNotMatch(run.stderr, /Segmentation fault|core dumped|MODULE_NOT_FOUND|\n\s+at /);
    assert.equal(fs.existsSync(data), false, 'no data directory, no empty database file');
  };

  before(() => requireTestBuild());

  it(`node version: the server on ${oldVersion} prints one line naming the Node.js needed and the one found, exits 1, and leaves no database file`, async () => {
    assertRefusedInOneLine(await runOnOldNode(OLD_NODE, [SERVER_ENTRY], { env }));
  });

  it(`node version: ugs on ${oldVersion} prints the same one line and exits 1`, async () => {
    assertRefusedInOneLine(await runOnOldNode(OLD_NODE, [UGS_ENTRY, 'token', 'list', '--account', 'default'], { env }));
  });

  it(`node version: npm start on ${oldVersion} ends with that line and status 1, no crash, no database file`, async () => {
    assertNpmStartRefused(await runOnOldNode('npm', ['start'], { cwd: TEST_BUILD, env }));
  });

  it(`node version: on a fresh clone, whose npm install ${oldVersion} refused (no dist/), npm start and ugs print that one line, no stack`, async () => {
    // What a clone holds before any build: the manifest and bin/, no dist/ and no node_modules.
    const clone = path.join(dir, 'clone');
    fs.mkdirSync(clone);
    fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(clone, 'package.json'));
    fs.cpSync(path.join(ROOT, 'bin'), path.join(clone, 'bin'), { recursive: true });
    const started = await runOnOldNode('npm', ['start'], { cwd: clone, env });
    assertNpmStartRefused(started);
    assert.equal(withoutNpmBanner(started.stderr).trimEnd().split('\n').length, 1, started.stderr);
    assertRefusedInOneLine(await runOnOldNode(OLD_NODE, ['bin/ugs.js', 'token', 'list', '--account', 'default'], { cwd: clone, env }));
  });

  it(`node version: npm install on ${oldVersion} fails with npm's engine error (engine-strict) and installs nothing`, async () => {
    // The project's install files, in a scratch directory: the work tree's node_modules is not touched.
    const project = path.join(dir, 'project');
    const workspaces = ['packages', 'tools'].flatMap((dir) => fs.readdirSync(path.join(ROOT, dir)).map((name) => `${dir}/${name}/package.json`));
    for (const file of ['package.json', 'package-lock.json', '.npmrc', ...workspaces]) {
      fs.mkdirSync(path.dirname(path.join(project, file)), { recursive: true });
      fs.copyFileSync(path.join(ROOT, file), path.join(project, file));
    }
    const run = await runOnOldNode('npm', ['install', '--no-audit', '--no-fund'], { cwd: project });
    assert.notEqual(run.code, 0, 'npm install refused');
    assert.match(run.stderr, /EBADENGINE/);
    assert.match(run.stderr, /Not compatible with your version of node\/npm: user-group-service@/);
    assert.ok(run.stderr.includes(`Required: {"node":"${engines.node}"}`), run.stderr);
    assert.equal(fs.existsSync(path.join(project, 'node_modules')), false, 'nothing installed');
  });
});
