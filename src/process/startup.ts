// What a start checks and says once, before anything is served: done by the server process
// itself, or, with several workers, by the primary before it starts them (cluster/primary.ts).
import fs from 'node:fs';
import type { Config } from '../config.ts';
import { ConfigError, publicUrlWarning } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import { commitSettings, durabilityOf } from '../db/replication.ts';
import { keyFileExposure } from '../crypto/keyring.ts';
import { KeysDoNotOpenDatabase } from '../crypto/known-keys.ts';
import { missingKeysMessage, missingSealingKeys } from '../crypto/stored-keys.ts';
import { openKeys, type KeyOptions, type ProcessKeys } from './runtime.ts';

/** A start that must not go on; its message says why and what to do. */
export class StartRefused extends Error {}

/**
 * The keys of a start, or a refusal that leaves things as they were (closes the database,
 * removes a key file this start made). Keys that are not the database's (openKeys) would seal
 * what other processes cannot open: refused in one line. Keys that cannot open every stored
 * secret would answer those groups with 500s: refused with the list of what each missing key
 * sealed and the ways out.
 */
export async function keysForStart(handle: DatabaseHandle, config: Pick<Config, 'secretKeys' | 'keyFile'>, options: KeyOptions): Promise<ProcessKeys> {
  let keys: ProcessKeys | undefined;
  try {
    keys = await openKeys(handle, config, options);
    const missing = await missingSealingKeys(handle.db, keys.keyring, new Date());
    if (missing.length > 0) throw new StartRefused(missingKeysMessage(missing, keys.keyring, keys.source));
    return keys;
  } catch (err) {
    if (keys?.createdKeyFile) fs.rmSync(config.keyFile, { force: true });
    await handle.close().catch(() => undefined);
    throw err instanceof KeysDoNotOpenDatabase ? new StartRefused(`refusing to start: ${err.message}`) : err;
  }
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
  if (config.readDatabaseUrl && !config.redisUrl)
    warnings.push([
      {},
      'UGS_DATABASE_READ_URL is set without REDIS_URL: no read can be proved fresh on the replica, so every read stays on the primary (docs/api.md, "Reads from replicas")',
    ]);
  return warnings;
}

/**
 * PostgreSQL: the one line a start says about what an acknowledged write survives (whether the
 * primary commits synchronously to a standby: db/replication.ts), or null (SQLite, or the
 * settings could not be read: the start goes on).
 */
export async function durabilityLine(handle: DatabaseHandle): Promise<{ level: 'info' | 'warn'; fields: object; message: string } | null> {
  if (handle.dialect !== 'postgres') return null;
  try {
    const settings = await commitSettings(handle.db);
    const { synchronous, level, message } = durabilityOf(settings);
    return {
      level,
      fields: { synchronous, synchronous_commit: settings.synchronousCommit, synchronous_standby_names: settings.synchronousStandbyNames },
      message,
    };
  } catch {
    return null;
  }
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
