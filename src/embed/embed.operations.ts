// The embed side's operations as the OpenAPI document describes them (docs/api.md, "The
// embed side"), and their code samples.
import { apiTokenAccess, userGroupTokenAccess } from '../auth/route-access.ts';
import { AUTH_ERRORS, BODY_ERRORS, errorResponses } from '../http/envelope.schemas.ts';
import type { CodeSample } from '../http/openapi.ts';
import * as schemas from './embed.schemas.ts';

const tags = ['Embed'];

export const embedContextOperation = {
  tags,
  operationId: 'getEmbedContext',
  summary: 'What an embedded dashboard needs to know about the user group viewing it',
  description: [
    'Called from the browser with `Authorization: Bearer <token>` (`Token <token>` is accepted too), where the token is a user group token',
    "or an embed token from `POST /api/embed_token`. Answers the group's public fields and its dashboard variables; never a token.",
    "For an embed token that names a viewer, also `viewer` (the token's `ugs_viewer`), and the variables gain `viewer_id` and `viewer_attributes` (the viewer's attributes, which never replace the group's properties); without one, no `viewer` key.",
    "A user group token works while it is the group's current token, and after a rotation with `grace_period_seconds` until the grace period ends.",
    "An embed token works until its expiry, the next rotation of its group's token (grace periods do not extend it) or the deletion of its group.",
    'Errors: `401 invalid_token` when the token is missing, malformed, unknown, expired, rotated or its group deleted (all look the same);',
    '`401 wrong_token_kind` for an API token (never give one to a browser);',
    '`403 origin_forbidden` when the embed token is bound to an origin and the `Origin` header is missing or differs;',
    '`403 embed_id_forbidden` when the embed token is bound to an embed_id and the `embed_id` query parameter is missing or differs.',
    'CORS: answers preflights for the configured origins (`UGS_CORS_ORIGINS`, default any origin), never with credentials.',
  ].join(' '),
  ...userGroupTokenAccess(),
  querystring: schemas.EmbedContextQuery,
  response: {
    200: { ...schemas.EmbedContextResponse, 'x-response-description': "The group's public fields and its dashboard variables." },
    ...errorResponses('invalid_token', 'wrong_token_kind', 'origin_forbidden', 'embed_id_forbidden', 'validation_failed', 'rate_limited'),
  },
};

export const createEmbedTokenOperation = {
  tags,
  operationId: 'createEmbedToken',
  summary: 'Issue a short-lived embed token for a user group',
  description: [
    'Called from your backend with an API token (the `read` scope suffices). Answers a compact JWS signed with ES256 (the default; RS256 or EdDSA if the service is set so) by the key its `kid` names,',
    'which anyone can verify with the keys at `/.well-known/jwks.json`. Its claims hold no secret: `iss` (UGS_PUBLIC_URL), `sub` (`<account>:<environment>:<user_group_id>`: unique within the issuer),',
    '`aud` (the `embed_id` when bound, else UGS_EMBED_AUDIENCE), `exp`, `iat`, `nbf`, `jti`, and `ugs_account`, `ugs_environment`, `ugs_user_group_id`, `ugs_team_id`, `ugs_generation`,',
    "`ugs_origin` (when bound), `ugs_viewer` (the `viewer`, when given) and `ugs_variables` (the dashboard variables at issue time: the group's computed properties, and with a viewer its `viewer_id` and `viewer_attributes`, which never replace a property).",
    'A token over 8,192 bytes is refused: `422 embed_token_too_large`. A bad `viewer` is `400 validation_failed` naming the field (`viewer.id`, `viewer.time_zone`, `viewer.attributes.<key>`; an attribute named like a claim or a variable of the service is issue `reserved`).',
    'Hand it to the browser instead of the long-lived user group token: `GET /api/embed/context` accepts it until `expires_at`,',
    "the next rotation of the group's token, or the group's deletion. With `origin`, only requests with that `Origin` header are accepted;",
    'with `embed_id`, only requests naming it as the `embed_id` query parameter. Unknown group (or one of another account): `404 user_group_not_found`.',
  ].join(' '),
  ...apiTokenAccess('read', 'request', 'issuing an embed token'),
  body: schemas.EmbedTokenBody,
  response: {
    200: { ...schemas.EmbedTokenResponse, 'x-response-description': 'The embed token and when it expires.' },
    ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, 'user_group_not_found', 'embed_token_too_large'),
  },
};

export const introspectOperation = {
  tags,
  operationId: 'introspectEmbedToken',
  summary: 'Whether an embed token is valid now (RFC 7662)',
  description: [
    'Called from your backend or data API with an API token (the `read` scope suffices), for callers that must honour a rotation or a deletion at once:',
    'a verifier that checks the signature against the JWKS knows only `exp`. The body is `token=<embed token>`, form-encoded as RFC 7662 sends it, or the same as JSON.',
    "Answers `active: true` with the token's claims while it is valid; otherwise only `active: false`: expired, altered, signed by a key that is no longer published,",
    'its group deleted or rotated since, or a token of another account or of an environment this API token may not use. Rate limited like every management call.',
  ].join(' '),
  ...apiTokenAccess('read', 'introspected', 'introspecting an embed token'),
  consumes: ['application/x-www-form-urlencoded', 'application/json'],
  body: schemas.IntrospectionBody,
  response: {
    200: { ...schemas.IntrospectionResponse, 'x-response-description': 'Whether the token is active, and its claims when it is.' },
    ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS),
  },
};

