// Request and response types, derived from the server's own TypeBox schemas (type-only
// imports: nothing of the server reaches the client at run time), so the client cannot
// drift from what the server validates and sends.
import type { Static } from 'typebox';
import type * as UserGroups from '../../../src/user-groups/user-groups.schemas.ts';
import type * as Embed from '../../../src/embed/embed.schemas.ts';
import type { ErrorCode, ErrorDetail } from '../../../src/errors.ts';

export type { ErrorCode as ApiErrorCode, ErrorDetail };

export type EnvironmentTag = Static<typeof UserGroups.EnvironmentTag>;
export type UserGroupId = Static<typeof UserGroups.UserGroupId>;

type WithId<T> = Omit<T, 'user_group_id'> & { user_group_id: UserGroupId };

// Requests
export type CreateUserGroupParams = Static<typeof UserGroups.UserGroupFieldsBody>;
export type GetOrCreateUserGroupParams = WithId<NonNullable<Static<typeof UserGroups.GetUserBody>>>;
export type UpdateUserGroupParams = Static<typeof UserGroups.PutUserBody>;
type PostUser = Static<typeof UserGroups.PostUserBody>;
export type RotateTokenParams = { current_token: NonNullable<PostUser['current_token']>; grace_period_seconds?: PostUser['grace_period_seconds'] };
export type DeleteUserGroupParams = WithId<Static<typeof UserGroups.UserGroupKey>>;
export type ListUserGroupsParams = Static<typeof UserGroups.ListQuery>;
export type UserGroupHistoryParams = WithId<Static<typeof UserGroups.HistoryQuery>>;
export type CreateEmbedTokenParams = Static<typeof Embed.EmbedTokenBody>;
export type EmbedContextParams = Static<typeof Embed.EmbedContextQuery>;

// Responses (the whole JSON body, as the server sends it)
export type UserGroup = Static<typeof UserGroups.UserGroup>;
export type UserGroupWithoutToken = Static<typeof UserGroups.UserGroupPublic>;
export type UserGroupResponse = Static<typeof UserGroups.UserGroupResponse>;
export type GetOrCreateUserGroupResponse = Static<typeof UserGroups.GetOrCreateResponse>;
export type DeleteUserGroupResponse = Static<typeof UserGroups.DeletedResponse>;
export type ListUserGroupsResponse = Static<typeof UserGroups.ListResponse>;
export type UserGroupHistoryResponse = Static<typeof UserGroups.HistoryResponse>;
export type HistoryEntry = Static<typeof UserGroups.HistoryEntry>;
export type EmbedTokenResponse = Static<typeof Embed.EmbedTokenResponse>;
export type EmbedContextResponse = Static<typeof Embed.EmbedContextResponse>;
