// Embed tokens (docs/api.md, "Embed tokens"): compact JWS signed by a key of
// embed_signing_keys (ES256 by default, RS256 or EdDSA), so that anyone can verify them
// against the published JWKS without a shared secret. Tokens signed before that change
// (HS256, with a key derived from the secret key) keep verifying here until they expire;
// none are issued any more.
//
// Verifying a signature costs far more than the rest of an embed request, so the outcome is
// remembered per token (by its SHA-256) until its `exp`. A remembered token is still refused
// once its key is no longer published, and the caller still checks the group's token
// generation on every request: rotation and deletion hold at once.
import crypto from 'node:crypto';
import { SignJWT, decodeProtectedHeader, jwtVerify, type JWTPayload } from 'jose';
import type { Keyring } from '../crypto/keyring.ts';
import { hashToken, isCanonicalJws, MAX_EMBED_TOKEN_BYTES } from '../auth/token-format.ts';
import { BoundedMap } from '../foundations/bounded-map.ts';
import type { EmbedSigningKeys } from './signing-keys.ts';
import { EMBED_SIGNING_ALGORITHMS } from '../config.ts';
import { EMBED_TOKEN_MAX_SECONDS, EMBED_TOKEN_MIN_SECONDS, type EmbedViewerClaim } from './embed.schemas.ts';
import { isViewerClaim } from './embed-viewer.ts';
import { embedSubject } from './embed-subject.ts';
import type { Environment } from '../db/schema.ts';

// Our own type, so no other JWT signed for another purpose can pass as an embed token.
const EMBED_TOKEN_TYPE = 'ugs-embed+jwt';
/** Bounds the memory verified tokens take (docs/performance.md, "Why the code is the way it is"). */
const VERIFIED_CACHE_SIZE = 100_000;
const DECIMAL_ID = /^[1-9][0-9]{0,15}$/;
/** How far ahead of this instance's clock another host's `iat` may be. */
const CLOCK_SKEW_SECONDS = 60;

const SIGNED = new Set<string | undefined>(EMBED_SIGNING_ALGORITHMS);
const LEGACY_PURPOSE = 'embed-token';
const LEGACY_ISSUER = 'ugs';
const LEGACY_AUDIENCE = 'ugs:embed';

/** What the service itself needs of a verified token. */
export interface EmbedClaims {
  teamId: number;
  generation: number;
  embedId?: string;
  origin?: string;
  /** The person viewing (`ugs_viewer`), when the token was issued with one. */
  viewer?: EmbedViewerClaim;
  expiresAt: Date;
  /** The key that signed it: a signing key's kid, or `hs256:<secret key id>`. */
  kid: string;
  /** Every claim of the token, as verified. */
  payload: JWTPayload;
}

/** What a token says about its group, taken at issue time. */
interface EmbedTokenSubject {
  teamId: number;
  generation: number;
  userGroupId: string;
  accountSlug: string;
  environment: Environment;
  /** The dashboard variables, as /api/embed/context answers them. */
  variables: Record<string, unknown>;
  embedId?: string;
  origin?: string;
  viewer?: EmbedViewerClaim;
}

interface EmbedTokenOptions {
  /** `iss`: the service's public URL. */
  issuer: string;
  /** `aud` of a token not bound to an embed_id. */
  audience: string;
}

export class EmbedTokenTooLarge extends Error {
  constructor(readonly bytes: number) {
    super(`the embed token would be ${bytes} bytes`);
  }
}

export class EmbedTokens {
  private readonly verified = new BoundedMap<string, EmbedClaims>(VERIFIED_CACHE_SIZE);
  private readonly legacyKeys = new Map<string, Buffer | undefined>();

  constructor(
    private readonly keys: EmbedSigningKeys,
    private readonly keyring: Keyring,
    readonly options: EmbedTokenOptions,
  ) {}

