// RFC 7662 answers as JSON text (docs/api.md, "Embed tokens"). An active answer is the token's
// verified claims, which never change: each cached token's text is written once, on its first
// introspection, and dropped with it from the verification cache.
import type { EmbedClaims } from './embed-token.ts';

/** Inactive says nothing else (RFC 7662 §2.2). */
export const INACTIVE_INTROSPECTION_JSON = '{"success":1,"active":false}';

const written = new WeakMap<EmbedClaims, string>();

export function activeIntrospectionJson(claims: EmbedClaims): string {
  let json = written.get(claims);
  if (json === undefined) {
    json = JSON.stringify({ success: 1, active: true, ...claims.payload });
    written.set(claims, json);
  }
  return json;
}
