// For a secret key that is lost for good: the groups whose tokens it sealed get new tokens
// (README, "Secret keys"). Without it the server refuses to start (crypto/stored-keys.ts).
import type { DatabaseHandle } from '../db/database.ts';
import { inTransaction } from '../db/transaction.ts';
import { generateToken, hashToken } from '../auth/token-format.ts';
import { appendAudit, type Actor } from '../audit/audit.repository.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { sealingKeyId } from '../crypto/stored-keys.ts';
import { dropRetiredTokens } from './user-groups.repository.ts';

export interface ReissueOutcome {
  key_id: string;
  reissued: number;
}

/**
 * For a key that is lost: every group whose token it sealed gets a new token sealed under the
 * keyring's newest key, as a rotation without grace would (the generation moves on, so its
 * embed tokens die too, and its retired tokens are dropped). Batches of short transactions,
 * each row replaced only if its ciphertext is still the one read.
 */
export async function reissueTokensOfLostKey(
  handle: DatabaseHandle,
  keyring: Keyring,
  keyId: string,
  actor: Actor,
  now: () => Date,
  batchSize = 500,
): Promise<ReissueOutcome> {
  if (keyring.keyIds.includes(keyId)) throw new Error(`key ${keyId} is configured: its tokens can be read (use: ugs keys reencrypt)`);
  let reissued = 0;
  for (;;) {
    const rows = await handle.db
      .selectFrom('user_groups')
      .select(['team_id', 'token_ciphertext'])
      .where(sealingKeyId, '=', keyId)
      .orderBy('team_id')
      .limit(batchSize)
      .execute();
    if (rows.length === 0) return { key_id: keyId, reissued };
    reissued += await inTransaction(handle, async (trx) => {
      let count = 0;
      const at = now();
      for (const row of rows) {
        const token = generateToken('user_group');
        const replaced = await trx
          .updateTable('user_groups')
          .set((eb) => ({
            token_hash: hashToken(token),
            token_ciphertext: keyring.seal(token),
            token_generation: eb('token_generation', '+', 1),
            updated_at: at.toISOString(),
          }))
          .where('team_id', '=', row.team_id)
          .where('token_ciphertext', '=', row.token_ciphertext)
          .returning(['team_id', 'account_id', 'environment', 'provided_id'])
          .executeTakeFirst();
        if (!replaced) continue;
        await dropRetiredTokens(trx, { accountId: replaced.account_id, environment: replaced.environment }, row.team_id);

        await appendAudit(trx, {
          accountId: replaced.account_id,
          subjectType: 'user_group',
          subjectId: replaced.team_id,
          environment: replaced.environment,
          providedId: replaced.provided_id,
          action: 'user_group.rotate',
          actorTokenId: actor.tokenId,
          requestId: actor.requestId,
          at,
        });
        count++;
      }
      return count;
    });
  }
}
