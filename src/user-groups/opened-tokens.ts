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

type SealedTokenRow = Pick<UserGroupRow, 'team_id' | 'token_generation' | 'token_ciphertext'>;

/** `ugs_grp_` and 49 characters (auth/token-format.ts): every group token has this length, in ASCII. */
const TOKEN_LENGTH = 57;
const FIRST_CAPACITY = 1024;

/**
 * The remembered tokens live outside the JavaScript heap: their characters in one buffer, a
 * slot of TOKEN_LENGTH bytes each, with the slot's generation and team beside it in typed
 * arrays; the heap holds one Map from team_id to slot. An object and a string per group would
 * be marked by every full garbage collection: with every group of a large table served, each
 * request paid for them (docs/performance.md, "Why the code is the way it is"). Slots are
 * reused oldest first, as BoundedMap drops its oldest entry.
 */
export class OpenedTokenCache {
  private readonly slotOf = new Map<number, number>();
  private characters = Buffer.alloc(0);
  private generations = new Float64Array(0);
  private teams = new Float64Array(0);
  /** When every slot is taken: the slot filled longest ago, the next to reuse. */
  private oldest = 0;

  /** `maxEntries` bounds memory (docs/performance.md, "Why the code is the way it is"); 0 opens every token anew. */
  constructor(
    private readonly keyring: Keyring,
    private readonly maxEntries: number,
  ) {}

  /** Seals a new token for storage (under the keyring's newest key). */
  seal(token: string): string {
    return this.keyring.seal(token);
  }

  /** The plaintext token of a committed row. */
  tokenOf(row: SealedTokenRow): string {
    const slot = this.slotOf.get(row.team_id);
    if (slot !== undefined && this.generations[slot] === row.token_generation) {
      return this.characters.toString('latin1', slot * TOKEN_LENGTH, (slot + 1) * TOKEN_LENGTH);
    }
    const token = this.keyring.open(row.token_ciphertext);
    this.remember(row.team_id, row.token_generation, token, slot);
    return token;
  }

  get size(): number {
    return this.slotOf.size;
  }

  private remember(teamId: number, generation: number, token: string, known: number | undefined): void {
    if (this.maxEntries <= 0 || token.length !== TOKEN_LENGTH || !/^[\x21-\x7e]+$/.test(token)) return;
    let slot = known;
    if (slot === undefined) {
      if (this.slotOf.size < this.maxEntries) {
        slot = this.slotOf.size;
        if (slot >= this.teams.length) this.grow();
      } else {
        slot = this.oldest;
        this.oldest = (this.oldest + 1) % this.maxEntries;
        this.slotOf.delete(this.teams[slot]);
      }
      this.slotOf.set(teamId, slot);
      this.teams[slot] = teamId;
    }
    this.characters.write(token, slot * TOKEN_LENGTH, TOKEN_LENGTH, 'latin1');
    this.generations[slot] = generation;
  }

  private grow(): void {
    const capacity = Math.min(this.maxEntries, Math.max(FIRST_CAPACITY, this.teams.length * 2));
    const characters = Buffer.alloc(capacity * TOKEN_LENGTH);
    this.characters.copy(characters);
    this.characters = characters;
    const generations = new Float64Array(capacity);
    generations.set(this.generations);
    this.generations = generations;
    const teams = new Float64Array(capacity);
    teams.set(this.teams);
    this.teams = teams;
  }
}
