// A test reporter beside the usual one (package.json, "test"): at the end of the run, one list
// of everything skipped and why. Node's own summary counts skipped tests only ("skipped 2"),
// not skipped suites nor the parts of tests left out, and each reason was printed once, far up
// in the output, where nobody reads it.
import path from 'node:path';
import { SKIPPED_PART } from './skips.ts';

interface TestEvent {
  type: string;
  data: { name?: string; nesting: number; file?: string; skip?: string | boolean; message?: string };
}

interface Skip {
  where: string;
  why: string;
}

export default async function* skippedReporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const skips: Skip[] = [];
  // The names of the suites and tests now running, by nesting level, to say where a skip is.
  const running: string[] = [];
  const where = (data: TestEvent['data'], name?: string) => {
    const file = data.file ? path.relative(process.cwd(), data.file) : '';
    return [file, ...running.slice(0, data.nesting), ...(name ? [name] : [])].filter(Boolean).join(' › ');
  };
  for await (const { type, data } of source) {
    if (type === 'test:start' && data.name !== undefined) {
      running[data.nesting] = data.name;
      running.length = data.nesting + 1;
    } else if ((type === 'test:pass' || type === 'test:fail') && data.skip !== undefined && data.skip !== false) {
      skips.push({ where: where(data, data.name), why: typeof data.skip === 'string' ? data.skip : 'skipped (no reason given)' });
    } else if (type === 'test:diagnostic' && data.message?.startsWith(SKIPPED_PART)) {
      skips.push({ where: where({ ...data, nesting: data.nesting + 1 }), why: data.message.slice(SKIPPED_PART.length).trim() });
    }
  }
  const lines = skips.map(({ where, why }) => `  - ${where}\n      ${why}`);
  yield `\nSkipped: ${skips.length === 0 ? 'nothing' : `${skips.length} (suites, tests and parts of tests)`}\n${lines.join('\n')}${lines.length ? '\n' : ''}`;
}
