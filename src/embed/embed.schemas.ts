// The embed side's schemas, declared once: validation, response allow-lists (no token can
// reach a response that is serialized from these) and the OpenAPI document.
import { Type, type Static } from 'typebox';
import { PLAIN_TEXT } from '../http/text.schemas.ts';
import { EnvironmentTag, UserGroupId } from '../user-groups/user-groups.schemas.ts';


export const EMBED_TOKEN_MIN_SECONDS = 60;
export const EMBED_TOKEN_MAX_SECONDS = 2_592_000;
export const EMBED_TOKEN_DEFAULT_SECONDS = 86_400;

const embedId = (description: string) =>
  Type.String({ minLength: 1, maxLength: 256, pattern: PLAIN_TEXT, description: `${description} 1-256 characters, no control characters.`, examples: ['sales-overview'] });

export const EmbedContextQuery = Type.Object(
  {
    embed_id: Type.Optional(
      embedId('The dashboard asking. Required (and must match) when the embed token was issued with an embed_id; ignored otherwise.'),
    ),
  },
  { additionalProperties: false },
);
export type EmbedContextQueryInput = Static<typeof EmbedContextQuery>;

const JsonObjectOrNull = <T>() => Type.Union([Type.Unsafe<T>({ type: 'object', additionalProperties: true }), Type.Null()]);

export const EmbedUserGroup = Type.Object(
  {
    provided_id: Type.String({ description: 'The user_group_id.', examples: ['example_1'] }),
    name: Type.String({ examples: ['Example 1'] }),
    api_environment_tag: EnvironmentTag,
    is_demo_group: Type.Boolean({ description: 'Show a demo watermark.' }),
    parent_user_group_id: Type.Union([Type.String(), Type.Null()], { description: "The parent's user_group_id; null for a group without parent." }),
    hierarchy_level: Type.Union([Type.String(), Type.Null()]),
    mapping: JsonObjectOrNull<Record<string, string | number>>(),
    properties: JsonObjectOrNull<Record<string, unknown>>(),
    computed_mapping: JsonObjectOrNull<Record<string, string | number>>(),
    computed_properties: JsonObjectOrNull<Record<string, unknown>>(),
  },
  { title: 'EmbedUserGroup', additionalProperties: false, description: 'What a dashboard may know about the user group viewing it: never a token or an internal id.' },
);

export const EmbedContextResponse = Type.Object(
  {
    success: Type.Literal(1),
    user_group: EmbedUserGroup,
    variables: Type.Unsafe<Record<string, unknown>>({
      type: 'object',
      additionalProperties: true,
      description:
        '`user_group_id` and `user_group_name`, then every top-level key of `computed_properties`: the group\'s own properties over its ancestors\' (on a name clash the two built-ins win).',
      examples: [{ user_group_id: 'example_1', user_group_name: 'Example 1', region: 'emea' }],
    }),
  },
  { title: 'EmbedContext' },
);
export type EmbedContextView = Static<typeof EmbedContextResponse>;

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
    embed_id: Type.Optional(
      embedId('Limit the token to one dashboard: the context request must send the same `embed_id` query parameter.'),
    ),
    origin: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 2048,
        description:
          'Limit the token to one browser origin (`scheme://host[:port]`, as browsers send it in the `Origin` header): requests without that exact Origin are refused.',
        examples: ['https://app.example.com'],
      }),
    ),
  },
  {
    title: 'EmbedTokenRequest',
    additionalProperties: false,
    examples: [{ user_group_id: 'example_1', expires_in_seconds: 3600, embed_id: 'sales-overview', origin: 'https://app.example.com' }],
  },
);
export type EmbedTokenInput = Static<typeof EmbedTokenBody>;

export const EmbedTokenResponse = Type.Object(
  {
    success: Type.Literal(1),
    embed_token: Type.String({
      description:
        'A compact JWS signed with EdDSA (Ed25519), verifiable by anyone with the keys at `/.well-known/jwks.json`. Send it as `Authorization: Bearer <embed_token>` to `/api/embed/context`, or to your own data API.',
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
export type IntrospectionInput = Static<typeof IntrospectionBody>;

const claim = (schema: Parameters<typeof Type.Optional>[0]) => Type.Optional(schema);
export const IntrospectionResponse = Type.Object(
  {
    success: Type.Literal(1),
    active: Type.Boolean({
      description:
        "Whether the token is valid now: signed by a published key, not expired, its group neither deleted nor rotated since, and of this API token's account and environments. When false, nothing else is said.",
    }),
    iss: claim(Type.String()),
    sub: claim(Type.String({ description: 'The user_group_id.' })),
    aud: claim(Type.String({ description: 'The embed_id the token is bound to, else the default audience (UGS_EMBED_AUDIENCE).' })),
    exp: claim(Type.Integer()),
    iat: claim(Type.Integer()),
    nbf: claim(Type.Integer()),
    jti: claim(Type.String()),
    ugs_account: claim(Type.String()),
    ugs_environment: claim(EnvironmentTag),
    ugs_team_id: claim(Type.Integer()),
    ugs_generation: claim(Type.Integer()),
    ugs_origin: claim(Type.String()),
    ugs_variables: claim(Type.Unsafe<Record<string, unknown>>({ type: 'object', additionalProperties: true })),
  },
  {
    title: 'Introspection',
    additionalProperties: true,
    description: 'RFC 7662: `active`, and when active the claims the token carries (docs/api.md, "Embed token claims").',
    examples: [
      { success: 1, active: false },
      {
        success: 1,
        active: true,
        iss: 'https://ugs.example.com',
        sub: 'example_1',
        aud: 'ugs:embed',
        exp: 1767225600,
        iat: 1767222000,
        nbf: 1767222000,
        jti: 'kq3yX1d2cV0uGx9Zq8m2Ew',
        ugs_account: 'default',
        ugs_environment: 'Customer',
        ugs_team_id: 42,
        ugs_generation: 1,
        ugs_variables: { user_group_id: 'example_1', user_group_name: 'Example 1', region: 'emea' },
      },
    ],
  },
);

export const PublicJwk = Type.Object(
  {
    kty: Type.Literal('OKP'),
    crv: Type.Literal('Ed25519'),
    x: Type.String({ description: 'The public key, base64url.' }),
    kid: Type.String({ description: 'Its JWK thumbprint (RFC 7638), named by the `kid` of the tokens it signed.' }),
    alg: Type.Literal('EdDSA'),
    use: Type.Literal('sig'),
  },
  { title: 'PublicJwk', additionalProperties: false },
);

export const JwksResponse = Type.Object(
  { keys: Type.Array(PublicJwk) },
  {
    title: 'JsonWebKeySet',
    description: 'RFC 7517: the keys that verify embed tokens, the key that signs now first among them.',
    examples: [{ keys: [{ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo', kid: 'kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k', alg: 'EdDSA', use: 'sig' }] }],
  },
);
