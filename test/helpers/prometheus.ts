// A small reader of the Prometheus text format, enough to assert on series and values.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = LINE.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, raw] of (match[2] ?? '').matchAll(LABEL)) {
      labels[key] = raw.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

export class Scrape {
  readonly samples: Sample[];
  constructor(readonly text: string) {
    this.samples = parsePrometheus(text);
  }

  /** The value of the one series with exactly these labels; 0 when it does not exist (yet). */
  value(name: string, labels: Record<string, string> = {}): number {
    const wanted = Object.entries(labels);
    const found = this.samples.filter((s) => s.name === name && Object.keys(s.labels).length === wanted.length && wanted.every(([k, v]) => s.labels[k] === v));
    if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} series`);
    return found[0]?.value ?? 0;
  }

  has(name: string): boolean {
    return this.samples.some((s) => s.name === name);
  }

  series(name: string): Sample[] {
    return this.samples.filter((s) => s.name === name);
  }
}
