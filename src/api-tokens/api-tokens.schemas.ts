// API tokens over HTTP, declared once: validation, the response allow-list (a listing can
// never carry a token value or its hash) and the OpenAPI document (docs/api.md, "API tokens
// over HTTP").
import { Type, type Static } from 'typebox';
import { PLAIN_TEXT } from '../http/text.schemas.ts';
import { ActorField, EnvironmentTag } from '../user-groups/user-groups.schemas.ts';

const API_TOKEN_MIN_SECONDS = 60;
const API_TOKEN_MAX_SECONDS = 315_360_000; // ten years

const ScopeName = Type.Enum(['read', 'write', 'admin'], {
  title: 'Scope',
  type: 'string',
  description: "`read`: lookups, listing, history, embed tokens. `write`: everything on user groups (includes read). `admin`: this account's API tokens.",
});

const NullableEnvironment = Type.Union([EnvironmentTag, Type.Null()]);

export const ApiToken = Type.Object(
  {
    id: Type.Integer({ examples: [7] }),
    name: Type.Union([Type.String(), Type.Null()], { examples: ['reporting backend'] }),
    token_start: Type.String({ description: 'The first characters of the token, to recognize it; never enough to use it.', examples: ['ugs_api_4Fq2'] }),
    scopes: Type.Array(ScopeName, { examples: [['read', 'write']] }),
    allowed_environment: Type.Union([EnvironmentTag, Type.Null()], { description: 'The only environment the token may use; null for both.' }),
    default_environment: EnvironmentTag,
    status: Type.Enum(['active', 'expired', 'revoked'], { type: 'string' }),
    expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
  },
  { title: 'ApiToken', additionalProperties: false, description: 'An API token as listed: never its value.' },
);
export type ApiTokenJson = Static<typeof ApiToken>;

export const CreateApiTokenBody = Type.Object(
  {
    name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        pattern: PLAIN_TEXT,
        description: 'What the token is for, 1-100 characters.',
        examples: ['reporting backend'],
      }),
    ),
    scopes: Type.Array(ScopeName, { minItems: 1, uniqueItems: true, description: 'Only scopes the creating token has itself.' }),
    allowed_environment: Type.Optional(
      Type.Unsafe<'Customer' | 'Testing' | null>({
        ...NullableEnvironment,
        description:
          "The only environment the new token may use, or null for both. Absent: the creating token's own restriction, which a restricted token cannot lift.",
      }),
    ),
    default_environment: Type.Optional(Type.Unsafe<'Customer' | 'Testing'>({ ...EnvironmentTag, description: 'Absent: allowed_environment, else Customer.' })),
    expires_in_seconds: Type.Optional(
      Type.Integer({
        minimum: API_TOKEN_MIN_SECONDS,
        maximum: API_TOKEN_MAX_SECONDS,
        description: "Lifetime, 60 s to ten years. Absent: the creating token's own expiry (none if it has none). Never beyond the creating token's expiry.",
      }),
    ),
  },
  { title: 'CreateApiTokenRequest', additionalProperties: false, examples: [{ name: 'reporting backend', scopes: ['read'], allowed_environment: 'Customer' }] },
);

export const CreatedApiTokenResponse = Type.Object(
  {
    success: Type.Literal(1),
    token: Type.String({ description: 'The token value: shown this once, stored only as a hash.', examples: ['ugs_api_…'] }),
    api_token: ApiToken,
  },
  { title: 'CreatedApiToken' },
);

export const ApiTokenListResponse = Type.Object({ success: Type.Literal(1), api_tokens: Type.Array(ApiToken) }, { title: 'ApiTokenList' });

export const CurrentApiTokenResponse = Type.Object(
  {
    success: Type.Literal(1),
    account: Type.String({ description: "The slug of the token's account.", examples: ['acme'] }),
    api_token: ApiToken,
  },
  { title: 'CurrentApiToken' },
);

export const RevokedApiTokenResponse = Type.Object({ success: Type.Literal(1), api_token: ApiToken }, { title: 'RevokedApiToken' });

export const ApiTokenIdParams = Type.Object(
  { id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'The id of the API token.', examples: [7] }) },
  { additionalProperties: false },
);

export const ApiTokenHistoryQuery = Type.Object(
  { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100, description: 'At most this many entries, 1-500 (default 100).' })) },
  { additionalProperties: false },
);

export const ApiTokenHistoryEntry = Type.Object(
  {
    id: Type.Integer(),
    action: Type.Enum(['api_token.issue', 'api_token.revoke'], { type: 'string' }),
    api_token_id: Type.Integer({ description: 'The token issued or revoked.' }),
    actor: ActorField,
    actor_token_id: Type.Union([Type.Integer(), Type.Null()], {
      description: 'The API token that acted (actor api_token); null for the others.',
    }),
    request_id: Type.Union([Type.String(), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
  },
  { title: 'ApiTokenHistoryEntry', additionalProperties: false },
);

export const ApiTokenHistoryResponse = Type.Object({ success: Type.Literal(1), entries: Type.Array(ApiTokenHistoryEntry) }, { title: 'ApiTokenHistory' });
