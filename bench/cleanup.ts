// What a benchmark run must undo however it ends (its processes, its database, its files), in
// reverse order of creation, once, whoever asks first: the end of the run, a failure, or
// Ctrl-C / SIGTERM. And the commit the results are of.
import { execFileSync } from 'node:child_process';

const steps: (() => Promise<void>)[] = [];
let cleaning: Promise<void> | undefined;
let interrupted = false;

/** A step to undo at the end. */
export function onCleanUp(step: () => Promise<void>): void {
  steps.push(step);
}

/** Runs every step, newest first (a failed step is reported, the others still run). */
export function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    while (steps.length > 0) {
      const step = steps.pop()!;
      await step().catch((err) => console.error('cleanup failed:', (err as Error).message));
    }
  })();
  return cleaning;
}

/** Whether Ctrl-C or SIGTERM ended the run (it exits 130 once cleaned up). */
export function wasInterrupted(): boolean {
  return interrupted;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\n${signal}: stopping processes and dropping the benchmark database…`);
    void cleanUp().then(() => process.exit(130));
  });
}

/** The commit measured, with "+uncommitted changes" when src/ or the dependencies differ from it. */
export function gitDescription(repoRoot: string): string {
  try {
    const git = (args: string[]) => execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const commit = git(['rev-parse', '--short', 'HEAD']);
    const dirty = git(['status', '--porcelain', '--', 'src', 'package.json', 'package-lock.json']);
    return dirty ? `${commit}+uncommitted changes` : commit;
  } catch {
    return 'unknown';
  }
}
