// The service's own embed signing key, opened as the database and the secret key allow: what
// a forger holding both could sign with. Tests use it to make tokens the service's API never
// issues (expired, not yet valid, another issuer, impossible times) that are still signed by a
// published key, so that a refusal can only come from the claims.
import { SignJWT, decodeJwt, decodeProtectedHeader, importJWK, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import type { Kysely } from 'kysely';
import type { Keyring } from '../../src/crypto/keyring.ts';
import type { Database } from '../../src/db/schema.ts';
import { allSigningKeys } from '../../src/embed/signing-keys.repository.ts';

/** Re-signs a genuine token's header and claims, with `changes`, under the key that signed it. */
export async function resignWithServiceKey(db: Kysely<Database>, keyring: Keyring, genuine: string, changes: JWTPayload): Promise<string> {
  const header = decodeProtectedHeader(genuine);
  const row = (await allSigningKeys(db)).find((key) => key.kid === header.kid);
  if (!row) throw new Error(`no signing key ${header.kid} in the database`);
  const privateKey = (await importJWK(JSON.parse(keyring.open(row.private_key_sealed, 'embed-signing-key')) as JWK, row.algorithm)) as CryptoKey;
  return new SignJWT({ ...decodeJwt(genuine), ...changes }).setProtectedHeader({ ...header, alg: row.algorithm }).sign(privateKey);
}
