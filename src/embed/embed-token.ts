// Short-lived embed tokens: compact JWS (HS256) signed with a key derived from the keyring.
// The protected header names the key (`kid`), so the keyring can rotate: the newest key
// signs, every listed key still verifies what it signed. The claims are public (base64url,
// not encrypted) and hold no secret: which group (team_id), which token generation of that
// group (a rotation invalidates every embed token of the previous generation), the expiry,
// and the optional embed_id and origin the token is bound to.
import { SignJWT, jwtVerify, type JWTPayload } from 'jose';
import type { Keyring } from '../crypto/keyring.ts';
import { isCanonicalJws } from '../auth/token-format.ts';

const PURPOSE = 'embed-token';
const ISSUER = 'ugs';
const AUDIENCE = 'ugs:embed';
// Our own type, so no other JWT signed for another purpose can pass as an embed token.
const TYPE = 'ugs-embed+jwt';
const DECIMAL_ID = /^[1-9][0-9]{0,15}$/;

export interface EmbedBinding {
  teamId: number;
  generation: number;
  embedId?: string;
  origin?: string;
}

export interface EmbedClaims extends EmbedBinding {
  expiresAt: Date;
}

export async function signEmbedToken(
  keyring: Keyring,
  binding: EmbedBinding,
  issuedAt: Date,
  lifetimeSeconds: number,
): Promise<{ token: string; expiresAt: Date }> {
  const key = keyring.deriveKey(PURPOSE);
  const iat = Math.floor(issuedAt.getTime() / 1000);
  const exp = iat + lifetimeSeconds;
  const claims: JWTPayload = { gen: binding.generation };
  if (binding.embedId !== undefined) claims.embed_id = binding.embedId;
  if (binding.origin !== undefined) claims.origin = binding.origin;
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256', typ: TYPE, kid: key.id })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setSubject(String(binding.teamId))
    .setIssuedAt(iat)
    .setExpirationTime(exp)
    .sign(key.secret);
  return { token, expiresAt: new Date(exp * 1000) };
}

/** The claims of a genuine, unexpired embed token; undefined for anything else. */
export async function verifyEmbedToken(keyring: Keyring, token: string, now: Date): Promise<EmbedClaims | undefined> {
  if (!isCanonicalJws(token)) return undefined;
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(
      token,
      (header) => {
        const key = header.kid === undefined ? undefined : verificationKey(keyring, header.kid);
        if (!key) throw new Error('unknown key id');
        return key;
      },
      { algorithms: ['HS256'], typ: TYPE, issuer: ISSUER, audience: AUDIENCE, currentDate: now, requiredClaims: ['sub', 'iat', 'exp', 'gen'] },
    ));
  } catch {
    return undefined;
  }
  const { sub, gen, exp, embed_id: embedId, origin } = payload;
  if (typeof sub !== 'string' || !DECIMAL_ID.test(sub) || !Number.isSafeInteger(gen) || typeof exp !== 'number') return undefined;
  if (embedId !== undefined && typeof embedId !== 'string') return undefined;
  if (origin !== undefined && typeof origin !== 'string') return undefined;
  return { teamId: Number(sub), generation: gen as number, embedId, origin, expiresAt: new Date(exp * 1000) };
}

// HKDF per verification is cheap but not free; the derived keys of a keyring never change.
const derivedKeys = new WeakMap<Keyring, Map<string, Buffer | undefined>>();

function verificationKey(keyring: Keyring, kid: string): Buffer | undefined {
  let byId = derivedKeys.get(keyring);
  if (!byId) derivedKeys.set(keyring, (byId = new Map()));
  if (!byId.has(kid)) {
    if (!keyring.keyIds.includes(kid)) return undefined; // never grow the cache from input
    byId.set(kid, keyring.deriveKeyById(PURPOSE, kid));
  }
  return byId.get(kid);
}
