// Verify an embed token with jose (docs/verify-embed-tokens.md). jose fetches the key set,
// caches it, and fetches it again for a kid it does not know.
import { createRemoteJWKSet, jwtVerify } from 'jose';

/**
 * `issuer`: the service's UGS_PUBLIC_URL; `audience`: the embed_id your dashboards are bound to, or 'ugs:embed'; `account`: your account's slug.
 * `jwksUrl`: the key set, which lists ES256 and RS256 keys; to accept EdDSA tokens too, `${issuer}/.well-known/jwks.json?alg=ES256,RS256,EdDSA`.
 */
export function embedTokenVerifier({ issuer, audience, account, jwksUrl = `${issuer}/.well-known/jwks.json` }) {
  const keys = createRemoteJWKSet(new URL(jwksUrl), { cacheMaxAge: 300_000 });
  return async (token) => {
    const { payload } = await jwtVerify(token, keys, {
      issuer,
      audience,
      algorithms: ['ES256', 'RS256', 'EdDSA'],
      typ: 'ugs-embed+jwt',
      requiredClaims: ['exp', 'nbf', 'sub', 'ugs_account', 'ugs_environment', 'ugs_user_group_id'],
    });
    // Every account's tokens are signed by the same keys: the signature says the service issued it, ugs_account for whom.
    if (payload.ugs_account !== account) throw new Error('the embed token is of another account');
    return payload; // the group: sub, or ugs_environment and ugs_user_group_id; ugs_variables: the dashboard variables; ugs_viewer: the person, when named
  };
}
