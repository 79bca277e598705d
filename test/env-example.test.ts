// .env.example lists every variable the service reads, with its true default and what it
// means, and the tables of docs/configuration.md name each one, with the same default: a
// variable added to src/config.ts without both fails here, and so does a row for a variable
// the service no longer reads.
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

/** The rows of docs/configuration.md's tables: the variables each names, and its default cell. */
function configurationRows(): { names: string[]; defaults: string }[] {
  const text = fs.readFileSync(path.join(ROOT, 'docs/configuration.md'), 'utf8');
  return text
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const [, variables, defaults] = line.split(/(?<!\\)\|/).map((cell) => cell.trim());
      return { names: [...variables.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1]), defaults };
    });
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

  it('docs/configuration.md: its tables name exactly the variables src/config.ts reads, each once', () => {
    const names = configurationRows().flatMap((row) => row.names);
    assert.deepEqual([...names].sort(), variablesReadByConfig());
    assert.equal(new Set(names).size, names.length, 'each variable in one row');
  });

  it(".env.example: a default docs/configuration.md shows as values, one a variable, is .env.example's", () => {
    const shown = Object.fromEntries(envExample().map(({ name, value }) => [name, value]));
    const compared: string[] = [];
    for (const { names, defaults } of configurationRows()) {
      // `3000`, `127.0.0.1` for PORT, HOST; a default told in words, as (key file), is not compared.
      if (!/^`[^`]*`(?:, `[^`]*`)*$/.test(defaults)) continue;
      const values = [...defaults.matchAll(/`([^`]*)`/g)].map((m) => m[1]);
      if (values.length !== names.length) continue;
      names.forEach((name, i) => {
        if (!shown[name]) return;
        assert.equal(values[i], shown[name], `${name}: docs/configuration.md shows ${values[i]}, .env.example ${shown[name]}`);
        compared.push(name);
      });
    }
    assert.ok(compared.length >= 30, `compared ${compared.length} defaults`);
  });
});
