// First start on an empty database: an account `default` and one read,write,admin API token, so a
// new user can make a call at once. Decided inside one transaction by the unique account
// slug, so instances starting together on one database issue exactly one token.
import type { DatabaseHandle } from '../db/database.ts';
import { inTransaction } from '../db/transaction.ts';
import { countAccounts, ensureAccount } from '../accounts/accounts.repository.ts';
import { insertApiToken, type IssuedApiToken } from '../api-tokens/api-tokens.service.ts';
import { FIRST_START_ACTOR } from '../audit/audit.repository.ts';

export async function bootstrapIfEmpty(handle: DatabaseHandle, now: Date): Promise<IssuedApiToken | null> {
  return inTransaction(handle, async (trx) => {
    if ((await countAccounts(trx)) > 0) return null;
    const { account, created } = await ensureAccount(trx, 'default', now);
    if (!created) return null;
    return insertApiToken(
      trx,
      account,
      { scopes: ['read', 'write', 'admin'], allowedEnvironment: null, expiresAt: null, name: 'bootstrap' },
      FIRST_START_ACTOR,
      now,
    );
  });
}

/** The once-only banner. Printed to stderr as plain text, not as a log line: logs never hold tokens. */
export function bootstrapBanner(issued: IssuedApiToken, baseUrl: string): string {
  const rule = '='.repeat(78);
  return [
    rule,
    ' First start on an empty database: created account "default" and an API token.',
    ' It is shown only this once. Store it now (revoke it with: npx ugs token revoke ' + issued.id + '):',
    '',
    `   ${issued.token}`,
    '',
    // A call that reads and changes nothing: a newcomer runs it before the README's calls,
    // whose answers must stay as the README shows them (test/readme.test.ts runs both).
    ' Try it (lists the user groups: none yet):',
    `   curl -H "Authorization: Token ${issued.token}" "${baseUrl}/api/users"`,
    rule,
    '',
  ].join('\n');
}
