// PostgreSQL write-ahead log positions (LSNs, `16/B374D848`) as numbers that compare, and as
// fixed-width text that compares the same way as a string (what the Redis record holds, so that
// its script compares without arithmetic: Lua's numbers are doubles, an LSN is 64 bits).

/** The position no replica ever passes: a write whose position could not be read (docs/api.md, "Reads from replicas"). */
export const UNKNOWN_POSITION = 0xffff_ffff_ffff_ffffn;

/** `X/Y` (pg_lsn's text form) as a 64-bit number; null for anything else. */
export function parseLsn(text: string): bigint | null {
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
  if (!match) return null;
  return (BigInt(`0x${match[1]}`) << 32n) | BigInt(`0x${match[2]}`);
}

/** 16 lowercase hex digits: two positions compare as strings as they do as numbers. */
export function positionKey(position: bigint): string {
  return position.toString(16).padStart(16, '0');
}

/** The inverse of positionKey; null for a value that is not one. */
export function positionOfKey(text: string): bigint | null {
  return /^[0-9a-f]{16}$/.test(text) ? BigInt(`0x${text}`) : null;
}

/** pg_lsn's text form, for logs and /readyz. */
export function formatLsn(position: bigint): string {
  return `${(position >> 32n).toString(16).toUpperCase()}/${(position & 0xffff_ffffn).toString(16).toUpperCase()}`;
}
