// The README runs: every `sh` block of README.md, in order, against a fresh server started as
// the README starts it, with its first-start token, after the banner's own "Try it" command
// (a newcomer runs that first, so it must not change what the README's answers show). Under a command, a comment `# <status>
// <answer>` is what it must answer, where … stands for anything; every other command must
// succeed. An `export NAME=<prefix>…` takes the latest value that starts with that prefix:
// from the answers so far, or, for the API token, from the first-start banner.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, spawnServer, type ServerProcess } from './helpers/processes.ts';

interface Step {
  command: string;
  /** The status and the answer's pattern, when the README shows them. */
  expect?: { status: number; answer: string };
}

/** The commands of the README's `sh` blocks, in order, each with what it must answer. */
function readmeSteps(): Step[] {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const steps: Step[] = [];
  for (const [, block] of readme.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    const lines = block.replace(/\\\n\s*/g, '').split('\n');
    for (const line of lines) {
      const expectation = /^# (\d{3}) (.*)$/.exec(line);
      if (expectation) {
        assert.ok(steps.length > 0, `an answer before any command: ${line}`);
        steps[steps.length - 1].expect = { status: Number(expectation[1]), answer: expectation[2] };
      } else if (line.trim() && !line.startsWith('#')) {
        steps.push({ command: line.replace(/\s+#[^'"]*$/, '').trim() });
      }
    }
  }
  return steps;
}

/** The answer pattern as a regular expression: the text as written, … for anything. */
function answerPattern(answer: string): RegExp {
  return new RegExp(
    `^${answer
      .split('…')
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[\\s\\S]*?')}$`,
  );
}

/** Runs one command in bash; curl also prints the status on a last line. */
function run(command: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = `curl() { command curl -sS -w '\\n%{http_code}' "$@"; }\n${command}`;
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { cwd: ROOT, env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The newest string value, in the answers so far (newest first), that starts with `prefix`. */
function latestValue(answers: string[], prefix: string): string | undefined {
  const quoted = new RegExp(`"(${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[^"]*)"`, 'g');
  for (const answer of [...answers].reverse()) {
    const values = [...answer.matchAll(quoted)].map((m) => m[1]);
    if (values.length > 0) return values.at(-1);
  }
  return undefined;
}

describe('README', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-readme-'));
  let server: ServerProcess;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: `sqlite:${path.join(dir, 'data', 'ugs.sqlite')}`,
    UGS_KEY_FILE: path.join(dir, 'data', 'secret.key'),
    UGS_SECRET_KEY: '',
  };

  before(async () => {
    server = await spawnServer({ DATABASE_URL: env.DATABASE_URL!, UGS_KEY_FILE: env.UGS_KEY_FILE!, UGS_SECRET_KEY: '', UGS_BOOTSTRAP: 'true' });
    await server.waitForOutput(/"msg":"started"/);
    env.UGS = server.baseUrl;
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("README: after the first-start banner's own example, every sh example runs as written, in order, and answers what the README says", {
    timeout: 120_000,
  }, async () => {
    // A newcomer tries the banner's example first: it must leave nothing the README's answers would show.
    const banner = /^ Try it\b.*\n\s+(curl .*)$/m.exec(server.output());
    assert.ok(banner, `the banner has a "Try it" command:\n${server.output()}`);
    const tried = await run(banner[1], env);
    assert.equal(tried.code, 0, tried.stderr);
    assert.match(tried.stdout, /\n200$/, `the banner's example works as printed:\n${tried.stdout}`);

    const steps = readmeSteps();
    assert.ok(steps.filter((s) => s.expect).length >= 12, `found ${steps.length} commands`);
    const answers: string[] = [];
    for (const { command, expect } of steps) {
      const exported = /^export (\w+)=(\S*)$/.exec(command);
      if (exported) {
        const [, name, value] = exported;
        if (name === 'UGS') continue; // the test's server listens elsewhere
        if (!value.endsWith('…')) {
          env[name] = value;
          continue;
        }
        const prefix = value.slice(0, -1);
        const found = name === 'TOKEN' ? /ugs_api_\w+/.exec(server.output())?.[0] : latestValue(answers, prefix);
        assert.ok(found?.startsWith(prefix), `no value for ${name} (${prefix}…) in the answers so far`);
        env[name] = found;
        continue;
      }
      const result = await run(command, env);
      assert.equal(result.code, 0, `${command}\n${result.stdout}\n${result.stderr}`);
      if (!command.startsWith('curl ')) continue;
      const output = result.stdout.trimEnd();
      const status = Number(output.slice(output.lastIndexOf('\n') + 1));
      const answer = output.slice(0, output.lastIndexOf('\n'));
      answers.push(answer);
      if (!expect) continue;
      assert.equal(status, expect.status, `${command}\n${answer}`);
      assert.match(answer, answerPattern(expect.answer), command);
    }
  });
});
