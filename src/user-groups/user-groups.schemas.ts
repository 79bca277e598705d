// The user group API's schemas, declared once: they validate requests, shape (and
// allow-list) responses, give the handlers their types and write the OpenAPI document.
import { Type, type Static } from 'typebox';
import { PLAIN_TEXT } from '../http/text.schemas.ts';
import {
  EnvironmentTag,
  HierarchyLevelName,
  TagReference,
  UserGroupId,
  UserGroupIdInteger,
  UserGroupIdString,
  queryFieldSchemas,
  requestFieldSchemas,
  responseFieldSchemas,
} from './declared-fields.ts';
import { ACTOR_KINDS } from '../audit/actor.ts';

// A group's fields and their values are declared in declared-fields.ts; the bodies and answers
// below compose them.
export { EnvironmentTag, GroupTags, Mapping, Name, ParentUserGroupId, Properties, Tag, TagReference, UserGroupId } from './declared-fields.ts';

/** Who acted, in a history entry (docs/api.md, "GET /api/user/history"). */
export const ActorField = Type.Enum([...ACTOR_KINDS], {
  type: 'string',
  description:
    'Who acted: `api_token` (actor_token_id says which), `command_line` (ugs), `first_start` (the first start on an empty database issued the first API token) or `service` (its own work, such as disabling a failing webhook endpoint).',
});

export const UserGroupFieldsBody = Type.Object({ user_group_id: UserGroupId, ...requestFieldSchemas }, { additionalProperties: false });
/** What the operations take about a group: its id, and what a request may say about it. */
export type UserGroupInput = Static<typeof UserGroupFieldsBody>;

/** POST /api/user: create (no current_token) or rotate (current_token). */
export const PostUserBody = Type.Object(
  {
    user_group_id: Type.Optional(UserGroupId),
    ...requestFieldSchemas,
    current_token: Type.Optional(
      Type.String({ minLength: 1, maxLength: 512, description: 'Rotate: the user group token to replace. Send with nothing but grace_period_seconds.' }),
    ),
    grace_period_seconds: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 86400, description: 'Rotate: how long the old token keeps working on the embed side (default 0).' }),
    ),
  },
  {
    title: 'CreateOrRotateRequest',
    additionalProperties: false,
    examples: [
      { user_group_id: 'example_1', name: 'Example 1', properties: { region: 'emea' }, api_environment_tag: 'Customer' },
      { user_group_id: 'globex:jane', parent_user_group_id: 'globex', hierarchy_level: 'User', group_tags: ['beta'], properties: { plan: 'trial' } },
      { current_token: 'ugs_grp_…', grace_period_seconds: 300 },
    ],
  },
);

/** GET /api/user identification by query string, for clients that cannot send a GET body: the id and the fields declared byQuery. */
export const GetUserQuery = Type.Object({ user_group_id: Type.Optional(UserGroupIdString), ...queryFieldSchemas }, { additionalProperties: false });

export const GetUserBody = Type.Optional(
  Type.Object(
    { user_group_id: Type.Optional(UserGroupId), ...requestFieldSchemas },
    {
      title: 'GetOrCreateRequest',
      additionalProperties: false,
      examples: [
        { user_group_id: 'example_1', name: 'Example 1', properties: { region: 'emea' } },
        { user_group_id: 'globex:jane', parent_user_group_id: 'globex', properties: { plan: 'trial' } },
      ],
    },
  ),
);

export type GetUserBodyInput = NonNullable<Static<typeof GetUserBody>>;

export const PutUserBody = Type.Object(
  {
    user_group_id: UserGroupId,
    new_user_group_id: Type.Optional(
      Type.Union([UserGroupIdString, UserGroupIdInteger], {
        description: 'Rename: the new user_group_id. The group keeps its token, team_id, children and history.',
        examples: ['example_1_renamed'],
      }),
    ),
    ...requestFieldSchemas,
  },
  {
    title: 'UpdateUserGroupRequest',
    additionalProperties: false,
    examples: [
      { user_group_id: 'example_1', properties: { region: 'apac' } },
      { user_group_id: 'jane', parent_user_group_id: 'acme', hierarchy_level: 'User', group_tags: ['beta'] },
      { user_group_id: 'example_1', new_user_group_id: 'example_1_renamed' },
    ],
  },
);
export type PutUser = Static<typeof PutUserBody>;
/** What a PUT may change: every field of its body but those that name the group. */
export const UPDATABLE_FIELDS = Object.keys(PutUserBody.properties).filter((field) => field !== 'user_group_id' && field !== 'api_environment_tag');
/** What a PUT clears with `null`: the updatable fields whose request schema takes null, in the declaration's order. */
export const CLEARED_BY_NULL = UPDATABLE_FIELDS.filter((field) =>
  ((PutUserBody.properties as Record<string, { anyOf?: { type?: string }[] }>)[field].anyOf ?? []).some((branch) => branch.type === 'null'),
);

