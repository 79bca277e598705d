// What the server and the command-line tool both need before they can work: the database
// (migrated) and the keys that open it. Waits a bounded time for a database that is still starting.
import fs from 'node:fs';
import type { Config } from '../config.ts';
import { loadKeyring, type Keyring } from '../crypto/keyring.ts';
import { databaseKeys, introduceFirstKey, KeysDoNotOpenDatabase, noKeyProblem, sealingKeyProblem, storedKeysProblem } from '../crypto/known-keys.ts';
import { storedSealingKeyIds } from '../crypto/stored-keys.ts';
import { openDatabase, type DatabaseHandle, type DatabaseOptions } from '../db/database.ts';
import { isDatabaseUnavailable } from '../db/errors.ts';
import { attachReplica, type ReplicaSettings } from '../db/read-routing.ts';
import { migrateToLatest, type MigrationOptions, type MigrationOutcome } from '../db/migrate.ts';

export async function openMigratedDatabase(
  config: Pick<Config, 'databaseUrl'> & Partial<Pick<Config, 'dbPoolSize' | 'pgbouncerTransactionMode'> & ReplicaSettings>,
  options: DatabaseOptions & {
    waitMs?: number;
    onWait?: (err: unknown) => void;
    migration?: MigrationOptions;
    /** A problem of the replica's reads or write positions (throttle it: an outage repeats it). */
    onReplicaProblem?: (err: unknown, message: string) => void;
  } = {},
): Promise<{ handle: DatabaseHandle; migrations: MigrationOutcome }> {
  const handle = openDatabase(config.databaseUrl, { poolSize: config.dbPoolSize, pgbouncerTransactionMode: config.pgbouncerTransactionMode, ...options });
  const deadline = Date.now() + (options.waitMs ?? 0);
  for (;;) {
    try {
      const migrations = await migrateToLatest(handle, options.migration);
      // Page views may read the replica (docs/api.md, "Reads from replicas"); `ugs` records its writes' positions through it too.
      if (config.readDatabaseUrl) await attachReplica(handle, config as ReplicaSettings, options);
      return { handle, migrations };
    } catch (err) {
      if (!isDatabaseUnavailable(err) || Date.now() > deadline) {
        await handle.close().catch(() => undefined);
        throw err;
      }
      options.onWait?.(err);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

/** The keys a process seals and opens with, and where they came from. */
export interface ProcessKeys {
  keyring: Keyring;
  /** This start made the key file: the first start of a database that knew no key. */
  createdKeyFile: boolean;
  /** Where the keys came from, as the messages say it ("from UGS_SECRET_KEY", "from the key file …"). */
  source: string;
}

export interface KeyOptions {
  /** The server's first start: make the key file when there is none and the database knows no key. */
  createKeyFile?: boolean;
  /** A worker of several: its primary read the key file (or made it), so a missing one is gone. */
  keyFileWasThere?: boolean;
}

/**
 * The configured keys (UGS_SECRET_KEY, else the key file: UGS_KEY_FILE, or for SQLite the file
 * beside the database), checked against the keys the database knows (crypto/known-keys.ts;
 * docs/security.md, "Secret keys"). A database that knows none is introduced to the first key,
 * provided its stored secrets (an earlier version's) are sealed under it. Throws
 * KeysDoNotOpenDatabase, one line naming the key the database expects, when the first key, the
 * one this process would seal under, is not the database's sealing key; a key file made for the
 * occasion is removed again.
 */
export async function openKeys(handle: DatabaseHandle, config: Pick<Config, 'secretKeys' | 'keyFile'>, options: KeyOptions = {}): Promise<ProcessKeys> {
  const now = new Date();
  const known = await databaseKeys(handle.db);
  const stored = known.sealing === null ? await storedSealingKeyIds(handle.db, now) : [];
  const keys = configuredKeys(config, { ...options, createKeyFile: !!options.createKeyFile && known.sealing === null && stored.length === 0 }, () =>
    noKeyProblem(known, stored, noKeyReason(config), firstKeyAdvice(config, options)),
  );
  try {
    let problem: string | null;
    if (known.sealing !== null) problem = sealingKeyProblem(known, keys.keyring, keys.source);
    else {
      // The database's first key: this process's, unless what it stores is sealed under others.
      problem = storedKeysProblem(stored, keys.keyring, keys.source);
      if (problem === null) {
        await introduceFirstKey(handle, keys.keyring.currentKeyId, now);
        // Another process may have introduced its own first key at the same time: that one stands.
        problem = sealingKeyProblem(await databaseKeys(handle.db), keys.keyring, keys.source);
      }
    }
    if (problem !== null) throw new KeysDoNotOpenDatabase(problem);
    return keys;
  } catch (err) {
    if (keys.createdKeyFile) fs.rmSync(config.keyFile, { force: true });
    throw err;
  }
}

/** The configured keys as they are, without the database's say (`ugs keys status`, `introduce`, `reissue`); `missing` says why there are none. */
export function configuredKeys(config: Pick<Config, 'secretKeys' | 'keyFile'>, options: KeyOptions, missing: () => string): ProcessKeys {
  if (config.secretKeys.length > 0) return { ...loadKeyring(config.secretKeys, config.keyFile), source: 'from UGS_SECRET_KEY' };
  const source = `from the key file ${config.keyFile}`;
  if (config.keyFile && options.keyFileWasThere) return { ...loadKeyring([], config.keyFile, { create: false }), source };
  if (config.keyFile && (options.createKeyFile || fs.existsSync(config.keyFile))) return { ...loadKeyring([], config.keyFile), source };
  throw new KeysDoNotOpenDatabase(missing());
}

/** Why no key is configured. */
export function noKeyReason(config: Pick<Config, 'keyFile'>): string {
  return config.keyFile
    ? `UGS_SECRET_KEY is unset, and there is no key file ${config.keyFile}`
    : 'UGS_SECRET_KEY is unset, and on PostgreSQL no key file is read unless UGS_KEY_FILE names one';
}

function firstKeyAdvice(config: Pick<Config, 'keyFile'>, options: KeyOptions): string {
  const make = 'make a key (openssl rand -base64 32), keep it with your backups, and pass it with UGS_SECRET_KEY="<key>" or UGS_KEY_FILE=<a file holding it>';
  return config.keyFile && !options.createKeyFile ? `start the server once (it makes the key file ${config.keyFile}), or ${make}` : make;
}
