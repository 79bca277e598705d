// What a start checks and says once, before anything is served: done by the server process
// itself, or, with several workers, by the primary before it starts them (cluster/primary.ts).
import fs from 'node:fs';
import type { Config } from '../config.ts';
import { ConfigError, publicUrlWarning } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import { keyFileExposure, type Keyring } from '../crypto/keyring.ts';
import { missingKeysMessage, missingSealingKeys } from '../crypto/stored-keys.ts';

/** A start that must not go on; its message says why and what to do. */
export class StartRefused extends Error {}

/**
 * Keys that cannot open the stored tokens would answer every existing group with a 500:
 * better not to start at all, and say which keys are missing. Leaves things as they were
 * (closes the database, removes a key file this start created).
 */
export async function refuseMissingKeys(
  handle: DatabaseHandle,
  keyring: Keyring,
  config: Pick<Config, 'secretKeys' | 'keyFile'>,
  createdKeyFile: boolean,
): Promise<void> {
  const missing = await missingSealingKeys(handle.db, keyring, new Date());
  if (missing.length === 0) return;
  if (createdKeyFile) fs.rmSync(config.keyFile);
  await handle.close();
  const source =
    config.secretKeys.length > 0
      ? 'from UGS_SECRET_KEY'
      : `from the key file ${config.keyFile}${createdKeyFile ? ', which did not exist: this database was first used with another key' : ''}`;
  throw new StartRefused(missingKeysMessage(missing, keyring, source));
}

/** The warnings a start logs once (the fields of the line, and its message). */
export function startWarnings(config: Config, createdKeyFile: boolean): [fields: object, message: string][] {
  const warnings: [object, string][] = [];
  if (createdKeyFile)
    warnings.push([{ keyFile: config.keyFile }, 'created a new secret key file (mode 0600); back it up: without it stored user group tokens cannot be read']);
  const unreachable = publicUrlWarning(config);
  if (unreachable) warnings.push([{ iss: config.publicUrl }, unreachable]);
  const exposure = config.secretKeys.length === 0 ? keyFileExposure(config.keyFile) : null;
  if (exposure) warnings.push([{}, `the key file ${config.keyFile} can be read by other users (mode ${exposure}): chmod 600 it`]);
  return warnings;
}

/** Says why a start failed, in one line a person reads, and exits 1. */
export function exitOnStartFailure(err: unknown): never {
  if (err instanceof ConfigError) {
    console.error(`configuration error: ${err.message}`);
  } else if (err instanceof StartRefused) {
    console.error(err.message);
  } else {
    console.error('failed to start:', err instanceof Error ? err.message : err);
  }
  process.exit(1);
}