/** Identifies one user group (DELETE, history): by body or by query string. */
const Cascade = Type.Boolean({
  description: 'DELETE: also delete every descendant, in one transaction. Without it, a group that has children is not deleted.',
});

export const UserGroupKey = Type.Object(
  {
    user_group_id: Type.Optional(UserGroupId),
    api_environment_tag: Type.Optional(EnvironmentTag),
    cascade: Type.Optional(Cascade),
  },
  { title: 'UserGroupKey', additionalProperties: false },
);
export type UserGroupKeyInput = Static<typeof UserGroupKey>;
export const UserGroupKeyQuery = Type.Object(
  {
    user_group_id: Type.Optional(UserGroupIdString),
    api_environment_tag: Type.Optional(EnvironmentTag),
    cascade: Type.Optional(Cascade),
  },
  { additionalProperties: false },
);

/** GET /api/user/lookup: which group. By query string, as every id can be (a path could not hold "." or ".."). */
export const LookupQuery = Type.Object(
  { user_group_id: UserGroupIdString, api_environment_tag: Type.Optional(EnvironmentTag) },
  { additionalProperties: false },
);

export const HistoryQuery = Type.Object(
  {
    user_group_id: UserGroupIdString,
    api_environment_tag: Type.Optional(EnvironmentTag),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
  },
  { additionalProperties: false },
);

export const ListQuery = Type.Object(
  {
    api_environment_tag: Type.Optional(EnvironmentTag),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, description: 'Page size, 1-500 (default 100).' })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The next_cursor of the previous page.' })),
    q: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 256,
        pattern: PLAIN_TEXT,
        description: 'Only groups whose user_group_id or name starts with this (case-sensitive).',
      }),
    ),
    parent_user_group_id: Type.Optional(Type.Unsafe<string>({ ...UserGroupIdString, description: 'Only the children of this group.' })),
    tag: Type.Optional(Type.Unsafe<string>({ ...TagReference, description: 'Only groups with this tag: the tag spelled so, else its NFC form.' })),
    hierarchy_level: Type.Optional(Type.Unsafe<string>({ ...HierarchyLevelName, description: 'Only groups of this level.' })),
  },
  { additionalProperties: false },
);

export const UserGroupPublic = Type.Object(responseFieldSchemas, {
  title: 'UserGroupWithoutToken',
  additionalProperties: false,
  description: 'A user group, without its token.',
});

export const UserGroup = Type.Object(
  {
    team_id: responseFieldSchemas.team_id,
    token: Type.String({
      description: 'The user group token: hand it to the embedded dashboard. Never accepted by the management API.',
      examples: ['ugs_grp_…'],
    }),
    ...Object.fromEntries(Object.entries(responseFieldSchemas).filter(([k]) => k !== 'team_id')),
  } as typeof responseFieldSchemas & { token: ReturnType<typeof Type.String> },
  { title: 'UserGroup', additionalProperties: false, description: 'A user group and its current token.' },
);

export const Success = Type.Literal(1);

export const UserGroupResponse = Type.Object({ success: Success, user_group: UserGroup }, { title: 'UserGroupResponse' });
export const GetOrCreateResponse = Type.Object(
  {
    success: Success,
    new_user_group: Type.Boolean({ description: 'True when this call created the user group.' }),
    user_group: UserGroup,
  },
  { title: 'GetOrCreateResponse' },
);
export const DeletedResponse = Type.Object(
  {
    success: Success,
    user_group: UserGroupPublic,
    deleted_count: Type.Integer({ minimum: 1, description: 'How many groups were deleted: 1, or with cascade=true the group and all its descendants.' }),
  },
  { title: 'DeletedUserGroupResponse' },
);
export const ListResponse = Type.Object(
  {
    success: Success,
    user_groups: Type.Array(UserGroupPublic),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page; null on the last page.' }),
  },
  { title: 'UserGroupList' },
);

