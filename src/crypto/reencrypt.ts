// Key rotation without downtime, step two: after every instance runs with the new key first
// in UGS_SECRET_KEY ("new,old"), re-seal the stored user group tokens under the new key, so
// that the old key can be removed. Each row is replaced only if its ciphertext is still the
// one that was read (compare-and-swap): a token rotated meanwhile is never overwritten with
// its predecessor, and two re-encryptions running at once do each row once.
import { sql } from '../db/kysely.ts';
import type { Kysely } from 'kysely';
import type { DatabaseHandle } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import { inTransaction, singleWrite } from '../db/transaction.ts';
import { Keyring } from './keyring.ts';

interface ReencryptOutcome {
  /** Rows looked at. */
  examined: number;
  /** Rows re-sealed under the newest key. */
  resealed: number;
  /** Rows whose token changed while we worked (a rotation): left alone, sealed by the rotation. */
  changedConcurrently: number;
  /** Rows sealed under a key that is not configured: they cannot be read until it is. */
  unreadable: { team_id: number; key_id: string }[];
}

interface SealedRow {
  team_id: number;
  token_ciphertext: string;
}

/** Replaces a row's ciphertext if it is still `row.token_ciphertext`; false if it changed meanwhile. */
export async function swapCiphertext(db: Kysely<Database>, row: SealedRow, resealed: string): Promise<boolean> {
  const result = await db
    .updateTable('user_groups')
    .set({ token_ciphertext: resealed })
    .where('team_id', '=', row.team_id)
    .where('token_ciphertext', '=', row.token_ciphertext)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function reencryptUserGroupTokens(
  handle: DatabaseHandle,
  keyring: Keyring,
  options: { batchSize?: number; onBatch?: (progress: ReencryptOutcome) => void } = {},
): Promise<ReencryptOutcome> {
  const batchSize = options.batchSize ?? 500;
  const configured = new Set(keyring.keyIds);
  const outcome: ReencryptOutcome = { examined: 0, resealed: 0, changedConcurrently: 0, unreadable: [] };
  let after = 0;
  for (;;) {
    // Keyset pagination: each batch is one short transaction, so the server keeps serving.
    const rows = await handle.db
      .selectFrom('user_groups')
      .select(['team_id', 'token_ciphertext'])
      .where('team_id', '>', after)
      .orderBy('team_id')
      .limit(batchSize)
      .execute();
    if (rows.length === 0) break;
    after = rows[rows.length - 1].team_id;
    outcome.examined += rows.length;
    const stale: { row: SealedRow; resealed: string }[] = [];
    for (const row of rows) {
      const keyId = Keyring.sealedKeyId(row.token_ciphertext);
      if (keyId === keyring.currentKeyId) continue;
      let plaintext: string | undefined;
      try {
        if (configured.has(keyId)) plaintext = keyring.open(row.token_ciphertext);
      } catch {
        // a damaged ciphertext: reported below like a missing key
      }
      if (plaintext === undefined) outcome.unreadable.push({ team_id: row.team_id, key_id: keyId });
      else stale.push({ row, resealed: keyring.seal(plaintext) });
    }
    if (stale.length > 0) {
      const swapped = await inTransaction(handle, async (trx) => {
        let count = 0;
        for (const { row, resealed } of stale) if (await swapCiphertext(trx, row, resealed)) count++;
        return count;
      });
      outcome.resealed += swapped;
      outcome.changedConcurrently += stale.length - swapped;
    }
    options.onBatch?.(outcome);
  }
  return outcome;
}

/** How many user group tokens are sealed under each key id (ids are the first 8 characters). */
export async function tokensPerKey(db: Kysely<Database>): Promise<{ key_id: string; tokens: number }[]> {
  const rows = await db
    .selectFrom('user_groups')
    .select([sql<string>`substr(token_ciphertext, 1, 8)`.as('key_id'), (eb) => eb.fn.countAll<number | string>().as('tokens')])
    .groupBy(sql`substr(token_ciphertext, 1, 8)`)
    .orderBy('key_id')
    .execute();
  return rows.map((r) => ({ key_id: r.key_id, tokens: Number(r.tokens) }));
}

/**
 * Re-seals webhook endpoint secrets (the current one, and the previous one while it signs)
 * under the newest key; each row only if it still holds what was read (compare-and-swap:
 * a rotation meanwhile wins). Returns how many were re-sealed, and the endpoints whose
 * secrets no configured key opens.
 */
export async function reencryptWebhookSecrets(handle: DatabaseHandle, keyring: Keyring): Promise<{ resealed: number; unreadable: number[] }> {
  const outcome = { resealed: 0, unreadable: [] as number[] };
  const rows = await handle.db.selectFrom('webhook_endpoints').select(['id', 'secret_sealed', 'previous_secret_sealed']).orderBy('id').execute();
  for (const row of rows) {
    const reseal = (sealed: string | null): string | null | undefined => {
      if (sealed === null || Keyring.sealedKeyId(sealed) === keyring.currentKeyId) return sealed;
      try {
        return keyring.seal(keyring.open(sealed, 'webhook-secret'), 'webhook-secret');
      } catch {
        return undefined;
      }
    };
    const current = reseal(row.secret_sealed) as string | undefined;
    const previous = reseal(row.previous_secret_sealed);
    if (current === undefined) {
      outcome.unreadable.push(Number(row.id));
      continue;
    }
    if (current === row.secret_sealed && (previous === row.previous_secret_sealed || previous === undefined)) continue;
    const result = await singleWrite(handle, () =>
      handle.db
        .updateTable('webhook_endpoints')
        .set({ secret_sealed: current, previous_secret_sealed: previous === undefined ? row.previous_secret_sealed : previous })
        .where('id', '=', row.id)
        .where('secret_sealed', '=', row.secret_sealed)
        .executeTakeFirst(),
    );
    if (Number(result.numUpdatedRows) === 1) outcome.resealed++;
  }
  return outcome;
}
