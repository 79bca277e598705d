// Verify an embed token with fast-jwt and get-jwks (docs/verify-embed-tokens.md), finding the
// key set from the issuer alone through /.well-known/openid-configuration. get-jwks converts
// keys with jwk-to-pem, which refuses EdDSA (OKP) keys: this works for ES256 (the default) and RS256.
import { createVerifier } from 'fast-jwt';
import buildGetJwks from 'get-jwks';

/** `issuer`: the service's UGS_PUBLIC_URL; `audience`: the embed_id your dashboards are bound to, or 'ugs:embed'; `account`: your account's slug. */
export function embedTokenVerifier({ issuer, audience, account }) {
  const getJwks = buildGetJwks({ providerDiscovery: true, issuersWhitelist: [issuer], ttl: 300_000 });
  const verify = createVerifier({
    // The domain is the issuer you trust, never the token's own iss.
    key: async ({ header }) => getJwks.getPublicKey({ domain: issuer, kid: header.kid, alg: header.alg }),
    algorithms: ['ES256', 'RS256'],
    allowedIss: issuer,
    allowedAud: audience,
    requiredClaims: ['iss', 'aud', 'exp', 'nbf', 'sub', 'ugs_account', 'ugs_environment', 'ugs_user_group_id'],
  });
  return async (token) => {
    const claims = await verify(token);
    // Every account's tokens are signed by the same keys: ugs_account says whose it is.
    if (claims.ugs_account !== account) throw new Error('the embed token is of another account');
    return claims;
  };
}
