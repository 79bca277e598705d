// The layers of src/ (docs/architecture.md): a module imports only from its own layer or the
// layers below it, and no chain of imports comes back to where it started. Read from the
// source files themselves, so a new import that breaks the shape fails here.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';

const SRC = path.join(ROOT, 'src');

/** Bottom to top. A file's layer is the first entry whose prefix its path (relative to src/) starts with. */
const LAYERS: [layer: string, prefixes: string[]][] = [
  ['foundations', ['foundations/', 'config.ts', 'tracing/']],
  ['database', ['db/']],
  ['keys', ['crypto/']],
  // The outbox (outbox/) is below the audit log, whose every entry appends to it, and below events/, whose sequencer reads it.
  ['records', ['accounts/', 'outbox/', 'audit/', 'metrics/']],
  ['auth', ['auth/']],
  ['http', ['http/']],
  ['idempotency', ['idempotency/']],
  ['pages', ['pages/']],
  ['user groups', ['user-groups/']],
  ['group tags', ['group-tags/']],
  ['embed', ['embed/']],
  ['api tokens', ['api-tokens/']],
  ['events', ['events/']],
  ['webhooks', ['webhooks/']],
  ['composition', ['app.ts', 'server.ts', 'server-process.ts', 'process/', 'cli/']],
];

function layerOf(file: string): number {
  const relative = path.relative(SRC, file).split(path.sep).join('/');
  const index = LAYERS.findIndex(([, prefixes]) => prefixes.some((prefix) => relative.startsWith(prefix)));
  assert.notEqual(index, -1, `src/${relative} belongs to no layer: add it to LAYERS and to docs/architecture.md`);
  return index;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? sourceFiles(full) : entry.name.endsWith('.ts') ? [full] : [];
  });
}

/**
 * The relative imports of a file: type-only ones included (they shape the code as much), and
 * `await import('…')` (a module loaded when a command runs is a dependency all the same).
 */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8');
  const declared = text.matchAll(/^\s*(?:import|export)[^'"]*?from\s+'(\.{1,2}\/[^']+)'/gm);
  const loaded = text.matchAll(/\bimport\(\s*'(\.{1,2}\/[^']+)'\s*\)/g);
  return [...declared, ...loaded].map((m) => path.resolve(path.dirname(file), m[1]));
}

describe('architecture of src/', () => {
  const files = sourceFiles(SRC);
  const graph = new Map(files.map((file) => [file, importsOf(file)]));
  const name = (file: string) => path.relative(ROOT, file);

  it('architecture: every import points to the same layer or one below', () => {
    const upward: string[] = [];
    for (const [file, imports] of graph) {
      for (const imported of imports) {
        assert.ok(fs.existsSync(imported), `${name(file)} imports ${name(imported)}, which does not exist`);
        if (layerOf(imported) > layerOf(file))
          upward.push(`${name(file)} (${LAYERS[layerOf(file)][0]}) -> ${name(imported)} (${LAYERS[layerOf(imported)][0]})`);
      }
    }
    assert.deepEqual(upward, [], 'imports from a layer above');
  });

  it('architecture: the command-line tool calls services, never a repository (src/cli/ imports no *.repository.ts)', () => {
    const offenders = [...graph]
      .filter(([file]) => path.relative(SRC, file).startsWith(`cli${path.sep}`))
      .flatMap(([file, imports]) => imports.filter((imported) => imported.endsWith('.repository.ts')).map((imported) => `${name(file)} -> ${name(imported)}`));
    assert.deepEqual(offenders, []);
  });

  it('architecture: no import cycle', () => {
    const state = new Map<string, 'visiting' | 'done'>();
    const cycles: string[] = [];
    const visit = (file: string, trail: string[]) => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'visiting') {
        cycles.push([...trail.slice(trail.indexOf(file)), file].map(name).join(' -> '));
        return;
      }
      state.set(file, 'visiting');
      for (const imported of graph.get(file) ?? []) visit(imported, [...trail, file]);
      state.set(file, 'done');
    };
    for (const file of files) visit(file, []);
    assert.deepEqual(cycles, []);
  });

  it('architecture: each job folder of user-groups/ (hierarchy/, listing/, transfer/) is one piece: no chain of imports leaves it and comes back', () => {
    const features = path.join(SRC, 'user-groups');
    /** A file of a job folder stands for its folder; any other file for itself. */
    const pieceOf = (file: string) => {
      const [first, ...rest] = path.relative(features, file).split(path.sep);
      return first.startsWith('..') || rest.length === 0 ? file : path.join(features, first);
    };
    const pieces = new Map<string, Set<string>>();
    for (const [file, imports] of graph) {
      const from = pieceOf(file);
      if (!pieces.has(from)) pieces.set(from, new Set());
      for (const imported of imports) if (pieceOf(imported) !== from) pieces.get(from)!.add(pieceOf(imported));
    }
    const reaches = (start: string, goal: string, seen = new Set<string>()): boolean =>
      [...(pieces.get(start) ?? [])].some((next) => next === goal || (!seen.has(next) && (seen.add(next), reaches(next, goal, seen))));
    const folders = [...pieces.keys()].filter((piece) => path.dirname(piece) === features && fs.statSync(piece).isDirectory());
    assert.deepEqual(folders.map(name).sort(), ['src/user-groups/hierarchy', 'src/user-groups/listing', 'src/user-groups/transfer']);
    assert.deepEqual(folders.filter((folder) => reaches(folder, folder)).map(name), []);
  });
});

