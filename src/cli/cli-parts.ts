// What the command groups of `ugs` share: the database a command works on, the keys that
// open it, the options every group declares alike (--account, --env, --json), how a command
// prints, and the usage error that main.ts turns into exit status 2.
//
// The groups load the modules that do the work (services, the database and its drivers) with
// `await import(…)` inside their actions: building the program for `ugs --help`, or for one
// command, then loads commander and these declarations, not every feature.
import { InvalidArgumentError, Option } from 'commander';
import { loadConfig } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { HeavyOperations } from '../accounts/heavy-operations.ts';
import { ACCOUNT_SLUG } from '../accounts/account-slug.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { parseDuration } from '../foundations/duration.ts';

/** A command called the wrong way, or on something that is not there: exit status 2, like commander's own usage errors. */
export class UsageError extends Error {}

/** Runs `work` on the migrated database of DATABASE_URL, and closes it whatever happens. */
export async function withDatabase<T>(work: (handle: DatabaseHandle) => Promise<T>): Promise<T> {
  const { openMigratedDatabase } = await import('../process/runtime.ts');
  const { handle } = await openMigratedDatabase(loadConfig());
  try {
    return await work(handle);
  } finally {
    await handle.close();
  }
}

/**
 * Runs `work` on the migrated database with the configured keys, once they are the database's
 * (process/runtime.ts, openKeys; docs/security.md, "Secret keys"): with other keys the tool
 * refuses to write, in one line naming the key the database expects, and exits 1. Never makes a
 * key file (only the server's first start does).
 */
export async function withDatabaseKeys<T>(work: (handle: DatabaseHandle, keyring: Keyring) => Promise<T>): Promise<T> {
  const { openKeys } = await import('../process/runtime.ts');
  const { KeysDoNotOpenDatabase } = await import('../crypto/known-keys.ts');
  return withDatabase(async (handle) => {
    let keyring: Keyring;
    try {
      ({ keyring } = await openKeys(handle, loadConfig()));
    } catch (err) {
      throw err instanceof KeysDoNotOpenDatabase ? new Error(`refusing to write: ${err.message}`) : err;
    }
    return work(handle, keyring);
  });
}

/**
 * The account slots of heavy operations (docs/api.md, "Heavy operations") as the command-line
 * tool takes them: under the same limit as the server's, waiting longer for one.
 */
export async function cliHeavyOperations(handle: DatabaseHandle): Promise<HeavyOperations> {
  const { CLI_WAIT_MS, HeavyOperations } = await import('../accounts/heavy-operations.ts');
  return new HeavyOperations(handle, { perAccount: loadConfig().heavyOperationsPerAccount, waitMs: CLI_WAIT_MS });
}

/** Prints the value as one JSON line with --json, else the text. */
export function print(opts: { json?: boolean }, value: unknown, text: string): void {
  process.stdout.write(opts.json ? `${JSON.stringify(value)}\n` : `${text}\n`);
}

export function slug(value: string): string {
  if (!ACCOUNT_SLUG.test(value)) throw new InvalidArgumentError('an account slug is 1-63 characters: a-z, 0-9 and -, starting with a letter or digit');
  return value;
}

/** A whole number written in plain digits: `1e3`, `0x10`, `1.0` or ` 7` are usage errors, never another number. */
export function integerIn(min: number, max: number, what: string): (value: string) => number {
  return (value: string): number => {
    const n = /^[0-9]{1,16}$/.test(value) ? Number(value) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${what} is a whole number from ${min} to ${max}, in plain digits`);
    return n;
  };
}

/** The longest lifetime: beyond it a date is not worth writing (and past year 275760 not even valid). */
const MAX_LIFETIME_MS = 100 * 365 * 86_400_000;

/** A duration such as 30d, in milliseconds. */
export function duration(value: string): number {
  const ms = parseDuration(value);
  if (ms === null) throw new InvalidArgumentError('a duration is a number and a unit: 30s, 15m, 12h, 30d or 1w');
  if (ms > MAX_LIFETIME_MS) throw new InvalidArgumentError('a lifetime is at most 36500d (100 years); leave --expires-in out for a token that does not expire');
  return ms;
}

/** `--account <slug>`, required. */
export function accountOption(description = 'the account'): Option {
  return new Option('--account <slug>', description).argParser(slug).makeOptionMandatory();
}

/** `--env <environment>`: Customer or Testing, or also `any` where a thing may span both. */
export function environmentOption(description: string, choices: { any?: boolean; default?: string } = {}): Option {
  const option = new Option('--env <environment>', description).choices(choices.any ? ['Customer', 'Testing', 'any'] : ['Customer', 'Testing']);
  return choices.default === undefined ? option : option.default(choices.default);
}

/** `--json`. */
export function jsonOption(description = 'print JSON'): Option {
  return new Option('--json', description);
}
