// .env.example lists every variable the service reads, with its true default and what it
// means, and the README's configuration table names each one: a variable added to
// src/config.ts without both fails here.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { ROOT } from './helpers/processes.ts';

interface Entry {
  name: string;
  value: string;
  meaning: string;
}

/** The `# NAME=value` lines of .env.example, each with the comment lines just above it. */
function envExample(): Entry[] {
  const entries: Entry[] = [];
  let meaning: string[] = [];
  for (const line of fs.readFileSync(path.join(ROOT, '.env.example'), 'utf8').split('\n')) {
    const assignment = /^# ([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
    if (assignment) {
      entries.push({ name: assignment[1], value: assignment[2], meaning: meaning.join(' ') });
      meaning = [];
    } else if (line.startsWith('# ') && !line.startsWith('# ---')) {
      meaning.push(line.slice(2));
    } else {
      meaning = [];
    }
  }
  return entries;
}

/** The variables src/config.ts reads: `env.NAME`, `env['NAME']` and `(env, 'NAME', …)`. */
function variablesReadByConfig(): string[] {
  const source = fs.readFileSync(path.join(ROOT, 'src/config.ts'), 'utf8');
  const names = new Set<string>();
  for (const match of source.matchAll(/\benv(?:\.([A-Z][A-Z0-9_]*)|\[['"]([A-Z][A-Z0-9_]*)['"]\]|, '([A-Z][A-Z0-9_]*)')/g))
    names.add(match[1] ?? match[2] ?? match[3]);
  return [...names].sort();
}

describe('.env.example', () => {
  it('.env.example: lists exactly the variables src/config.ts reads, each once, each with its meaning', () => {
    const entries = envExample();
    const names = entries.map(({ name }) => name);
    assert.deepEqual([...names].sort(), variablesReadByConfig());
    assert.equal(new Set(names).size, names.length, 'each variable once');
    for (const { name, meaning } of entries) assert.ok(meaning.length > 10, `${name} says what it means`);
  });

  it('.env.example: every value shown is the default (the file as shown configures what an empty environment does)', () => {
    const asShown = Object.fromEntries(envExample().map(({ name, value }) => [name, value]));
    assert.deepEqual(loadConfig(asShown), loadConfig({}));
    // And each value is one the configuration accepts on its own (no silent fallback hides a typo).
    for (const [name, value] of Object.entries(asShown)) assert.doesNotThrow(() => loadConfig({ [name]: value }), name);
  });

  it('.env.example: the README configuration table names every variable', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const table = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 5));
    const missing = envExample().filter(({ name }) => !table.includes(`\`${name}\``));
    assert.deepEqual(
      missing.map(({ name }) => name),
      [],
    );
  });
});
