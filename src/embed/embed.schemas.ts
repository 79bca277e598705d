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
    embed_token: Type.String({ description: 'A compact JWS (HS256). Send it as `Authorization: Bearer <embed_token>` to `/api/embed/context`.' }),
    expires_at: Type.String({ format: 'date-time' }),
  },
  { title: 'EmbedToken' },
);
export type EmbedTokenView = Static<typeof EmbedTokenResponse>;
