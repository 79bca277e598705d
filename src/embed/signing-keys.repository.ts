// The rows of embed_signing_keys (migration 0004). The table holds a handful of rows: a key
// signs until the next one activates, and is dropped once every token it signed has expired.
import { sql } from '../db/kysely.ts';
import type { Kysely } from 'kysely';
import { dialectOf } from '../db/database.ts';
import type { Database, EmbedSigningKeyRow } from '../db/schema.ts';

/** Keys that sign now or later, or signed a token that may still be valid; newest activation first. */
export function publishedSigningKeys(db: Kysely<Database>, now: string): Promise<EmbedSigningKeyRow[]> {
  return db
    .selectFrom('embed_signing_keys')
    .selectAll()
    .where((eb) => eb.or([eb('retired_at', 'is', null), eb('retired_at', '>', now), eb('signed_until', '>', now)]))
    .orderBy('activates_at', 'desc')
    .orderBy('kid')
    .execute();
}

/** Every key, including those past publication (for the command-line tool). */
export function allSigningKeys(db: Kysely<Database>): Promise<EmbedSigningKeyRow[]> {
  return db.selectFrom('embed_signing_keys').selectAll().orderBy('activates_at', 'desc').orderBy('kid').execute();
}

/**
 * Serializes the writers of the key table (a first key, a rotation), so that two instances
 * starting on an empty database create one key, not two. SQLite's BEGIN IMMEDIATE already
 * does; PostgreSQL needs a table lock that conflicts with itself.
 */
export async function lockSigningKeys(trx: Kysely<Database>): Promise<void> {
  if (dialectOf(trx) === 'postgres') await sql`lock table embed_signing_keys in share row exclusive mode`.execute(trx);
}

export async function countSigningKeys(trx: Kysely<Database>): Promise<number> {
  const row = await trx
    .selectFrom('embed_signing_keys')
    .select((eb) => eb.fn.countAll<number | string>().as('keys'))
    .executeTakeFirstOrThrow();
  return Number(row.keys);
}

export async function insertSigningKey(trx: Kysely<Database>, row: EmbedSigningKeyRow): Promise<void> {
  await trx.insertInto('embed_signing_keys').values(row).execute();
}

/** The newest key stops signing at `at`, when the key about to be inserted takes over. */
export async function retireNewestKey(trx: Kysely<Database>, at: string): Promise<string[]> {
  const rows = await trx.updateTable('embed_signing_keys').set({ retired_at: at }).where('retired_at', 'is', null).returning('kid').execute();
  return rows.map((row) => row.kid);
}

/**
 * Keeps a key published at least until `until`, before it signs a token expiring then. False
 * when the key is gone (dropped by a rotation while this instance still held it).
 */
export async function extendSignedUntil(db: Kysely<Database>, kid: string, until: string): Promise<boolean> {
  const result = await db
    .updateTable('embed_signing_keys')
    .set((eb) => ({ signed_until: eb.case().when('signed_until', '<', until).then(until).else(eb.ref('signed_until')).end() }))
    .where('kid', '=', kid)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Drops keys that no longer sign and whose every token has expired. */
export async function dropExpiredSigningKeys(trx: Kysely<Database>, now: string): Promise<string[]> {
  const rows = await trx.deleteFrom('embed_signing_keys').where('retired_at', '<=', now).where('signed_until', '<=', now).returning('kid').execute();
  return rows.map((r) => r.kid);
}

/** Re-seals a private key if it is still the ciphertext that was read (as reencrypt.ts does for tokens). */
export async function swapSealedPrivateKey(db: Kysely<Database>, kid: string, previous: string, resealed: string): Promise<boolean> {
  const result = await db
    .updateTable('embed_signing_keys')
    .set({ private_key_sealed: resealed })
    .where('kid', '=', kid)
    .where('private_key_sealed', '=', previous)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** The id of the secret key that sealed a signing key's private half (its first 8 characters). */
const privateKeySealingKeyId = sql<string>`substr(private_key_sealed, 1, 8)`;

/** Signing keys that sign now or later, sealed under `keyId`. */
export function signingKeysSealedUnder(db: Kysely<Database>, keyId: string, now: string): Promise<EmbedSigningKeyRow[]> {
  return db
    .selectFrom('embed_signing_keys')
    .selectAll()
    .where(privateKeySealingKeyId, '=', keyId)
    .where((eb) => eb.or([eb('retired_at', 'is', null), eb('retired_at', '>', now)]))
    .execute();
}

export async function retireSigningKeys(trx: Kysely<Database>, kids: string[], at: string): Promise<void> {
  if (kids.length > 0) await trx.updateTable('embed_signing_keys').set({ retired_at: at }).where('kid', 'in', kids).execute();
}