export const HistoryEntry = Type.Object(
  {
    id: Type.Integer(),
    action: Type.String({ examples: ['user_group.update'] }),
    team_id: Type.Integer(),
    changed_fields: Type.Union([Type.Array(Type.String()), Type.Null()], { description: 'For updates: the fields whose value changed.' }),
    details: Type.Union([Type.Record(Type.String(), Type.Object({ old: Type.Unknown(), new: Type.Unknown() })), Type.Null()], {
      description: 'The old and new values of user_group_id (rename), parent_user_group_id and group_tags when they changed; null otherwise. Never a token.',
    }),
    actor: ActorField,
    actor_token_id: Type.Union([Type.Integer(), Type.Null()], { description: 'The acting API token (actor api_token); null for the others.' }),
    request_id: Type.Union([Type.String(), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
  },
  { title: 'HistoryEntry' },
);
export const HistoryResponse = Type.Object(
  {
    success: Success,
    provided_id: Type.String(),
    api_environment_tag: EnvironmentTag,
    entries: Type.Array(HistoryEntry),
  },
  { title: 'History' },
);

/** At most this many items per bulk upsert (docs/api.md, "POST /api/users/upsert"). */
export const UPSERT_MAX_ITEMS = 1000;
/** The body limit of a bulk upsert: 1,000 items of about 4 KiB each (the 256 KiB of other routes fits ~60). */
export const UPSERT_BODY_LIMIT_BYTES = 4 * 1024 * 1024;

export const UpsertItem = Type.Object(
  { user_group_id: UserGroupId, ...requestFieldSchemas },
  {
    title: 'UpsertItem',
    additionalProperties: false,
    description: 'The fields of a create. A missing group is created with them; an existing one gets the fields given (absent fields stay, as in PUT).',
  },
);

export const UpsertBody = Type.Object(
  {
    user_groups: Type.Array(UpsertItem, {
      minItems: 1,
      maxItems: UPSERT_MAX_ITEMS,
      description: `1-${UPSERT_MAX_ITEMS} groups, done in order. Each item is checked on its own: a bad item fails alone.`,
    }),
  },
  {
    title: 'UpsertRequest',
    additionalProperties: false,
    examples: [
      {
        user_groups: [
          { user_group_id: 'acme', name: 'ACME', properties: { plan: 'pro' } },
          { user_group_id: 'acme-eu', parent_user_group_id: 'acme' },
        ],
      },
    ],
  },
);

/** What the route itself checks before the items: an object with 1-1,000 objects (each item is checked on its own, by UpsertItem). */
export const UpsertEnvelope = Type.Object(
  { user_groups: Type.Array(Type.Object({}), { minItems: 1, maxItems: UPSERT_MAX_ITEMS }) },
  { additionalProperties: false },
);

export const UpsertResult = Type.Object(
  {
    user_group_id: Type.String({ description: "The item's user_group_id (as text)." }),
    api_environment_tag: EnvironmentTag,
    status: Type.Enum(['created', 'updated', 'unchanged', 'failed'], { type: 'string' }),
    team_id: Type.Optional(Type.Integer({ description: 'Absent for a failed item.' })),
    token: Type.Optional(Type.String({ description: 'The new user group token: for `created` only.' })),
    error: Type.Optional(
      Type.Object(
        { code: Type.String({ description: 'The code a single call would have answered, e.g. parent_not_found.' }), message: Type.String() },
        { description: 'For `failed` only.' },
      ),
    ),
  },
  { title: 'UpsertResult', additionalProperties: false },
);

export const UpsertResponse = Type.Object(
  {
    success: Success,
    results: Type.Array(UpsertResult, { description: 'One per item, in the order of the request.' }),
    counts: Type.Object(
      { created: Type.Integer(), updated: Type.Integer(), unchanged: Type.Integer(), failed: Type.Integer() },
      { additionalProperties: false },
    ),
  },
  { title: 'UpsertResponse' },
);
