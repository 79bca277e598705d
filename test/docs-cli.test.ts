// docs/cli.md is the manual of `ugs`: every command the program has (src/cli/main.ts builds
// it) is named there as `ugs <command>`, so a command added without its documentation, or a
// command documented after it was removed, fails here.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { buildCli } from '../src/cli/main.ts';
import { ROOT } from './helpers/processes.ts';

/** Every command that runs something, as typed after `ugs` (`keys embed rotate`). */
function commandsOf(command: Command, prefix = ''): string[] {
  return command.commands.flatMap((sub) => {
    const name = `${prefix}${sub.name()}`;
    return sub.commands.length > 0 ? commandsOf(sub, `${name} `) : [name];
  });
}

it('docs/cli.md: names every command of ugs, and no command ugs does not have', () => {
  const manual = fs.readFileSync(path.join(ROOT, 'docs/cli.md'), 'utf8');
  const commands = commandsOf(buildCli());
  assert.ok(commands.length >= 25, commands.join(', '));
  assert.deepEqual(
    commands.filter((command) => !manual.includes(`ugs ${command}`)),
    [],
    'docs/cli.md names each as `ugs <command>`',
  );
  // Every `ugs <word>` of the manual is one of the program's command groups or commands.
  const groups = new Set(commands.map((command) => command.split(' ')[0]));
  const named = new Set([...manual.matchAll(/\bugs ([a-z][a-z-]*)\b/g)].map((m) => m[1]));
  assert.deepEqual([...named].filter((word) => !groups.has(word)).sort(), []);
});
