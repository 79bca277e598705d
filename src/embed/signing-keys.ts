// The keys that sign embed tokens (docs/api.md, "Embed tokens"): Ed25519 key pairs generated
// by the service and kept in embed_signing_keys, the private half sealed under the secret
// key, so that every instance signs with the same key and publishes the same set.
//
// Each instance holds the table in memory and reads it again when its copy is a second old;
// a token naming a key it does not know makes it read again at once (at most every 50 ms),
// so a key added by another process verifies everywhere as soon as it exists. What must
// hold across instances lives in the table: a key is published before it signs (a rotation
// activates it later), and before a key signs a token it is kept published until that
// token's expiry (signed_until), so a key is never dropped while a token it signed is valid.
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { DatabaseHandle } from '../db/database.ts';
import type { EmbedSigningKeyRow } from '../db/schema.ts';
import { inTransaction } from '../db/transaction.ts';
import {
  countSigningKeys,
  dropExpiredSigningKeys,
  extendSignedUntil,
  insertSigningKey,
  lockSigningKeys,
  publishedSigningKeys,
  retireNewestKey,
  retireSigningKeys,
  signingKeysSealedUnder,
  allSigningKeys,
  swapSealedPrivateKey,
} from './signing-keys.repository.ts';
import { Keyring } from '../crypto/keyring.ts';

export const EMBED_ALGORITHM = 'EdDSA';
/** How long a verifier may cache the JWKS; shorter than the default activation delay. */
export const JWKS_MAX_AGE_SECONDS = 300;
/** A rotated-in key is published this long before it signs, so cached key sets learn it first. */
export const DEFAULT_ACTIVATION_SECONDS = 2 * JWKS_MAX_AGE_SECONDS;
const RELOAD_AFTER_MS = 1000;
const UNKNOWN_KID_RELOAD_AFTER_MS = 50;
/** signed_until moves in whole hours: signing writes to the table at most hourly. */
const SIGNED_UNTIL_STEP_MS = 3_600_000;

/** A public key as the JWKS publishes it (RFC 7517, RFC 8037). */
export interface PublishedJwk extends JWK {
  kid: string;
  alg: typeof EMBED_ALGORITHM;
  use: 'sig';
}

async function newKeyRow(keyring: Keyring, createdAt: Date, activatesAt: Date): Promise<EmbedSigningKeyRow> {
  const { publicKey, privateKey } = await generateKeyPair(EMBED_ALGORITHM, { crv: 'Ed25519', extractable: true });
  const { kty, crv, x } = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint({ kty, crv, x });
  const published: PublishedJwk = { kty, crv, x, kid, alg: EMBED_ALGORITHM, use: 'sig' };
  return {
    kid,
    algorithm: EMBED_ALGORITHM,
    public_jwk: JSON.stringify(published),
    private_key_sealed: keyring.seal(JSON.stringify(await exportJWK(privateKey)), 'embed-signing-key'),
    created_at: createdAt.toISOString(),
    activates_at: activatesAt.toISOString(),
    retired_at: null,
    signed_until: activatesAt.toISOString(),
  };
}

/** The first key of an empty table, signing at once; nothing when there is a key already. */
export async function ensureSigningKey(handle: DatabaseHandle, keyring: Keyring, now: Date): Promise<void> {
  const row = await newKeyRow(keyring, now, now);
  await inTransaction(handle, async (trx) => {
    await lockSigningKeys(trx);
    if ((await countSigningKeys(trx)) === 0) await insertSigningKey(trx, row);
  });
}

export interface SigningKeyRotation {
  kid: string;
  activates_at: string;
  /** Keys dropped because every token they signed has expired. */
  dropped: string[];
}

/**
 * Adds a key that signs from `now + activateInMs` (at once when the table is empty), when the
 * newest key stops; drops the keys whose tokens have all expired.
 */
export async function rotateSigningKey(handle: DatabaseHandle, keyring: Keyring, now: Date, activateInMs: number): Promise<SigningKeyRotation> {
  const activatesAt = new Date(now.getTime() + activateInMs);
  const row = await newKeyRow(keyring, now, activatesAt);
  return inTransaction(handle, async (trx) => {
    await lockSigningKeys(trx);
    const dropped = await dropExpiredSigningKeys(trx, now.toISOString());
    const first = (await countSigningKeys(trx)) === 0;
    const activates = first ? now.toISOString() : row.activates_at;
    if (!first) await retireNewestKey(trx, activates);
    await insertSigningKey(trx, { ...row, activates_at: activates, signed_until: activates });
    return { kid: row.kid, activates_at: activates, dropped };
  });
}

/**
 * For a secret key that is lost for good (`ugs keys reissue`): the signing keys it sealed stop
 * signing now (their public halves stay published until their tokens expire, so those tokens
 * keep verifying), and a new key sealed under the newest secret key signs from now on.
 */
export async function replaceSigningKeysOfLostKey(handle: DatabaseHandle, keyring: Keyring, keyId: string, now: Date): Promise<string[]> {
  const at = now.toISOString();
  const row = await newKeyRow(keyring, now, now);
  return inTransaction(handle, async (trx) => {
    await lockSigningKeys(trx);
    const lost = await signingKeysSealedUnder(trx, keyId, at);
    if (lost.length === 0) return [];
    const newestIsLost = lost.some((key) => key.retired_at === null);
    await retireSigningKeys(trx, lost.map((key) => key.kid), at);
    if (newestIsLost) await insertSigningKey(trx, row);
    return lost.map((key) => key.kid);
  });
}

