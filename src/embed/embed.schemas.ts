// The embed side's schemas, declared once: validation, response allow-lists (no token can
// reach a response that is serialized from these) and the OpenAPI document.
import { Type, type Static } from 'typebox';
import { NOT_BLANK_PLAIN_TEXT, PLAIN_TEXT, Text, UNDIRECTED_TEXT } from '../http/text.schemas.ts';
import { EnvironmentTag, UserGroupId } from '../user-groups/user-groups.schemas.ts';
import { dashboardFieldSchemas } from '../user-groups/declared-fields.ts';

export const EMBED_TOKEN_MIN_SECONDS = 60;
export const EMBED_TOKEN_MAX_SECONDS = 2_592_000;
export const EMBED_TOKEN_DEFAULT_SECONDS = 86_400;

const embedId = (description: string) =>
  Type.String({
    minLength: 1,
    maxLength: 256,
    pattern: PLAIN_TEXT,
    description: `${description} 1-256 characters, no control characters.`,
    examples: ['sales-overview'],
  });

export const EmbedContextQuery = Type.Object(
  {
    embed_id: Type.Optional(embedId('The dashboard asking. Required (and must match) when the embed token was issued with an embed_id; ignored otherwise.')),
  },
  { additionalProperties: false },
);

/** The fields of the group declared `dashboards: true` (GROUP_FIELDS, user-groups/declared-fields.ts), in their order. */
export const EmbedUserGroup = Type.Object(dashboardFieldSchemas, {
  title: 'EmbedUserGroup',
  additionalProperties: false,
  description: 'What a dashboard may know about the user group viewing it: never a token or an internal id.',
});

/** Limits of a viewer (docs/api.md, "The viewer"): what a dashboard needs of a person, and small enough for a header. */
export const VIEWER_MAX_ATTRIBUTES = 50;
const VIEWER_MAX_PERMISSIONS = 50;
const VIEWER_ATTRIBUTE_MAX_CHARS = 1024;

const ViewerAttributes = Type.Unsafe<Record<string, string | number | boolean>>({
  title: 'ViewerAttributes',
  type: 'object',
  maxProperties: VIEWER_MAX_ATTRIBUTES,
  propertyNames: { minLength: 1, maxLength: 64, pattern: PLAIN_TEXT },
  // A value is signed into the token and handed to data APIs as given (a NUL breaks PostgreSQL's jsonb): no control or bidirectional control characters.
  additionalProperties: { type: ['string', 'number', 'boolean'], maxLength: VIEWER_ATTRIBUTE_MAX_CHARS, pattern: UNDIRECTED_TEXT },
  description: `What your dashboard and data API filter by, such as \`region\`: at most ${VIEWER_MAX_ATTRIBUTES} keys of 1-64 characters (plain text), each a string (at most ${VIEWER_ATTRIBUTE_MAX_CHARS} characters, no control or bidirectional control characters), a number or a boolean; no nesting, no null. A name the service uses is refused (\`400 validation_failed\`, issue \`reserved\`), in any case: \`iss\`, \`sub\`, \`aud\`, \`exp\`, \`nbf\`, \`iat\`, \`jti\`, any \`ugs_\` name, \`user_group_id\`, \`user_group_name\`, \`viewer_id\`, \`viewer_attributes\`. In the variables they are \`viewer_attributes\`, apart from the group's properties, which they never replace.`,
  examples: [{ region: 'emea', max_discount: 0.15, can_export: true }],
});

/** The person viewing, as the caller describes them; the token carries it as given (claim `ugs_viewer`). */
export const EmbedViewer = Type.Object(
  {
    id: Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: NOT_BLANK_PLAIN_TEXT,
      description: 'Your id for the person: 1-255 characters, no control characters, not only white space. Becomes the `viewer_id` variable.',
      examples: ['user_8812'],
    }),
    email: Type.Optional(Text({ maxLength: 254, format: 'email', description: 'At most 254 characters.', examples: ['ada@example.com'] })),
    name: Type.Optional(
      Type.String({ minLength: 1, maxLength: 256, pattern: PLAIN_TEXT, description: 'Display name: 1-256 characters.', examples: ['Ada Lovelace'] }),
    ),
    time_zone: Type.Optional(
      Text({
        maxLength: 64,
        format: 'iana-time-zone',
        description: 'An IANA time zone name, spelled as the database spells it (`Europe/Paris`, `UTC`); an offset such as `+01:00` is refused.',
        examples: ['Europe/London'],
      }),
    ),
    permissions: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64, pattern: PLAIN_TEXT }), {
        maxItems: VIEWER_MAX_PERMISSIONS,
        description: `Short strings your dashboard interprets (the service gives them no meaning): at most ${VIEWER_MAX_PERMISSIONS}, each 1-64 characters, kept in the order given.`,
        examples: [['view_orders', 'export_csv']],
      }),
    ),
    attributes: Type.Optional(ViewerAttributes),
  },
  {
    title: 'EmbedViewer',
    additionalProperties: false,
    description:
      "The person viewing, within the user group (`id` required). An embed token issued with one carries it as the claim `ugs_viewer`, exactly as given (absent fields stay absent; `sub` still names the group); its variables gain `viewer_id` and `viewer_attributes` (the viewer's `attributes`), and the group's properties stay as the group has them. `GET /api/embed/context` and introspection answer it as `viewer` and `ugs_viewer`; both leave it out for a token without one.",
  },
);
export type EmbedViewerClaim = Static<typeof EmbedViewer>;

