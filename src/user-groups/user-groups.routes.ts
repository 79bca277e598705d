// /api/user and /api/users: HTTP in, service call, HTTP out. Which mode a request is in
// (create or rotate; body or query string) is decided here; the rules live in the service.
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteShorthandOptions } from 'fastify';
import { AppError, validationFailed } from '../errors.ts';
import { actorOf, principalOf } from '../auth/authenticate.ts';
import { AUTH_ERRORS, BODY_ERRORS, errorResponses } from '../http/envelope.schemas.ts';
import { METHOD_OVERRIDE_CONSTRAINT } from '../http/method-override.ts';
import { getBodyValidator } from '../http/validation.ts';
import { readBodyOfAnyMethod } from '../http/json-body.ts';
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
import {
  createUserGroup,
  getOrCreateUserGroup,
  listUserGroupsPage,
  removeUserGroup,
  rotateUserGroupToken,
  updateUserGroup,
  type UserGroupDeps,
  type UserGroupInput,
} from './user-groups.service.ts';
import { userGroupHistoryEntries } from './user-group-history.service.ts';
import { sendJson } from '../http/json-reply.ts';
import { deletedResponseJson, getOrCreateResponseJson, listResponseJson, userGroupResponseJson } from './user-groups.json.ts';

const TAGS = ['User groups'];
const security = [{ apiToken: [] }];

type Identification = Partial<UserGroupInput>;

/**
 * GET and DELETE identify a group by JSON body or by query string, never both: a request
 * that mixes them could mean two different groups, so it is refused rather than guessed.
 */
function identification(request: FastifyRequest): UserGroupInput {
  const body = (request.body ?? {}) as Identification;
  const query = (request.query ?? {}) as Identification;
  const inBody = Object.keys(body).length > 0;
  const inQuery = Object.keys(query).length > 0;
  if (inBody && inQuery) {
    throw new AppError('ambiguous_request', 'identify the user group in the JSON body or in the query string, not both');
  }
  const source = inBody ? body : query;
  if (source.user_group_id === undefined) throw validationFailed('user_group_id', 'required', 'user_group_id is required');
  return source as UserGroupInput;
}

const ROTATE_FIELDS = new Set(['current_token', 'grace_period_seconds']);

