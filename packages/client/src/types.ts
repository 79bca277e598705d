// Request and response types, named after the operations. Every one is taken from the
// service's OpenAPI document (./openapi.ts, generated from the server's own schemas by
// `npm run generate:client`), so the client cannot drift from what the server validates and
// answers, and the package needs nothing outside itself.
import type { components, operations } from './openapi.js';

type Schemas = components['schemas'];
type QueryOf<O extends keyof operations> = NonNullable<operations[O]['parameters']['query']>;
type BodyOf<O extends keyof operations> = operations[O] extends { requestBody?: { content: { 'application/json': infer Body } } } ? Body : unknown;
type JsonAnswers<Responses> = {
  [Status in keyof Responses]: Status extends 200 | 201
    ? Responses[Status] extends { content: { 'application/json': infer Answer } }
      ? Answer
      : never
    : never;
}[keyof Responses];

/**
 * What the method of an operation takes, by its operationId: its query parameters and the
 * fields of its JSON body. A method of a new operation is typed by these two, so that its
 * types need no alias of their own (docs/architecture.md, "Adding an operation").
 */
export type ParamsOf<O extends keyof operations> = ([QueryOf<O>] extends [never] ? unknown : QueryOf<O>) & BodyOf<O>;
/** The JSON answer of an operation's success (200 or 201), by its operationId. */
export type AnswerOf<O extends keyof operations> = JsonAnswers<operations[O]['responses']>;
type WithId<T> = Omit<T, 'user_group_id'> & { user_group_id: UserGroupId };

export type ApiErrorCode = Schemas['Error']['error']['code'];
export type ErrorDetail = NonNullable<Schemas['Error']['error']['details']>[number];

export type EnvironmentTag = Schemas['EnvironmentTag'];
export type UserGroupId = Schemas['UserGroupId'];

// Requests
export type CreateUserGroupParams = WithId<Omit<Schemas['CreateOrRotateRequest'], 'current_token' | 'grace_period_seconds'>>;
export type GetOrCreateUserGroupParams = WithId<Schemas['GetOrCreateRequest']>;
export type UpdateUserGroupParams = Schemas['UpdateUserGroupRequest'];
export type UpsertUserGroupsParams = Schemas['UpsertRequest'];
export type RotateTokenParams = Required<Pick<Schemas['CreateOrRotateRequest'], 'current_token'>> &
  Pick<Schemas['CreateOrRotateRequest'], 'grace_period_seconds'>;
export type DeleteUserGroupParams = WithId<Schemas['UserGroupKey']>;
export type ListUserGroupsParams = QueryOf<'listUserGroups'>;
export type UserGroupHistoryParams = QueryOf<'getUserGroupHistory'>;
export type LookupUserGroupParams = QueryOf<'lookupUserGroup'>;
export type CreateEmbedTokenParams = Schemas['EmbedTokenRequest'];
export type EmbedContextParams = QueryOf<'getEmbedContext'>;
export type JwksParams = QueryOf<'getJwks'>;
export type CreateApiTokenParams = Schemas['CreateApiTokenRequest'];
export type ApiTokenHistoryParams = QueryOf<'getApiTokenHistory'>;
export type ListEventsParams = QueryOf<'listEvents'>;
export type CreateWebhookEndpointParams = Schemas['CreateWebhookEndpointRequest'];
export type ListWebhookDeliveriesParams = QueryOf<'listWebhookDeliveries'>;
export type ListGroupTagsParams = QueryOf<'listGroupTags'>;
export type CreateGroupTagParams = Schemas['CreateGroupTagRequest'];
export type RenameGroupTagParams = Schemas['RenameGroupTagRequest'];
export type DeleteGroupTagParams = Required<Pick<Schemas['GroupTagKey'], 'name'>> & Pick<Schemas['GroupTagKey'], 'api_environment_tag'>;

// Responses (the whole JSON body, as the server sends it)
export type UserGroup = Schemas['UserGroup'];
export type UserGroupWithoutToken = Schemas['UserGroupWithoutToken'];
export type UserGroupResponse = Schemas['UserGroupResponse'];
export type GetOrCreateUserGroupResponse = Schemas['GetOrCreateResponse'];
export type DeleteUserGroupResponse = Schemas['DeletedUserGroupResponse'];
export type ListUserGroupsResponse = Schemas['UserGroupList'];
export type UpsertUserGroupsResponse = Schemas['UpsertResponse'];
export type UpsertResult = Schemas['UpsertResult'];
export type UserGroupHistoryResponse = Schemas['History'];
export type HistoryEntry = Schemas['HistoryEntry'];
export type EmbedTokenResponse = Schemas['EmbedToken'];
export type EmbedContextResponse = Schemas['EmbedContext'];
/** The person viewing, within the group: `viewer` of createEmbedToken and getEmbedContext, the claim `ugs_viewer` of an embed token. */
export type EmbedViewer = Schemas['EmbedViewer'];
export type IntrospectionResponse = Schemas['Introspection'];
export type PublicJwk = Schemas['PublicJwk'];
export type EmbedTokenDiscovery = Schemas['EmbedTokenDiscovery'];
export type JsonWebKeySet = Schemas['JsonWebKeySet'];
export type ApiToken = Schemas['ApiToken'];
export type ApiTokenListResponse = Schemas['ApiTokenList'];
export type CreatedApiTokenResponse = Schemas['CreatedApiToken'];
export type RevokedApiTokenResponse = Schemas['RevokedApiToken'];
export type ApiTokenHistoryResponse = Schemas['ApiTokenHistory'];
export type CurrentApiTokenResponse = Schemas['CurrentApiToken'];
export type ListEventsResponse = Schemas['EventFeed'];
export type ChangeEvent = Schemas['ChangeEvent'];
export type WebhookEndpoint = Schemas['WebhookEndpoint'];
export type WebhookEndpointListResponse = Schemas['WebhookEndpointList'];
export type CreatedWebhookEndpointResponse = Schemas['CreatedWebhookEndpoint'];
export type DeletedWebhookEndpointResponse = Schemas['DeletedWebhookEndpoint'];
export type EnabledWebhookEndpointResponse = Schemas['EnabledWebhookEndpoint'];
export type WebhookDeliveriesResponse = Schemas['WebhookDeliveries'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type WebhookTestResponse = Schemas['WebhookTest'];
export type EventType = Schemas['EventType'];
export type GroupTag = Schemas['GroupTag'];
export type ListGroupTagsResponse = Schemas['GroupTagList'];
export type GroupTagResponse = Schemas['GroupTagResponse'];
export type RenamedGroupTagResponse = Schemas['RenamedGroupTag'];
export type DeletedGroupTagResponse = Schemas['DeletedGroupTag'];