/** `ugs keys reencrypt`: re-seals the private halves under the newest secret key (compare-and-swap per row). */
export async function reencryptSigningKeys(handle: DatabaseHandle, keyring: Keyring): Promise<{ resealed: number; unreadable: string[] }> {
  const outcome = { resealed: 0, unreadable: [] as string[] };
  for (const key of await allSigningKeys(handle.db)) {
    const sealer = Keyring.sealedKeyId(key.private_key_sealed);
    if (sealer === keyring.currentKeyId) continue;
    let plaintext: string;
    try {
      plaintext = keyring.open(key.private_key_sealed, 'embed-signing-key');
    } catch {
      outcome.unreadable.push(key.kid);
      continue;
    }
    if (await swapSealedPrivateKey(handle.db, key.kid, key.private_key_sealed, keyring.seal(plaintext, 'embed-signing-key'))) outcome.resealed++;
  }
  return outcome;
}

interface KnownKey {
  row: EmbedSigningKeyRow;
  jwk: PublishedJwk;
  activatesAt: number;
  retiredAt: number;
  signedUntil: number;
  publicKey?: Promise<CryptoKey>;
  privateKey?: Promise<CryptoKey>;
}

export interface Signer {
  kid: string;
  privateKey: CryptoKey;
}

export class EmbedSigningKeys {
  private keys: KnownKey[] = [];
  private byKid = new Map<string, KnownKey>();
  private jwksText = '{"keys":[]}';
  private loadedAt = -Infinity;
  private loading: Promise<void> | undefined;

  constructor(
    private readonly handle: DatabaseHandle,
    private readonly keyring: Keyring,
    private readonly now: () => Date,
  ) {}

  /** The published key set, as /.well-known/jwks.json answers it. */
  async jwks(): Promise<string> {
    await this.fresh(RELOAD_AFTER_MS);
    return this.jwksText;
  }

  /** The public key a token's `kid` names, if that key is published. */
  async verificationKey(kid: string): Promise<CryptoKey | undefined> {
    await this.fresh(RELOAD_AFTER_MS);
    if (!this.byKid.has(kid)) await this.fresh(UNKNOWN_KID_RELOAD_AFTER_MS);
    const key = this.byKid.get(kid);
    if (!key) return undefined;
    key.publicKey ??= importJWK(key.jwk, EMBED_ALGORITHM) as Promise<CryptoKey>;
    return key.publicKey;
  }

  /** Whether a key is still published, by this instance's copy (for tokens verified before). */
  isPublished(kid: string): boolean {
    return this.byKid.has(kid);
  }

  /** The key that signs now, kept published until `expiresAt` at least. */
  async signer(expiresAt: Date): Promise<Signer> {
    for (let attempt = 1; ; attempt++) {
      await this.fresh(RELOAD_AFTER_MS);
      const key = this.signingKey(this.now().getTime());
      if (key.signedUntil < expiresAt.getTime()) {
        const until = new Date(Math.ceil(expiresAt.getTime() / SIGNED_UNTIL_STEP_MS) * SIGNED_UNTIL_STEP_MS);
        if (!(await extendSignedUntil(this.handle.db, key.row.kid, until.toISOString()))) {
          // Dropped by a rotation since this copy was read: read again, sign with what is there.
          if (attempt >= 3) throw new Error(`embed signing key ${key.row.kid} vanished while signing`);
          this.loadedAt = -Infinity;
          continue;
        }
        key.signedUntil = Math.max(key.signedUntil, until.getTime());
      }
      key.privateKey ??= importJWK(JSON.parse(this.keyring.open(key.row.private_key_sealed, 'embed-signing-key')) as JWK, EMBED_ALGORITHM) as Promise<CryptoKey>;
      return { kid: key.row.kid, privateKey: await key.privateKey };
    }
  }

  /**
   * The newest key that has activated and not retired. A clock behind the one that activated
   * it (another host) would find none: then the earliest key that has not retired signs.
   */
  private signingKey(at: number): KnownKey {
    const current = this.keys.filter((k) => k.retiredAt > at);
    const active = current.filter((k) => k.activatesAt <= at);
    const key = active.length > 0 ? active[0] : current[current.length - 1];
    if (!key) throw new Error('no embed signing key is published');
    return key;
  }

  // Ages are measured on the service's clock (injected, so tests can move it); a clock that
  // went back counts as stale.
  private async fresh(maxAgeMs: number): Promise<void> {
    const age = this.now().getTime() - this.loadedAt;
    if (age >= 0 && age < maxAgeMs) return;
    this.loading ??= this.load().finally(() => {
      this.loading = undefined;
    });
    await this.loading;
  }

  private async load(): Promise<void> {
    const startedAt = this.now().getTime();
    const read = () => publishedSigningKeys(this.handle.db, this.now().toISOString());
    let rows = await read();
    if (rows.length === 0) {
      await ensureSigningKey(this.handle, this.keyring, this.now());
      rows = await read();
    }
    // Rows come newest activation first; imported keys of rows already known are kept.
    this.keys = rows.map((row) => {
      const known = this.byKid.get(row.kid);
      return {
        row,
        jwk: JSON.parse(row.public_jwk) as PublishedJwk,
        activatesAt: Date.parse(row.activates_at),
        retiredAt: row.retired_at === null ? Infinity : Date.parse(row.retired_at),
        signedUntil: Math.max(Date.parse(row.signed_until), known?.signedUntil ?? -Infinity),
        publicKey: known?.publicKey,
        privateKey: known?.row.private_key_sealed === row.private_key_sealed ? known.privateKey : undefined,
      };
    });
    this.byKid = new Map(this.keys.map((k) => [k.row.kid, k]));
    this.jwksText = JSON.stringify({ keys: this.keys.map((k) => k.jwk) });
    this.loadedAt = startedAt;
  }
}