describe('how src/ loads its dependencies', () => {
  it("architecture: Kysely's values are imported from src/db/kysely.ts only, so a start under ulimit -n 256 does not open its 279 files at once", () => {
    const offenders = sourceFiles(SRC)
      .filter((file) => !file.endsWith(path.join('db', 'kysely.ts')))
      .filter((file) => /^\s*import\s+(?!type\b)[^;]*from\s+'kysely'/m.test(fs.readFileSync(file, 'utf8')))
      .map((file) => path.relative(ROOT, file));
    assert.deepEqual(offenders, [], "import values from src/db/kysely.ts; `import type { … } from 'kysely'` is fine");
  });

  it('architecture: OpenTelemetry is loaded only when tracing is on: types alone are imported, tracing/otel.ts only dynamically', () => {
    const offenders = sourceFiles(SRC).flatMap((file) => {
      const text = fs.readFileSync(file, 'utf8');
      const found: string[] = [];
      if (/^\s*import\s+(?!type\b)[^;]*from\s+'@opentelemetry\//m.test(text)) found.push(`${path.relative(ROOT, file)} imports an OpenTelemetry value`);
      if (/^\s*(?:import|export)\s+(?!type\b)[^;]*from\s+'[./]+(?:tracing\/)?otel\.ts'/m.test(text))
        found.push(`${path.relative(ROOT, file)} imports tracing/otel.ts statically`);
      return found;
    });
    assert.deepEqual(offenders, []);
  });

  it('architecture: `ugs` builds its program from declarations: what it loads before a command runs reaches no service, repository or database module, and no package but commander', () => {
    const loadedAtStart = new Set<string>();
    const packages = new Set<string>();
    const visit = (file: string) => {
      if (loadedAtStart.has(file)) return;
      loadedAtStart.add(file);
      // Static value imports only: `import type` is erased, and an `await import` waits for a command's action.
      for (const [, specifier] of fs.readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)\s+(?!type\b)(?:[^'";]*?from\s+)?'([^']+)'/gm)) {
        if (specifier.startsWith('.')) visit(path.resolve(path.dirname(file), specifier));
        else if (!specifier.startsWith('node:')) packages.add(specifier);
      }
    };
    visit(path.join(SRC, 'cli', 'ugs.ts'));
    const features = [...loadedAtStart]
      .map((file) => path.relative(SRC, file))
      .filter((file) => /\.(?:service|repository)\.ts$|^db\/(?!schema\.ts$)/.test(file));
    assert.deepEqual({ features, packages: [...packages] }, { features: [], packages: ['commander'] });
  });
});

describe('what the tools around src/ may import', () => {
  it('architecture: bench/ and scripts/ import nothing from test/ (what both need lives in scripts/)', () => {
    const offenders = ['bench', 'scripts']
      .flatMap((dir) => sourceFiles(path.join(ROOT, dir)))
      .flatMap((file) =>
        importsOf(file)
          .filter((imported) => imported.startsWith(path.join(ROOT, 'test') + path.sep))
          .map((imported) => `${path.relative(ROOT, file)} -> ${path.relative(ROOT, imported)}`),
      );
    assert.deepEqual(offenders, []);
  });
});
