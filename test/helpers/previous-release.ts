// The previous release (release/previous.json), built from its commit once and cached
// (scripts/previous-release.ts), run beside this code by the upgrade suites.
import { buildRelease, previousRelease } from '../../scripts/previous-release.ts';
import { runUgs, spawnServer, type CommandResult, type ServerProcess } from './processes.ts';

export const PREVIOUS = previousRelease();

let built: string | undefined;

/** The previous release's directory (its dist/, bin/ and node_modules/), built on first use. */
export function previousReleaseDir(): string {
  built ??= buildRelease(PREVIOUS, (line) => process.stderr.write(`previous release: ${line}\n`));
  return built;
}

/** A server of the previous release, as spawnServer starts this code's. */
export function spawnPreviousServer(env: Record<string, string>): Promise<ServerProcess> {
  return spawnServer(env, { root: previousReleaseDir() });
}

/** The previous release's `ugs`. */
export function runPreviousUgs(args: string[], env: Record<string, string>): Promise<CommandResult> {
  return runUgs(args, env, { root: previousReleaseDir() });
}
