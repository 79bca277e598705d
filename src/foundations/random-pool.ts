// Random bytes for tokens and IVs, taken from a pool filled 4 KiB at a time: each call of
// crypto.randomBytes costs the same whatever its size (docs/performance.md, "Why the code is
// the way it is"), and a bulk upsert needs two per group (a token and an IV). Slices of one
// call are as random as separate calls; a slice is never handed out twice (a used pool is
// dropped, never refilled in place).
import crypto from 'node:crypto';

const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let offset = 0;

export function randomBytes(size: number): Buffer {
  if (size > POOL_BYTES) return crypto.randomBytes(size);
  if (offset + size > pool.length) {
    pool = crypto.randomBytes(POOL_BYTES);
    offset = 0;
  }
  const bytes = pool.subarray(offset, offset + size);
  offset += size;
  return bytes;
}
