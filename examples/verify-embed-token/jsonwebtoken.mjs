// Verify an embed token with jsonwebtoken and jwks-rsa (docs/verify-embed-tokens.md).
// jsonwebtoken does not implement EdDSA: this works for ES256 (the default) and RS256 keys.
import jwt from 'jsonwebtoken';
import jwksClient from 'jwks-rsa';

/** `issuer`: the service's UGS_PUBLIC_URL; `audience`: the embed_id your dashboards are bound to, or 'ugs:embed'; `account`: your account's slug. */
export function embedTokenVerifier({ issuer, audience, account }) {
  // Keys are cached by kid; an unknown kid fetches the set again, at most 30 times a minute.
  const keys = jwksClient({ jwksUri: `${issuer}/.well-known/jwks.json`, cache: true, cacheMaxAge: 300_000, rateLimit: true, jwksRequestsPerMinute: 30 });
  const publicKey = (header, callback) => keys.getSigningKey(header.kid).then((key) => callback(null, key.getPublicKey()), callback);
  return (token) =>
    new Promise((resolve, reject) => {
      jwt.verify(token, publicKey, { issuer, audience, algorithms: ['ES256', 'RS256'] }, (err, claims) => {
        if (err) return reject(err);
        // Every account's tokens are signed by the same keys: ugs_account says whose it is.
        if (claims.ugs_account !== account) return reject(new Error('the embed token is of another account'));
        resolve(claims);
      });
    });
}
