// Verify an embed token with fast-jwt and get-jwks (docs/verify-embed-tokens.md), finding the
// key set from the issuer alone through /.well-known/openid-configuration. get-jwks converts
// keys with jwk-to-pem, which refuses EdDSA (OKP) keys: this works for ES256 (the default) and RS256.
import { createVerifier } from 'fast-jwt';
import buildGetJwks from 'get-jwks';

/** `issuer`: the service's UGS_PUBLIC_URL; `audience`: the embed_id your dashboards are bound to, or 'ugs:embed'. */
export function embedTokenVerifier({ issuer, audience }) {
  const getJwks = buildGetJwks({ providerDiscovery: true, issuersWhitelist: [issuer], ttl: 300_000 });
  return createVerifier({
    // The domain is the issuer you trust, never the token's own iss.
    key: async ({ header }) => getJwks.getPublicKey({ domain: issuer, kid: header.kid, alg: header.alg }),
    algorithms: ['ES256', 'RS256'],
    allowedIss: issuer,
    allowedAud: audience,
    requiredClaims: ['iss', 'aud', 'exp', 'nbf'],
  });
}