export const EmbedContextResponse = Type.Object(
  {
    success: Type.Literal(1),
    user_group: EmbedUserGroup,
    // Absent for a user group token and for an embed token issued without a viewer.
    viewer: Type.Optional(EmbedViewer),
    variables: Type.Unsafe<Record<string, unknown>>({
      type: 'object',
      additionalProperties: true,
      description:
        "`user_group_id` and `user_group_name` (and, for a token with a viewer, `viewer_id` and `viewer_attributes`: the viewer's `attributes`, when given), then every top-level key of `computed_properties` (the group's own properties over its ancestors'). On a name clash the built-ins win; a viewer's attribute never replaces a property.",
      examples: [{ user_group_id: 'example_1', user_group_name: 'Example 1', viewer_id: 'user_8812', viewer_attributes: { team: 'north' }, region: 'emea' }],
    }),
  },
  { title: 'EmbedContext' },
);

export const EmbedTokenBody = Type.Object(
  {
    user_group_id: UserGroupId,
    api_environment_tag: Type.Optional(EnvironmentTag),
    expires_in_seconds: Type.Optional(
      Type.Integer({
        minimum: EMBED_TOKEN_MIN_SECONDS,
        maximum: EMBED_TOKEN_MAX_SECONDS,
        description: `Lifetime in seconds, ${EMBED_TOKEN_MIN_SECONDS}-${EMBED_TOKEN_MAX_SECONDS} (default ${EMBED_TOKEN_DEFAULT_SECONDS}).`,
      }),
    ),
    embed_id: Type.Optional(embedId('Limit the token to one dashboard: the context request must send the same `embed_id` query parameter.')),
    origin: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 2048,
        description:
          'Limit the token to one browser origin (`scheme://host[:port]`, as browsers send it in the `Origin` header): requests without that exact Origin are refused.',
        examples: ['https://app.example.com'],
      }),
    ),
    viewer: Type.Optional(EmbedViewer),
  },
  {
    title: 'EmbedTokenRequest',
    additionalProperties: false,
    examples: [
      { user_group_id: 'example_1', expires_in_seconds: 3600, embed_id: 'sales-overview', origin: 'https://app.example.com' },
      {
        user_group_id: 'example_1',
        expires_in_seconds: 900,
        viewer: {
          id: 'user_8812',
          email: 'ada@example.com',
          name: 'Ada Lovelace',
          time_zone: 'Europe/London',
          permissions: ['view_orders'],
          attributes: { region: 'emea' },
        },
      },
    ],
  },
);
export type EmbedTokenInput = Static<typeof EmbedTokenBody>;

export const EmbedTokenResponse = Type.Object(
  {
    success: Type.Literal(1),
    embed_token: Type.String({
      description:
        'A compact JWS signed with ES256 (the default), RS256 or EdDSA, verifiable by anyone with the keys at `/.well-known/jwks.json`. Send it as `Authorization: Bearer <embed_token>` to `/api/embed/context`, or to your own data API.',
    }),
    expires_at: Type.String({ format: 'date-time' }),
  },
  { title: 'EmbedToken' },
);
export type EmbedTokenView = Static<typeof EmbedTokenResponse>;

export const IntrospectionBody = Type.Object(
  {
    token: Type.String({ minLength: 1, maxLength: 16_384, description: 'The embed token to look at.' }),
    token_type_hint: Type.Optional(Type.String({ maxLength: 64, description: 'Accepted and ignored (RFC 7662): only embed tokens are introspected here.' })),
  },
  { title: 'IntrospectionRequest', additionalProperties: false, examples: [{ token: 'eyJhbGciOiJFZERTQSIs…' }] },
);

