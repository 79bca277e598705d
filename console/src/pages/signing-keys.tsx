// The public keys that verify embed tokens, read-only: what /.well-known/jwks.json publishes
// and what the discovery document says signs now. Public documents, so nothing here depends
// on the token's scopes; rotating a key is the command-line tool's job.
import type { PublicJwk } from '../../../packages/client/src/index.ts';
import type { Session } from '../session.ts';
import { ErrorAlert, ScrollingTable, useLoad } from '../components/common.tsx';

/** The curve, or the modulus size, in words. */
function keyDetails(key: PublicJwk): string {
  if (key.kty === 'RSA') return `${Math.floor((key.n.length * 6) / 8) * 8} bits`; // the modulus, base64url: 6 bits a character
  return key.crv;
}

export function SigningKeysPage({ session }: { session: Session }) {
  // Every published key, EdDSA ones too (the default set lists ES256 and RS256 keys only: docs/api.md, "Keys").
  const keys = useLoad(() => session.client.getJwks({ alg: 'ES256,RS256,EdDSA' }), []);
  const discovery = useLoad(() => session.client.getEmbedTokenDiscovery(), []);
  const [signing, ...others] = discovery.data?.id_token_signing_alg_values_supported ?? [];

  return (
    <section aria-labelledby="keys-title">
      <h1 id="keys-title">Embed signing keys</h1>
      <p>
        Embed tokens are signed by the service and verified by anyone with these public keys: your data API, a database proxy, a BI tool. A verifier picks the
        key a token's <code>kid</code> names.
      </p>
      <ErrorAlert error={keys.error ?? discovery.error} />
      {discovery.data && (
        <dl class="fields">
          <dt>Issuer (iss)</dt>
          <dd>
            <code>{discovery.data.issuer}</code>
          </dd>
          <dt>Signs with</dt>
          <dd>
            <strong>{signing}</strong>
            {others.length > 0 && <span class="muted"> (still published: {others.join(', ')})</span>}
          </dd>
          <dt>Key set</dt>
          <dd>
            <a href="/.well-known/jwks.json">{discovery.data.jwks_uri}</a>
          </dd>
          <dt>Discovery</dt>
          <dd>
            <a href="/.well-known/openid-configuration">/.well-known/openid-configuration</a>
          </dd>
        </dl>
      )}
      <ScrollingTable label="Published signing keys">
        <table class="signing-keys">
          <caption>Published keys, newest first. A key stays published until every token it signed has expired.</caption>
          <thead>
            <tr>
              <th scope="col">Key id (kid)</th>
              <th scope="col">Type (kty)</th>
              <th scope="col">Algorithm (alg)</th>
              <th scope="col">Curve or size</th>
              <th scope="col">Use</th>
            </tr>
          </thead>
          <tbody>
            {keys.data?.keys.map((key) => (
              <tr data-kid={key.kid}>
                <td>
                  <code>{key.kid}</code>
                </td>
                <td>{key.kty}</td>
                <td>{key.alg}</td>
                <td>{keyDetails(key)}</td>
                <td>{key.use}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </ScrollingTable>
      <p class="hint">
        Add a key with <code>npx ugs keys embed rotate --alg ES256|RS256|EdDSA</code>: it is published at once and signs 10 minutes later. ES256 is the default,
        because every common JWT library verifies it. EdDSA keys are listed only at <code>/.well-known/jwks.json?alg=ES256,RS256,EdDSA</code>, not in the
        default set, which some verifiers (Cube) could not read with one in it. See <code>npx ugs keys embed list</code> for when each key signs.
      </p>
    </section>
  );
}
