// `npx tsx bench/signing-cost.ts`: what one embed token signature and one verification cost,
// per algorithm, in this process, with the library and key types the service uses (jose on
// WebCrypto; P-256, RSA 2048, Ed25519) and a token of the service's shape. Two figures each:
// one operation at a time (the latency a request pays) and 16 at once (what the event loop
// and libuv's thread pool sustain together, as under load). The benchmark's mint-* and
// embed-jws-* scenarios measure the same through HTTP; this isolates the cryptography.
import { SignJWT, generateKeyPair, jwtVerify, type CryptoKey } from 'jose';
import { EMBED_SIGNING_ALGORITHMS, type EmbedSigningAlgorithm } from '../src/config.ts';

const CONCURRENCY = 16;
const claims = {
  ugs_account: 'default',
  ugs_environment: 'Customer',
  ugs_team_id: 4812,
  ugs_generation: 1,
  ugs_variables: { user_group_id: 'bench-4812', user_group_name: 'Group 4812', region: 'emea', plan: 'pro', seats: 42 },
};

function sign(algorithm: EmbedSigningAlgorithm, key: CryptoKey): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: algorithm, typ: 'ugs-embed+jwt', kid: 'bIkzhf-vL2q1-MjlsZtYrdIjPF84v3_GsIO54Xutk14' })
    .setIssuer('https://ugs.example.com')
    .setSubject('bench-4812')
    .setAudience('ugs:embed')
    .setIssuedAt(now)
    .setNotBefore(now)
    .setExpirationTime(now + 86_400)
    .setJti('kq3yX1d2cV0uGx9Zq8m2Ew')
    .sign(key);
}

/** Microseconds per operation: `total` operations, `inFlight` at a time. */
async function microsecondsPer(operation: () => Promise<unknown>, total: number, inFlight: number): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < total) await operation();
    }),
  );
  return ((performance.now() - started) * 1000) / total;
}

const rows: string[][] = [
  ['algorithm', 'token B', 'sign µs (1 at a time)', `sign µs (${CONCURRENCY} at once)`, 'verify µs (1 at a time)', `verify µs (${CONCURRENCY} at once)`],
];
for (const algorithm of EMBED_SIGNING_ALGORITHMS) {
  const { privateKey, publicKey } = await generateKeyPair(algorithm, algorithm === 'EdDSA' ? { crv: 'Ed25519' } : {});
  const token = await sign(algorithm, privateKey);
  const total = algorithm === 'RS256' ? 1_000 : 5_000;
  const signing = () => sign(algorithm, privateKey);
  const verifying = () => jwtVerify(token, publicKey, { algorithms: [algorithm] });
  await microsecondsPer(signing, total / 5, CONCURRENCY); // warm-up
  await microsecondsPer(verifying, total / 5, CONCURRENCY);
  rows.push([
    algorithm,
    String(token.length),
    (await microsecondsPer(signing, total, 1)).toFixed(0),
    (await microsecondsPer(signing, total, CONCURRENCY)).toFixed(0),
    (await microsecondsPer(verifying, total, 1)).toFixed(0),
    (await microsecondsPer(verifying, total, CONCURRENCY)).toFixed(0),
  ]);
}
const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
for (const row of rows) console.log(row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  '));