  async sign(subject: EmbedTokenSubject, issuedAt: Date, lifetimeSeconds: number): Promise<{ token: string; expiresAt: Date }> {
    const iat = Math.floor(issuedAt.getTime() / 1000);
    // While the primary is away the key may be kept published for less than asked: the token
    // then expires when the key's publication does, if that leaves it the shortest lifetime.
    const { kid, algorithm, privateKey, expiresAt } = await this.keys.signer(new Date((iat + lifetimeSeconds) * 1000), EMBED_TOKEN_MIN_SECONDS * 1000);
    const exp = Math.floor(expiresAt.getTime() / 1000);
    const claims: JWTPayload = {
      ugs_account: subject.accountSlug,
      ugs_environment: subject.environment,
      ugs_user_group_id: subject.userGroupId,
      ugs_team_id: subject.teamId,
      ugs_generation: subject.generation,
      ...(subject.origin === undefined ? {} : { ugs_origin: subject.origin }),
      ugs_variables: subject.variables,
    };
    // Absent without a viewer: such a token is byte for byte what it was before viewers.
    if (subject.viewer !== undefined) claims.ugs_viewer = subject.viewer;
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: algorithm, typ: EMBED_TOKEN_TYPE, kid })
      .setIssuer(this.options.issuer)
      .setSubject(embedSubject(subject.accountSlug, subject.environment, subject.userGroupId))
      .setAudience(subject.embedId ?? this.options.audience)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(exp)
      .setJti(crypto.randomBytes(16).toString('base64url'))
      .sign(privateKey);
    if (token.length > MAX_EMBED_TOKEN_BYTES) throw new EmbedTokenTooLarge(token.length);
    return { token, expiresAt };
  }

  /** The claims of a genuine, unexpired embed token; undefined for anything else. */
  async verify(token: string, now: Date): Promise<EmbedClaims | undefined> {
    const cacheKey = hashToken(token);
    const known = this.verified.get(cacheKey);
    // Found by its hash: this very token was canonical and verified before.
    if (known) return known.expiresAt > now && this.stillPublished(known.kid) ? known : undefined;
    if (!isCanonicalJws(token)) return undefined;
    let claims: EmbedClaims | undefined;
    try {
      const { alg } = decodeProtectedHeader(token);
      if (SIGNED.has(alg)) claims = await this.verifySigned(token, now);
      else if (alg === 'HS256') claims = await this.verifyLegacy(token, now);
    } catch {
      return undefined;
    }
    if (!claims || !issuableTimes(claims.payload, now)) return undefined;
    this.verified.set(cacheKey, claims);
    return claims;
  }

  private stillPublished(kid: string): boolean {
    return kid.startsWith('hs256:') || this.keys.isPublished(kid);
  }

  private async verifySigned(token: string, now: Date): Promise<EmbedClaims | undefined> {
    const { payload, protectedHeader } = await jwtVerify(
      token,
      async (header) => {
        const key = header.kid === undefined ? undefined : await this.keys.verificationKey(header.kid);
        // A key verifies only its own algorithm: the header cannot choose another for it.
        if (!key || key.algorithm !== header.alg) throw new Error('unknown key id');
        return key.publicKey;
      },
      {
        algorithms: [...EMBED_SIGNING_ALGORITHMS],
        typ: EMBED_TOKEN_TYPE,
        issuer: this.options.issuer,
        currentDate: now,
        requiredClaims: ['sub', 'aud', 'iat', 'nbf', 'exp', 'ugs_team_id', 'ugs_generation'],
      },
    );
    const { aud, exp, ugs_team_id: teamId, ugs_generation: generation, ugs_origin: origin, ugs_viewer: viewer } = payload;
    if (typeof aud !== 'string' || typeof exp !== 'number' || !Number.isSafeInteger(teamId) || !Number.isSafeInteger(generation)) return undefined;
    if (origin !== undefined && typeof origin !== 'string') return undefined;
    if (viewer !== undefined && !isViewerClaim(viewer)) return undefined;
    return {
      teamId: teamId as number,
      generation: generation as number,
      // A token that is not bound to a dashboard names the service's default audience.
      embedId: aud === this.options.audience ? undefined : aud,
      origin,
      viewer,
      expiresAt: new Date(exp * 1000),
      kid: protectedHeader.kid!,
      payload,
    };
  }

  /** Tokens issued before embed tokens were signed by published keys (docs/api.md, "Embed tokens"). */
  private async verifyLegacy(token: string, now: Date): Promise<EmbedClaims | undefined> {
    const { payload, protectedHeader } = await jwtVerify(
      token,
      (header) => {
        const key = header.kid === undefined ? undefined : this.legacyKey(header.kid);
        if (!key) throw new Error('unknown key id');
        return key;
      },
      {
        algorithms: ['HS256'],
        typ: EMBED_TOKEN_TYPE,
        issuer: LEGACY_ISSUER,
        audience: LEGACY_AUDIENCE,
        currentDate: now,
        requiredClaims: ['sub', 'iat', 'exp', 'gen'],
      },
    );
    const { sub, gen, exp, embed_id: embedId, origin } = payload;
    if (typeof sub !== 'string' || !DECIMAL_ID.test(sub) || !Number.isSafeInteger(gen) || typeof exp !== 'number') return undefined;
    if (embedId !== undefined && typeof embedId !== 'string') return undefined;
    if (origin !== undefined && typeof origin !== 'string') return undefined;
    return { teamId: Number(sub), generation: gen as number, embedId, origin, expiresAt: new Date(exp * 1000), kid: `hs256:${protectedHeader.kid}`, payload };
  }

  // HKDF per verification is cheap but not free; the derived keys of a keyring never change.
  private legacyKey(kid: string): Buffer | undefined {
    if (!this.legacyKeys.has(kid)) {
      if (!this.keyring.keyIds.includes(kid)) return undefined; // never grow the cache from input
      this.legacyKeys.set(kid, this.keyring.deriveKeyById(LEGACY_PURPOSE, kid));
    }
    return this.legacyKeys.get(kid);
  }
}

/**
 * Whether the service could have issued a token with these times: signed now or before (an
 * `iat` at most CLOCK_SKEW_SECONDS ahead), for no longer than the longest lifetime it issues.
 * A signature alone does not say so: a leaked or misused signing key could sign anything,
 * and a token that names a far future `exp` would outlive every key rotation meant to end it.
 * The same check serves the context and introspection, so both refuse the same tokens.
 */
function issuableTimes({ iat, exp }: JWTPayload, now: Date): boolean {
  if (typeof iat !== 'number' || typeof exp !== 'number') return false;
  return iat <= now.getTime() / 1000 + CLOCK_SKEW_SECONDS && exp - iat <= EMBED_TOKEN_MAX_SECONDS;
}
