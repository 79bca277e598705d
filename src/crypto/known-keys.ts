// The secret keys a database knows, and the one it seals under (docs/security.md, "Secret
// keys"). Every value sealed with a secret key begins with the key's id, its fingerprint
// (keyring.ts); the table secret_keys (migration 0018) records the ids the database has been
// introduced to, and the newest of them is its sealing key. A process (the server, a worker,
// `ugs`) writes only when the first of its keys, the one it seals under, is that key: a process
// with other keys (a stray key file, a wrong UGS_SECRET_KEY, a new key never introduced) refuses,
// in one line naming the key the database expects, instead of sealing what the other processes
// cannot open (an outage at their next start). A new key is introduced by `ugs keys introduce`
// only; a database that knows no key yet is introduced to the first key that opens it.
import type { Kysely } from 'kysely';
import type { DatabaseHandle } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import { inTransaction, singleWrite } from '../db/transaction.ts';
import type { Keyring } from './keyring.ts';

export interface DatabaseKeys {
  /** The key every process must seal under; null until the database has been introduced to one. */
  sealing: string | null;
  /** Every key introduced, in the order each became the sealing key. */
  known: string[];
}

/** A process whose keys do not open the database: the line says which key it expects and how to pass it. */
export class KeysDoNotOpenDatabase extends Error {}

/** How to give a process a key, said at the end of every refusal. */
const HOW_TO_PASS = 'pass it with UGS_SECRET_KEY="<key>" or UGS_KEY_FILE=<a file holding it>';

export async function databaseKeys(db: Kysely<Database>): Promise<DatabaseKeys> {
  const rows = await db.selectFrom('secret_keys').select('key_id').orderBy('sealing_order').execute();
  return { sealing: rows.at(-1)?.key_id ?? null, known: rows.map((row) => row.key_id) };
}

/**
 * The first key of a database that knows none. Two processes introducing different keys at once
 * both write sealing_order 1: the unique column keeps one, and the other then finds that one.
 */
export async function introduceFirstKey(handle: DatabaseHandle, keyId: string, now: Date): Promise<void> {
  await singleWrite(handle, () =>
    handle.db
      .insertInto('secret_keys')
      .values({ key_id: keyId, sealing_order: 1, introduced_at: now.toISOString() })
      .onConflict((conflict) => conflict.doNothing())
      .execute(),
  );
}

/** Makes `keyId` the database's sealing key (`ugs keys introduce`, `ugs keys reissue`); the key it sealed under before, if another. */
export async function introduceSealingKey(handle: DatabaseHandle, keyId: string, now: Date): Promise<string | null> {
  return inTransaction(handle, async (trx) => {
    const { sealing } = await databaseKeys(trx);
    if (sealing === keyId) return null;
    const last = await trx
      .selectFrom('secret_keys')
      .select((eb) => eb.fn.max('sealing_order').as('last'))
      .executeTakeFirst();
    const introduced = { sealing_order: Number(last?.last ?? 0) + 1, introduced_at: now.toISOString() };
    await trx
      .insertInto('secret_keys')
      .values({ key_id: keyId, ...introduced })
      .onConflict((conflict) => conflict.column('key_id').doUpdateSet(introduced))
      .execute();
    return sealing;
  });
}

/**
 * Why a process with `keyring` (read `source`, e.g. "from UGS_SECRET_KEY") must not write to a
 * database whose keys are `keys`, in one line; null when it may: its first key is the sealing key.
 */
export function sealingKeyProblem(keys: DatabaseKeys, keyring: Keyring, source: string): string | null {
  const { sealing } = keys;
  const first = keyring.currentKeyId;
  if (sealing === null || first === sealing) return null;
  const configured = `${keyring.keyIds.join(', ')}, ${source}`;
  if (!keyring.keyIds.includes(sealing)) {
    return `this database seals its secrets under key ${sealing}, which the configured keys (${configured}) do not include: ${HOW_TO_PASS} (if that key is lost for good: npx ugs keys reissue ${sealing})`;
  }
  if (keys.known.includes(first)) {
    return `this database seals its secrets under key ${sealing}, and key ${first}, the first of the configured keys (${configured}), is one it sealed under before: put ${sealing} first, the key that seals (UGS_SECRET_KEY="<key ${sealing}>,<key ${first}>")`;
  }
  return `key ${first}, the first of the configured keys (${configured}), would seal, but this database has never been introduced to it (it seals under key ${sealing}): put ${sealing} first, or make ${first} its sealing key with npx ugs keys introduce (docs/security.md, "Secret keys")`;
}

/** Why a database that records no sealing key but holds secrets sealed under `stored` must not be written by `keyring`, or null. */
export function storedKeysProblem(stored: string[], keyring: Keyring, source: string): string | null {
  if (stored.length === 0 || stored.includes(keyring.currentKeyId)) return null;
  return `this database's secrets are sealed under key ${stored.join(' and ')}, and key ${keyring.currentKeyId}, the first of the configured keys (${keyring.keyIds.join(', ')}, ${source}), is none of them: put the key that seals first, or make ${keyring.currentKeyId} its sealing key with npx ugs keys introduce (docs/security.md, "Secret keys")`;
}

/** Why a process without any key must not write: which key the database expects, or that it has none yet. */
export function noKeyProblem(keys: DatabaseKeys, stored: string[], why: string, firstKeyAdvice: string): string {
  const expected = keys.sealing ?? (stored.length > 0 ? stored.join(' and ') : null);
  return expected === null
    ? `no secret key is configured (${why}), and this database has none yet: ${firstKeyAdvice}`
    : `no secret key is configured (${why}); this database seals its secrets under key ${expected}: ${HOW_TO_PASS}`;
}
