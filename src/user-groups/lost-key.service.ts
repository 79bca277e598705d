// For a secret key that is lost for good: the groups whose tokens it sealed get new tokens
// (docs/deployment.md, "Secret keys"). Without it the server refuses to start (crypto/stored-keys.ts).
import type { DatabaseHandle } from '../db/database.ts';
import { inTransaction } from '../db/transaction.ts';
import { generateToken, hashToken } from '../auth/token-format.ts';
import { appendAudit, type Actor } from '../audit/audit.repository.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { dropRetiredTokens, groupsSealedBy, replaceSealedToken } from './user-groups.repository.ts';

interface ReissueOutcome {
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
    const rows = await groupsSealedBy(handle.db, keyId, batchSize);
    if (rows.length === 0) return { key_id: keyId, reissued };
    reissued += await inTransaction(handle, async (trx) => {
      let count = 0;
      const at = now();
      for (const row of rows) {
        const token = generateToken('user_group');
        const replaced = await replaceSealedToken(trx, row, { hash: hashToken(token), ciphertext: keyring.seal(token), at: at.toISOString() });
        if (!replaced) continue;
        await dropRetiredTokens(trx, { accountId: replaced.account_id, environment: replaced.environment }, row.team_id);

        await appendAudit(trx, {
          accountId: replaced.account_id,
          subjectType: 'user_group',
          subjectId: replaced.team_id,
          environment: replaced.environment,
          providedId: replaced.provided_id,
          generation: replaced.token_generation,
          action: 'user_group.rotate',
          actor,
          at,
        });
        count++;
      }
      return count;
    });
  }
}
