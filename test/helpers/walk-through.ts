// The manual's examples as steps a test runs (test/readme.test.ts runs them against the server,
// test/prism.test.ts through Stoplight Prism's validation proxy in front of it). Under a command,
// a comment `# <status> <answer>` is what it must answer, where … stands for anything; every
// other command must succeed. An `export NAME=<prefix>…` takes the latest value that starts with
// that prefix: from the answers so far, or, for the API token, the newest one printed (by `ugs
// token create`, else the first-start banner). A block that cannot run as written says why just
// above it (`<!-- not run: … -->`).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, UGS_ENTRY, runCommand, type CommandResult } from './processes.ts';

export interface Step {
  command: string;
  /** The status and the answer's pattern, when the page shows them. */
  expect?: { status: number; answer: string };
}

/** The `sh` blocks of a Markdown file, each with the reason it is not run, if it says one. */
export function shBlocks(file: string): { block: string; notRun?: string }[] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  return [...text.matchAll(/^(?:<!-- not run: (.*?) -->\n)?```sh\n([\s\S]*?)^```$/gm)].map(([, notRun, block]) => ({ block, notRun }));
}

/** The commands of a page's `sh` blocks that run, in order, each with what it must answer. */
export function walkThroughSteps(file: string): Step[] {
  const steps: Step[] = [];
  for (const { block, notRun } of shBlocks(file)) {
    if (notRun !== undefined) {
      assert.ok(notRun.trim().length > 10, `${file}: a block not run says why`);
      continue;
    }
    const lines = block.replace(/\\\n\s*/g, '').split('\n');
    for (const line of lines) {
      const expectation = /^# (\d{3}) (.*)$/.exec(line);
      if (expectation) {
        assert.ok(steps.length > 0, `${file}: an answer before any command: ${line}`);
        steps[steps.length - 1].expect = { status: Number(expectation[1]), answer: expectation[2] };
      } else if (line.trim() && !line.startsWith('#')) {
        steps.push({ command: line.replace(/\s+#[^'"]*$/, '').trim() });
      }
    }
  }
  return steps;
}

/** The answer pattern as a regular expression: the text as written, … for anything. */
export function answerPattern(answer: string): RegExp {
  return new RegExp(
    `^${answer
      .split('…')
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[\\s\\S]*?')}$`,
  );
}

/**
 * Runs one command in bash, in `cwd` (a scratch checkout); curl also prints, on last lines, the
 * response headers named in `headers` (one a line, empty when absent) and the status, and `npx
 * ugs` is the tests' own build of the tool.
 */
export function runStep(command: string, env: NodeJS.ProcessEnv, cwd: string, headers: string[] = []): Promise<CommandResult> {
  const write = [...headers.map((name) => `%header{${name}}`), '%{http_code}'].join('\\n');
  const script = [
    `curl() { command curl -sS -w '\\n${write}' "$@"; }`,
    `npx() { if [ "$1" = ugs ]; then shift; node ${JSON.stringify(UGS_ENTRY)} "$@"; else command npx "$@"; fi; }`,
    command,
  ].join('\n');
  return runCommand('bash', ['-c', script], { cwd, env });
}

/** The newest string value, in the answers so far (newest first), that starts with `prefix`. */
export function latestValue(answers: string[], prefix: string): string | undefined {
  const quoted = new RegExp(`"(${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[^"]*)"`, 'g');
  for (const answer of [...answers].reverse()) {
    const values = [...answer.matchAll(quoted)].map((m) => m[1]);
    if (values.length > 0) return values.at(-1);
  }
  return undefined;
}

/** One curl command's answer: its status, body and the headers asked for. */
export interface CurlAnswer {
  command: string;
  status: number;
  answer: string;
  headers: Record<string, string>;
  expect?: Step['expect'];
}

/**
 * The walk-through of pages on one server: `env` holds UGS (where the calls go) and the values
 * the pages export; `printed` starts with the server's first-start banner. Each curl answer is
 * checked against what the page says, after `onAnswer` saw it (with the headers it asked for).
 */
export class WalkThrough {
  /** The answers of the curl commands so far, oldest first. */
  readonly answers: string[] = [];
  constructor(
    readonly env: NodeJS.ProcessEnv,
    readonly cwd: string,
    /** What every command printed so far, and first the banner: where an API token is shown. */
    readonly printed: string[],
    readonly options: {
      headers?: string[];
      /** What a command's environment has instead of `env`'s (where its calls go, say). */
      envFor?: (command: string) => NodeJS.ProcessEnv | undefined;
      onAnswer?: (answer: CurlAnswer) => void | Promise<void>;
    } = {},
  ) {}

  /** Runs a page's steps in order, on the server and with the values the pages before it left. */
  async walk(file: string): Promise<void> {
    const headers = this.options.headers ?? [];
    for (const { command, expect } of walkThroughSteps(file)) {
      const exported = /^export (\w+)=(\S*)$/.exec(command);
      if (exported) {
        const [, name, value] = exported;
        if (name === 'UGS') continue; // the test's server listens elsewhere
        if (!value.endsWith('…')) {
          this.env[name] = value;
          continue;
        }
        const prefix = value.slice(0, -1);
        const found =
          name === 'TOKEN'
            ? this.printed
                .join('\n')
                .match(/ugs_api_\w+/g)
                ?.at(-1)
            : latestValue(this.answers, prefix);
        assert.ok(found?.startsWith(prefix), `${file}: no value for ${name} (${prefix}…) in the answers so far`);
        this.env[name] = found;
        continue;
      }
      const result = await runStep(command, { ...this.env, ...this.options.envFor?.(command) }, this.cwd, headers);
      assert.equal(result.code, 0, `${file}: ${command}\n${result.stdout}\n${result.stderr}`);
      this.printed.push(result.stdout);
      if (!command.startsWith('curl ')) continue;
      const lines = result.stdout.trimEnd().split('\n');
      const status = Number(lines.pop());
      const received = Object.fromEntries(headers.map((name, i) => [name, lines[lines.length - headers.length + i]]));
      lines.splice(lines.length - headers.length, headers.length);
      const answer = lines.join('\n');
      this.answers.push(answer);
      await this.options.onAnswer?.({ command, status, answer, headers: received, expect });
      if (!expect) continue;
      assert.equal(status, expect.status, `${file}: ${command}\n${answer}`);
      assert.match(answer, answerPattern(expect.answer), `${file}: ${command}`);
    }
  }
}