export function registerUserGroupRoutes(app: FastifyInstance, deps: UserGroupDeps): void {
  const getOrCreate: RouteShorthandOptions['schema'] = {
    tags: TAGS,
    operationId: 'getOrCreateUserGroup',
    summary: 'Get a user group, creating it if it does not exist',
    description: [
      'Identify the group by JSON body (as in the seed), by query string (`?user_group_id=…&name=…&api_environment_tag=…`),',
      'or send `POST /api/user` with header `X-HTTP-Method-Override: GET` and a JSON body. Body and query together: `400 ambiguous_request`.',
      'Exists: `200`, `new_user_group: false`, nothing modified even if the name or properties differ.',
      'Missing: created from the given fields, `201`, `new_user_group: true` (needs the write scope: `403 insufficient_scope` otherwise).',
    ].join(' '),
    security,
    querystring: GetUserQuery,
    response: { 200: GetOrCreateResponse, 201: GetOrCreateResponse, ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, 'ambiguous_request') },
  };
  const getOrCreateHandler = async (request: FastifyRequest, reply: FastifyReply) => {
    const { created, group } = await getOrCreateUserGroup(deps, principalOf(request), actorOf(request), identification(request));
    return sendJson(reply, created ? 201 : 200, getOrCreateResponseJson(created, group));
  };

  app.get('/api/user', { schema: { ...getOrCreate, 'x-get-body': GetUserBody }, preValidation: [readBodyOfAnyMethod, getBodyValidator(GetUserBody)] }, getOrCreateHandler);
  app.post(
    '/api/user',
    { schema: { ...getOrCreate, body: GetUserBody, hide: true }, constraints: { [METHOD_OVERRIDE_CONSTRAINT]: 'GET' }, preValidation: readBodyOfAnyMethod },
    getOrCreateHandler,
  );

  app.post(
    '/api/user',
    {
      schema: {
        tags: TAGS,
        operationId: 'createOrRotateUserGroup',
        summary: 'Create a user group, or rotate its token',
        description: [
          'Without `current_token`: creates the group (`user_group_id` required); `201`, or `409 user_group_exists` with nothing changed.',
          'With `current_token`: rotates that token (send nothing but `current_token` and optionally `grace_period_seconds`, else `400 ambiguous_request`);',
          '`200` with the new token, or `404 token_not_found` if the token is unknown, of another account, or no longer current.',
          'During the grace period the old token still works on the embed side only.',
        ].join(' '),
        security,
        body: PostUserBody,
        response: {
          200: { ...UserGroupResponse, description: 'Token rotated.' },
          201: { ...UserGroupResponse, description: 'User group created.' },
          ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, 'ambiguous_request', 'user_group_exists', 'token_not_found'),
        },
      },
    },
    async (request, reply) => {
      const body = request.body as Record<string, unknown> & UserGroupInput & { current_token?: string; grace_period_seconds?: number };
      if (body.current_token !== undefined) {
        const extra = Object.keys(body).filter((field) => !ROTATE_FIELDS.has(field));
        if (extra.length > 0) {
          throw new AppError('ambiguous_request', `a rotation (current_token) takes only current_token and grace_period_seconds, not ${extra.join(', ')}`, {
            details: extra.map((field) => ({ field, issue: 'not_allowed_with_current_token' })),
          });
        }
        const rotated = await rotateUserGroupToken(deps, principalOf(request), actorOf(request), {
          current_token: body.current_token,
          grace_period_seconds: body.grace_period_seconds,
        });
        return sendJson(reply, 200, userGroupResponseJson(rotated));
      }
      if (body.grace_period_seconds !== undefined) {
        throw new AppError('ambiguous_request', 'grace_period_seconds belongs to a rotation: send it with current_token', {
          details: [{ field: 'grace_period_seconds', issue: 'requires_current_token' }],
        });
      }
      if (body.user_group_id === undefined) throw validationFailed('user_group_id', 'required', 'user_group_id is required');
      const created = await createUserGroup(deps, principalOf(request), actorOf(request), body);
      return sendJson(reply, 201, userGroupResponseJson(created));
    },
  );

  app.put(
    '/api/user',
    {
      schema: {
        tags: TAGS,
        operationId: 'updateUserGroup',
        summary: 'Update a user group',
        description:
          'Identified by `user_group_id` (and `api_environment_tag`). Give at least one of `name`, `mapping`, `properties`, `is_demo_group`: given fields replace the stored ones (`null` clears mapping or properties), absent fields stay. Never creates: `404 user_group_not_found`.',
        security,
        body: PutUserBody,
        response: { 200: UserGroupResponse, ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, 'user_group_not_found') },
      },
    },
    async (request, reply) => {
      const updated = await updateUserGroup(deps, principalOf(request), actorOf(request), request.body as UserGroupInput);
      return sendJson(reply, 200, userGroupResponseJson(updated));
    },
  );

  app.delete(
    '/api/user',
    {
      schema: {
        tags: TAGS,
        operationId: 'deleteUserGroup',
        summary: 'Delete a user group',
        description:
          'Identified by JSON body or query string (`user_group_id`, `api_environment_tag`). Its tokens stop working at once. Answers the deleted group without its token. Creating the same id later gives a new team_id and token.',
        security,
        body: UserGroupKey,
        querystring: UserGroupKeyQuery,
        response: { 200: DeletedResponse, ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, 'ambiguous_request', 'user_group_not_found') },
      },
      preValidation: readBodyOfAnyMethod,
    },
    async (request, reply) => {
      const deleted = await removeUserGroup(deps, principalOf(request), actorOf(request), identification(request));
      return sendJson(reply, 200, deletedResponseJson(deleted));
    },
  );

  app.get(
    '/api/users',
    {
      schema: {
        tags: TAGS,
        operationId: 'listUserGroups',
        summary: 'List user groups',
        description:
          'One environment at a time, in creation order (keyset pagination on team_id: stable under concurrent inserts, the same cost at any depth). Tokens are not included: fetch a group to get its token.',
        security,
        querystring: ListQuery,
        response: { 200: ListResponse, ...errorResponses(...AUTH_ERRORS, 'validation_failed') },
      },
    },
    async (request, reply) => {
      const page = await listUserGroupsPage(deps, principalOf(request), request.query as never);
      return sendJson(reply, 200, listResponseJson(page.rows, page.nextCursor));
    },
  );

  app.get(
    '/api/user/history',
    {
      schema: {
        tags: TAGS,
        operationId: 'getUserGroupHistory',
        summary: 'The change history of a user group, newest first',
        description: 'Every create, update (with the changed fields), rotate and delete of groups with this user_group_id. Never holds a token.',
        security,
        querystring: HistoryQuery,
        response: { 200: HistoryResponse, ...errorResponses(...AUTH_ERRORS, 'validation_failed') },
      },
    },
    async (request) => ({ success: 1, ...(await userGroupHistoryEntries(deps, principalOf(request), request.query as never)) }),
  );
}
