// The operations of /api/user, /api/users and /api/user/history as the OpenAPI document
// describes them (docs/api.md, "Operations"): what each takes, answers and may refuse. The
// routes (user-groups.routes.ts) attach them; validation, types and the document all come
// from here and from the schemas beside it.
import { AUTH_ERRORS, BODY_ERRORS, errorResponses } from '../http/envelope.schemas.ts';
import {
  DeletedResponse,
  GetOrCreateResponse,
  GetUserBody,
  GetUserQuery,
  HistoryQuery,
  HistoryResponse,
  ListQuery,
  ListResponse,
  PostUserBody,
  PutUserBody,
  UserGroupKey,
  UserGroupKeyQuery,
  UserGroupResponse,
} from './user-groups.schemas.ts';

const tags = ['User groups'];
const security = [{ apiToken: [] }];

const getOrCreateDescription = [
  'Identify the group by JSON body (as in the seed), by query string (`?user_group_id=…&name=…&api_environment_tag=…`),',
  'or send `POST /api/user` with header `X-HTTP-Method-Override: GET` and a JSON body. Body and query together: `400 ambiguous_request`.',
  'Exists: `200`, `new_user_group: false`, nothing modified even if the name or properties differ.',
  'Missing: created from the given fields, `201`, `new_user_group: true` (needs the write scope: `403 insufficient_scope` otherwise).',
].join(' ');

const getOrCreateResponses = {
  200: GetOrCreateResponse,
  201: GetOrCreateResponse,
  ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, 'ambiguous_request'),
};

const getOrCreate = {
  tags,
  operationId: 'getOrCreateUserGroup',
  summary: 'Get a user group, creating it if it does not exist',
  description: getOrCreateDescription,
  security,
  querystring: GetUserQuery,
  response: getOrCreateResponses,
};

/** GET /api/user. Its body schema is `x-get-body`: Fastify takes no body schema on GET (see getBodyOf). */
export const getOrCreateOperation = { ...getOrCreate, 'x-get-body': GetUserBody };

/** POST /api/user with X-HTTP-Method-Override: GET: the same operation, hidden from the document. */
export const getOrCreateOverrideOperation = { ...getOrCreate, body: GetUserBody, hide: true };

export const createOrRotateOperation = {
  tags,
  operationId: 'createOrRotateUserGroup',
  summary: 'Create a user group, or rotate its token',
  description: [
    'Without `current_token`: creates the group (`user_group_id` required); `201`, or `409 user_group_exists` with nothing changed.',
    'With `current_token`: rotates that token (send nothing but `current_token` and optionally `grace_period_seconds`, else `400 ambiguous_request`);',
    '`200` with the new token, or `404 token_not_found` if the token is unknown, of another account, or no longer current.',
    'During the grace period the old token still works on the embed side only; a rotation without grace ends every earlier token at once.',
  ].join(' '),
  security,
  body: PostUserBody,
  response: {
    200: { ...UserGroupResponse, description: 'Token rotated.' },
    201: { ...UserGroupResponse, description: 'User group created.' },
    ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, 'ambiguous_request', 'user_group_exists', 'token_not_found'),
  },
};

export const updateOperation = {
  tags,
  operationId: 'updateUserGroup',
  summary: 'Update a user group',
  description:
    'Identified by `user_group_id` (and `api_environment_tag`). Give at least one of `name`, `mapping`, `properties`, `is_demo_group`: given fields replace the stored ones (`null` clears mapping or properties), absent fields stay. Never creates: `404 user_group_not_found`.',
  security,
  body: PutUserBody,
  response: { 200: UserGroupResponse, ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, 'user_group_not_found') },
};

export const deleteOperation = {
  tags,
  operationId: 'deleteUserGroup',
  summary: 'Delete a user group',
  description:
    'Identified by JSON body or query string (`user_group_id`, `api_environment_tag`). Its tokens stop working at once. Answers the deleted group without its token. Creating the same id later gives a new team_id and token.',
  security,
  body: UserGroupKey,
  querystring: UserGroupKeyQuery,
  response: { 200: DeletedResponse, ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, 'ambiguous_request', 'user_group_not_found') },
};

export const listOperation = {
  tags,
  operationId: 'listUserGroups',
  summary: 'List user groups',
  description:
    'One environment at a time, in creation order (keyset pagination on team_id: stable under concurrent inserts, the same cost at any depth). Tokens are not included: fetch a group to get its token. `q` keeps the groups whose user_group_id or name starts with it.',
  security,
  querystring: ListQuery,
  response: { 200: ListResponse, ...errorResponses(...AUTH_ERRORS, 'validation_failed') },
};

export const historyOperation = {
  tags,
  operationId: 'getUserGroupHistory',
  summary: 'The change history of a user group, newest first',
  description: 'Every create, update (with the changed fields), rotate and delete of groups with this user_group_id. Never holds a token.',
  security,
  querystring: HistoryQuery,
  response: { 200: HistoryResponse, ...errorResponses(...AUTH_ERRORS, 'validation_failed') },
};
