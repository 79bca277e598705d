// A test reporter beside the usual ones (test/run-tests.ts): at the end of the run, the
// wall time of the run and the ten slowest files, each with its own time (from its process's
// start to its end) and its number of tests. The figures of CONTRIBUTING.md, "Test tiers",
// come from these lines. With UGS_TEST_TIMES=<file>, every file's time is also written there
// as JSON, slowest first.
import fs from 'node:fs';
import path from 'node:path';

interface TestEvent {
  type: string;
  data: { name?: string; nesting: number; file?: string; details?: { duration_ms?: number; type?: string } };
}

interface FileTime {
  file: string;
  seconds: number;
  tests: number;
}

const SHOWN = 10;

export default async function* timingReporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const started = Date.now();
  const files = new Map<string, FileTime>();
  const entry = (file: string) => {
    const name = path.relative(process.cwd(), file);
    let time = files.get(name);
    if (time === undefined) files.set(name, (time = { file: name, seconds: 0, tests: 0 }));
    return time;
  };
  // Files run in the runner's own process (no 'test:complete' of their own): their top-level tests' times added up.
  const ownTimes = new Map<string, number>();
  for await (const { type, data } of source) {
    if (data?.file === undefined) continue;
    // A file run in a process of its own ends with one 'test:complete' named after the file.
    if (type === 'test:complete' && data.nesting === 0 && data.name !== undefined && path.resolve(data.name) === data.file) {
      entry(data.file).seconds = (data.details?.duration_ms ?? 0) / 1000;
      ownTimes.delete(data.file);
    } else if (type === 'test:pass' || type === 'test:fail') {
      if (data.details?.type !== 'suite') entry(data.file).tests++;
      if (data.nesting === 0 && data.file.endsWith('.test.ts') && entry(data.file).seconds === 0)
        ownTimes.set(data.file, (ownTimes.get(data.file) ?? 0) + (data.details?.duration_ms ?? 0));
    }
  }
  for (const [file, ms] of ownTimes) if (entry(file).seconds === 0) entry(file).seconds = ms / 1000;
  const slowest = [...files.values()].sort((a, b) => b.seconds - a.seconds);
  if (process.env.UGS_TEST_TIMES) fs.writeFileSync(process.env.UGS_TEST_TIMES, `${JSON.stringify(slowest, null, 1)}\n`);
  const lines = slowest.slice(0, SHOWN).map(({ file, seconds, tests }) => `  ${seconds.toFixed(1).padStart(7)} s  ${String(tests).padStart(4)} tests  ${file}`);
  yield `\nWall time: ${((Date.now() - started) / 1000).toFixed(1)} s for ${files.size} files; the slowest:\n${lines.join('\n')}\n`;
}