export const jwksOperation = {
  tags,
  operationId: 'getJwks',
  summary: 'The public keys that verify embed tokens (RFC 7517)',
  description: [
    "Needs no token; CORS is open to any origin. A verifier picks the key named by the token's `kid`; keys of several algorithms may be published at once, each with its `alg`.",
    'Without `alg`, it lists the ES256 and RS256 keys only (EC P-256 and RSA), which every verifier reads: an EdDSA (OKP) key is listed only at `?alg=` naming EdDSA, such as `?alg=ES256,RS256,EdDSA`,',
    'because some verifiers (Cube, and any that converts the whole set with jwk-to-pem) refuse a whole set that holds one. Tokens signed by an EdDSA key verify only against that URL.',
    'A new key is published before it signs (`ugs keys embed rotate` activates it 10 minutes later by default), and an old key stays published until every token it signed has expired.',
    "Cache it for at most `Cache-Control: max-age` (300 s); on a `kid` you do not know, fetch it again (jose's `createRemoteJWKSet` does both).",
    'An `alg` that names anything else is `400 validation_failed`.',
  ].join(' '),
  querystring: schemas.JwksQuery,
  response: {
    200: { ...schemas.JwksResponse, 'x-response-description': 'The published keys of the algorithms asked for.' },
    ...errorResponses('validation_failed', 'unavailable'),
  },
};

export const discoveryOperation = {
  tags,
  operationId: 'getEmbedTokenDiscovery',
  summary: 'Where a verifier that knows only the issuer finds the keys of embed tokens',
  description: [
    'Needs no token; CORS is open to any origin; cacheable like the key set (`max-age=300`). Answers `issuer` (UGS_PUBLIC_URL), `jwks_uri`',
    'and `id_token_signing_alg_values_supported` (the algorithms of the published keys), under the names OpenID Connect Discovery uses, so that libraries',
    "that discover keys from an issuer (get-jwks' `providerDiscovery`, OIDC clients) find them. It is not a login provider: it offers no login, authorization or ID token.",
  ].join(' '),
  response: {
    200: { ...schemas.DiscoveryResponse, 'x-response-description': 'The issuer, where its keys are, and their algorithms.' },
    ...errorResponses('unavailable'),
  },
};

export const embedCodeSamples: Record<string, CodeSample[]> = {
  introspectEmbedToken: [
    { lang: 'Shell', label: 'curl', source: 'curl -X POST "$UGS/api/embed/introspect" -H "Authorization: Token $TOKEN" --data-urlencode "token=$EMBED_TOKEN"' },
    {
      lang: 'TypeScript',
      label: '@ugs/client',
      source:
        "import { UserGroupServiceClient } from '@ugs/client';\nconst ugs = new UserGroupServiceClient({ baseUrl: process.env.UGS!, apiToken: process.env.TOKEN! });\nconst { active, sub } = await ugs.introspectEmbedToken(embedToken);",
    },
  ],
  getEmbedTokenDiscovery: [{ lang: 'Shell', label: 'curl', source: 'curl "$UGS/.well-known/openid-configuration"' }],
  getJwks: [
    { lang: 'Shell', label: 'curl', source: 'curl "$UGS/.well-known/jwks.json"' },
    {
      lang: 'JavaScript',
      label: 'jose',
      source:
        "import { createRemoteJWKSet, jwtVerify } from 'jose';\nconst jwks = createRemoteJWKSet(new URL('/.well-known/jwks.json', process.env.UGS), { cacheMaxAge: 300_000 });\nconst { payload } = await jwtVerify(embedToken, jwks, { issuer: process.env.UGS, audience: 'ugs:embed', algorithms: ['ES256', 'RS256', 'EdDSA'] });",
    },
  ],
  getEmbedContext: [
    { lang: 'Shell', label: 'curl', source: 'curl "$UGS/api/embed/context" -H "Authorization: Bearer $EMBED_TOKEN"' },
    {
      lang: 'TypeScript',
      label: '@ugs/client',
      source:
        "import { UserGroupServiceClient } from '@ugs/client';\nconst ugs = new UserGroupServiceClient({ baseUrl: process.env.UGS! });\nconst { user_group, variables } = await ugs.getEmbedContext(embedToken);",
    },
  ],
  createEmbedToken: [
    {
      lang: 'Shell',
      label: 'curl',
      source:
        'curl -X POST "$UGS/api/embed_token" -H "Authorization: Token $TOKEN" -H \'Content-Type: application/json\' \\\n  -d \'{"user_group_id": "example_1", "expires_in_seconds": 3600}\'',
    },
    {
      lang: 'TypeScript',
      label: '@ugs/client',
      source:
        "import { UserGroupServiceClient } from '@ugs/client';\nconst ugs = new UserGroupServiceClient({ baseUrl: process.env.UGS!, apiToken: process.env.TOKEN! });\nconst { embed_token, expires_at } = await ugs.createEmbedToken({ user_group_id: 'example_1', expires_in_seconds: 3600 });",
    },
  ],
};
