// `ugs` run in this process, through the command-line tool's own entry (runCli of
// src/cli/main.ts), for a test about what a command does: the same arguments, environment,
// output and exit status as the real binary, without a Node process's start for each command
// (most of the CLI suites' time, and more on a loaded machine). A test about the binary itself
// (its start, signals, a terminal, a pipe closed early, `npx ugs`) runs it with runUgs of
// processes.ts instead.
import { AsyncLocalStorage } from 'node:async_hooks';
import { runCli } from '../../src/cli/main.ts';
import type { CommandResult } from './processes.ts';

interface Output {
  stdout: string;
  stderr: string;
}

/** The output of the command running in this async context; outside one, writes go where they always go. */
const running = new AsyncLocalStorage<Output>();
let captured = false;

function captureOutput(): void {
  if (captured) return;
  captured = true;
  for (const name of ['stdout', 'stderr'] as const) {
    const stream = process[name];
    const write = stream.write;
    stream.write = function (this: NodeJS.WriteStream, chunk: string | Uint8Array, ...rest: unknown[]): boolean {
      const output = running.getStore();
      if (output === undefined) return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
      output[name] += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
      const callback = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined;
      if (callback) process.nextTick(callback);
      return true;
    } as typeof stream.write;
  }
}

// process.env is the process's: one command at a time.
let turn: Promise<unknown> = Promise.resolve();

/** Runs `ugs <args>` here with `env` added to this process's environment (as runUgs adds it to the child's). */
export function runUgsHere(args: string[], env: Record<string, string>): Promise<CommandResult> {
  const result = turn.then(() => runOnce(args, env));
  turn = result.catch(() => undefined);
  return result;
}

async function runOnce(args: string[], env: Record<string, string>): Promise<CommandResult> {
  captureOutput();
  const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
  Object.assign(process.env, env);
  const output: Output = { stdout: '', stderr: '' };
  try {
    const code = await running.run(output, () => runCli(args));
    return { code, ...output };
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}
