// User group tokens are stored sealed (AES-256-GCM), yet get-or-create answers with the
// plaintext on every call. Opening one costs a fresh OpenSSL cipher context, which inside the
// busy server was the largest single cost of a get-or-create hit (docs/performance.md, "What
// was optimized"). So opened tokens are remembered.
//
// A token is named by (team_id, token_generation): team ids are never reused, every
// rotation bumps the generation, and re-sealing under a new key changes neither (nor the
// token). A remembered token is therefore used only while the row just read carries the
// same generation; a rotation by this or any other instance shows up as a new generation on
// the next read. Only committed rows reach this cache (callers open after the transaction),
// so a rolled-back rotation can never leave behind a token that does not exist.
import type { Keyring } from '../crypto/keyring.ts';
import type { UserGroupRow } from '../db/schema.ts';
import { BoundedMap } from '../foundations/bounded-map.ts';

type SealedTokenRow = Pick<UserGroupRow, 'team_id' | 'token_generation' | 'token_ciphertext'>;

interface OpenedToken {
  generation: number;
  token: string;
}

export class OpenedTokenCache {
  private readonly entries: BoundedMap<number, OpenedToken>;

  /** `maxEntries` bounds memory (docs/performance.md, "Why the code is the way it is"); 0 opens every token anew. */
  constructor(
    private readonly keyring: Keyring,
    maxEntries: number,
  ) {
    this.entries = new BoundedMap(maxEntries);
  }

  /** Seals a new token for storage (under the keyring's newest key). */
  seal(token: string): string {
    return this.keyring.seal(token);
  }

  /** The plaintext token of a committed row. */
  tokenOf(row: SealedTokenRow): string {
    const known = this.entries.get(row.team_id);
    if (known !== undefined && known.generation === row.token_generation) return known.token;
    const token = this.keyring.open(row.token_ciphertext);
    this.entries.set(row.team_id, { generation: row.token_generation, token });
    return token;
  }

  get size(): number {
    return this.entries.size;
  }
}