const claim = (schema: Parameters<typeof Type.Optional>[0]) => Type.Optional(schema);
export const IntrospectionResponse = Type.Object(
  {
    success: Type.Literal(1),
    active: Type.Boolean({
      description:
        "Whether the token is valid now: signed by a published key, not expired, its group neither deleted nor rotated since, and of this API token's account and environments. When false, nothing else is said.",
    }),
    iss: claim(Type.String()),
    sub: claim(
      Type.String({
        description:
          'The subject: `<account>:<environment>:<user_group_id>`, one group of one account and environment (docs/api.md, "The subject"). A token issued before subjects named the tenant: the user_group_id alone.',
      }),
    ),
    aud: claim(Type.String({ description: 'The embed_id the token is bound to, else the default audience (UGS_EMBED_AUDIENCE).' })),
    exp: claim(Type.Integer()),
    iat: claim(Type.Integer()),
    nbf: claim(Type.Integer()),
    jti: claim(Type.String()),
    ugs_account: claim(Type.String()),
    ugs_environment: claim(EnvironmentTag),
    ugs_user_group_id: claim(Type.String({ description: 'The user_group_id, as given (absent from tokens issued before subjects named the tenant).' })),
    ugs_team_id: claim(Type.Integer()),
    ugs_generation: claim(Type.Integer()),
    ugs_origin: claim(Type.String()),
    ugs_variables: claim(Type.Unsafe<Record<string, unknown>>({ type: 'object', additionalProperties: true })),
    ugs_viewer: claim(EmbedViewer),
  },
  {
    title: 'Introspection',
    additionalProperties: true,
    description: 'RFC 7662: `active`, and when active the claims the token carries (docs/api.md, "Embed tokens", "Claims").',
    examples: [
      { success: 1, active: false },
      {
        success: 1,
        active: true,
        iss: 'https://ugs.example.com',
        sub: 'default:Customer:example_1',
        aud: 'ugs:embed',
        exp: 1767225600,
        iat: 1767222000,
        nbf: 1767222000,
        jti: 'kq3yX1d2cV0uGx9Zq8m2Ew',
        ugs_account: 'default',
        ugs_environment: 'Customer',
        ugs_user_group_id: 'example_1',
        ugs_team_id: 42,
        ugs_generation: 1,
        ugs_variables: { user_group_id: 'example_1', user_group_name: 'Example 1', region: 'emea' },
      },
    ],
  },
);

const keyFields = {
  kid: Type.String({ description: 'Its JWK thumbprint (RFC 7638), named by the `kid` of the tokens it signed.' }),
  use: Type.Literal('sig'),
};

export const PublicJwk = Type.Union(
  [
    Type.Object(
      {
        kty: Type.Literal('EC'),
        crv: Type.Literal('P-256'),
        x: Type.String({ description: 'The public point, base64url.' }),
        y: Type.String(),
        ...keyFields,
        alg: Type.Literal('ES256'),
      },
      { title: 'PublicEcJwk', additionalProperties: false },
    ),
    Type.Object(
      {
        kty: Type.Literal('RSA'),
        e: Type.String({ description: 'The public exponent, base64url.' }),
        n: Type.String({ description: 'The modulus (2048 bits or more), base64url.' }),
        ...keyFields,
        alg: Type.Literal('RS256'),
      },
      { title: 'PublicRsaJwk', additionalProperties: false },
    ),
    Type.Object(
      {
        kty: Type.Literal('OKP'),
        crv: Type.Literal('Ed25519'),
        x: Type.String({ description: 'The public key, base64url.' }),
        ...keyFields,
        alg: Type.Literal('EdDSA'),
      },
      { title: 'PublicOkpJwk', additionalProperties: false },
    ),
  ],
  { title: 'PublicJwk', description: 'A public key: ES256 (P-256), RS256 (RSA) or EdDSA (Ed25519), always with `kid`, `alg` and `use`.' },
);

export const JwksResponse = Type.Object(
  { keys: Type.Array(PublicJwk) },
  {
    title: 'JsonWebKeySet',
    description:
      "RFC 7517: every key that signs now, will sign, or signed a token that may still be valid, of any of the three algorithms; a verifier picks the one the token's `kid` names.",
    examples: [
      {
        keys: [
          {
            kty: 'EC',
            crv: 'P-256',
            x: 'vmmFu_3Sx093PxYQjFzfrq4-10fTyJMbW5i8Z9-U4rE',
            y: '7Ia_A074ZgHGC-EhInYktfGZipkBM_Tvf4gqTXxh1q0',
            kid: 'bIkzhf-vL2q1-MjlsZtYrdIjPF84v3_GsIO54Xutk14',
            alg: 'ES256',
            use: 'sig',
          },
          {
            kty: 'OKP',
            crv: 'Ed25519',
            x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo',
            kid: 'kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k',
            alg: 'EdDSA',
            use: 'sig',
          },
        ],
      },
    ],
  },
);

export const DiscoveryResponse = Type.Object(
  {
    issuer: Type.String({ description: 'UGS_PUBLIC_URL: the `iss` of every embed token.', examples: ['https://ugs.example.com'] }),
    jwks_uri: Type.String({
      description: 'Where the keys are: `<issuer>/.well-known/jwks.json`.',
      examples: ['https://ugs.example.com/.well-known/jwks.json'],
    }),
    id_token_signing_alg_values_supported: Type.Array(Type.Union([Type.Literal('ES256'), Type.Literal('RS256'), Type.Literal('EdDSA')]), {
      description:
        "The algorithms of the published keys, the signing key's first: what an embed token may be signed with now. Named as OpenID Connect names it, because that is where verifiers read it; the service issues no ID token.",
    }),
  },
  {
    title: 'EmbedTokenDiscovery',
    additionalProperties: false,
    description:
      'The metadata a verifier configured with only the issuer reads (OpenID Connect Discovery 1.0 and RFC 8414 field names) to find the keys. This is not a login provider: no authorization, token or userinfo endpoint.',
  },
);
export type DiscoveryView = Static<typeof DiscoveryResponse>;
