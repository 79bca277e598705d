// Token formats. Both kinds are `<prefix>_<256 random bits, base62><crc32 checksum, base62>`:
// the prefix says what a token is (and lets secret scanners find leaked ones), the checksum
// lets a mistyped or truncated token be refused without a database lookup.
import crypto from 'node:crypto';
import { randomBytes } from '../foundations/random-pool.ts';
import zlib from 'node:zlib';

type TokenKind = 'api' | 'user_group';

const PREFIX: Record<TokenKind, string> = { api: 'ugs_api', user_group: 'ugs_grp' };
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BODY_LENGTH = 43; // 62^43 > 2^256
const CHECKSUM_LENGTH = 6; // 62^6 > 2^32
const TOKEN_PATTERN = /^(ugs_api|ugs_grp)_([0-9A-Za-z]{49})$/;

export function generateToken(kind: TokenKind): string {
  const body = toBase62(randomBytes(32), BODY_LENGTH);
  const prefix = PREFIX[kind];
  return `${prefix}_${body}${checksum(`${prefix}_${body}`)}`;
}

/** The kind of a well-formed token, or null for anything malformed (no lookup needed). */
export function tokenKind(token: string): TokenKind | null {
  const match = TOKEN_PATTERN.exec(token);
  if (!match) return null;
  const payload = `${match[1]}_${match[2].slice(0, BODY_LENGTH)}`;
  const given = Buffer.from(match[2].slice(BODY_LENGTH));
  const expected = Buffer.from(checksum(payload));
  if (!crypto.timingSafeEqual(given, expected)) return null;
  return match[1] === PREFIX.api ? 'api' : 'user_group';
}

/** The longest embed token the service issues: what proxies commonly accept in one request header (nginx: 8 KiB a line). */
export const MAX_EMBED_TOKEN_BYTES = 8192;
const JWS_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** Three base64url parts: a compact JWS (a short-lived embed token), as opposed to a `ugs_…` token. */
export function looksLikeJws(token: string): boolean {
  return token.length <= MAX_EMBED_TOKEN_BYTES && JWS_SHAPE.test(token);
}

/**
 * A JWS whose parts are spelled the one way base64url encodes their bytes. Decoders ignore
 * the unused low bits of a part's last character, so without this one token would have up to
 * 16 spellings, each with a rate-limit budget of its own.
 */
export function isCanonicalJws(token: string): boolean {
  if (!looksLikeJws(token)) return false;
  return token.split('.').every((part) => Buffer.from(part, 'base64url').toString('base64url') === part);
}

const AUTHORIZATION = /^(?:Token|Bearer)\s+(\S+)\s*$/i;

/**
 * The credential in an Authorization header, `Token <t>` or `Bearer <t>` (either scheme on
 * every route): undefined when there is no header (or a blank one), null when it is not of
 * that form. Each caller answers those two cases with its own error.
 */
export function credentialFromAuthorization(header: string | undefined): string | null | undefined {
  if (header === undefined || header.trim() === '') return undefined;
  return AUTHORIZATION.exec(header)?.[1] ?? null;
}

const BARE_CREDENTIAL = /^\s*(\S+)\s*$/;

/**
 * The token of an Authorization header that holds a token alone, without a scheme
 * (`Authorization: ugs_api_…`), when it is one this service issues: then the error can say
 * which scheme to put before it. Null for anything else (never echoed: it may be a secret).
 */
export function bareToken(header: string): { token: string; kind: TokenKind | 'embed' } | null {
  const word = BARE_CREDENTIAL.exec(header)?.[1];
  if (word === undefined) return null;
  const kind = tokenKind(word) ?? (looksLikeJws(word) ? 'embed' : null);
  return kind === null ? null : { token: word, kind };
}

/**
 * What is stored and looked up instead of a token: tokens carry 256 bits, so a fast hash
 * suffices. Hashing first also makes every later comparison one of hashes, which leaks
 * nothing about a token. The one-shot crypto.hash (Node >= 20.12) skips the Hash object, a
 * cost every request would pay (docs/performance.md, "Why the code is the way it is").
 */
export function hashToken(token: string): string {
  return crypto.hash('sha256', token);
}

/** A short, non-secret start of a token, to recognise it in a list. */
export function tokenStart(token: string): string {
  return token.slice(0, PREFIX.api.length + 1 + 6);
}

function checksum(payload: string): string {
  // Checked on every request: plain number arithmetic (a CRC-32 fits a double exactly).
  let value = zlib.crc32(payload);
  let out = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = ALPHABET[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

/** 62^5, the divisor of one pass of toBase62: five digits at a time. */
const BASE62_CHUNK = 62 ** 5;

/**
 * The bytes as a big-endian number in base 62, `length` digits: the digits BigInt arithmetic
 * gives, without a BigInt for every division (a bulk upsert makes a token per group). Long
 * division of 16-bit limbs by 62^5: a remainder times 2^16 plus a limb stays below 2^53.
 */
function toBase62(bytes: Buffer, length: number): string {
  const limbs: number[] = [];
  for (let i = bytes.length % 2; i <= bytes.length - 2; i += 2) limbs.push((bytes[i] << 8) | bytes[i + 1]);
  if (bytes.length % 2 === 1) limbs.unshift(bytes[0]);
  const digits = new Array<string>(length);
  for (let d = length - 1; d >= 0; ) {
    let remainder = 0;
    for (let i = 0; i < limbs.length; i++) {
      const value = remainder * 65536 + limbs[i];
      const quotient = Math.floor(value / BASE62_CHUNK);
      limbs[i] = quotient;
      remainder = value - quotient * BASE62_CHUNK;
    }
    for (let k = 0; k < 5 && d >= 0; k++, d--) {
      digits[d] = ALPHABET[remainder % 62];
      remainder = Math.floor(remainder / 62);
    }
  }
  return digits.join('');
}
