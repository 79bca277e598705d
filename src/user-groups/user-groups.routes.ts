// /api/user, /api/user/lookup, /api/users and /api/user/history: HTTP in, service call, HTTP out. Which mode a
// request is in (create or rotate; body or query string) is decided here; the rules live in
// the service, the descriptions in user-groups.operations.ts.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { AppError, validationFailed } from '../foundations/errors.ts';
import { actorOf, principalOf } from '../auth/authenticate.ts';
import { METHOD_OVERRIDE_CONSTRAINT } from '../http/method-override.ts';
import { bodyValidator, getBodyOf } from '../http/validation.ts';
import { itemNumberFailure, readBodyOfAnyMethod } from '../http/json-body.ts';
import { sendJson } from '../http/json-reply.ts';
import {
  GetUserBody,
  UPSERT_BODY_LIMIT_BYTES,
  UpsertEnvelope,
  UpsertItem,
  type GetUserBodyInput,
  type UserGroupInput,
  type UserGroupKeyInput,
} from './user-groups.schemas.ts';
import * as operations from './user-groups.operations.ts';
import * as userGroups from './user-groups.service.ts';
import * as upsert from './upsert.service.ts';
import * as listing from './listing/list.service.ts';
import * as tokenRotation from './token-rotation.service.ts';
import * as history from './user-group-history.service.ts';
import { deletedResponseJson, getOrCreateResponseJson, listResponseJson, userGroupResponseJson } from './user-groups.json.ts';

const getUserBody = getBodyOf(GetUserBody);
/**
 * A bulk upsert's items are checked one by one, so that a bad item fails alone (the route
 * checks only the envelope), a number a double cannot hold first, as a single call's body is.
 */
const validUpsertItem = getBodyOf(UpsertItem);
const upsertItem = (item: unknown) => {
  const failure = itemNumberFailure(item);
  if (failure) throw failure;
  return validUpsertItem(item);
};
const upsertEnvelope = bodyValidator(UpsertEnvelope);

/**
 * GET and DELETE identify a group by JSON body or by query string, never both: a request
 * that mixes them could mean two different groups, so it is refused rather than guessed.
 */
function identification<T extends UserGroupKeyInput>(body: T | undefined, query: T): T & Pick<UserGroupInput, 'user_group_id'> {
  const inBody = body !== undefined && Object.keys(body).length > 0;
  const inQuery = Object.keys(query).length > 0;
  if (inBody && inQuery) {
    throw new AppError('ambiguous_request', 'identify the user group in the JSON body or in the query string, not both');
  }
  const source = inBody ? body : query;
  const { user_group_id: id } = source;
  if (id === undefined) throw validationFailed('user_group_id', 'required', 'user_group_id is required');
  return { ...source, user_group_id: id };
}

const ROTATE_FIELDS = new Set(['current_token', 'grace_period_seconds']);

export function registerUserGroupRoutes(app: FastifyInstance, deps: userGroups.UserGroupDeps): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  const getOrCreate = async (input: UserGroupInput, principal: ReturnType<typeof principalOf>, actor: ReturnType<typeof actorOf>) => {
    const { created, group } = await userGroups.getOrCreateUserGroup(deps, principal, actor, input);
    return { status: created ? 201 : 200, json: getOrCreateResponseJson(created, group) };
  };

  api.get('/api/user', { schema: operations.getOrCreateOperation, preValidation: readBodyOfAnyMethod }, async (request, reply) => {
    const input = identification<GetUserBodyInput>(getUserBody(request.body), request.query);
    const { status, json } = await getOrCreate(input, principalOf(request), actorOf(request));
    return sendJson(reply, status, json);
  });
  api.post(
    '/api/user',
    { schema: operations.getOrCreateOverrideOperation, constraints: { [METHOD_OVERRIDE_CONSTRAINT]: 'GET' }, preValidation: readBodyOfAnyMethod },
    async (request, reply) => {
      const input = identification<GetUserBodyInput>(request.body, request.query);
      const { status, json } = await getOrCreate(input, principalOf(request), actorOf(request));
      return sendJson(reply, status, json);
    },
  );

  api.post(
    '/api/users/upsert',
    {
      schema: operations.upsertOperation,
      bodyLimit: UPSERT_BODY_LIMIT_BYTES,
      validatorCompiler: () => upsertEnvelope,
      config: { idempotent: true, jsonItems: 'user_groups' },
    },
    async (request) => {
      const results = await upsert.upsertUserGroups(deps, principalOf(request), actorOf(request), request.body.user_groups, upsertItem);
      const counts = { created: 0, updated: 0, unchanged: 0, failed: 0 };
      for (const result of results) counts[result.status]++;
      return { success: 1 as const, results, counts };
    },
  );

  api.post('/api/user', { schema: operations.createOrRotateOperation, config: { idempotent: true } }, async (request, reply) => {
    const { current_token: currentToken, grace_period_seconds: graceSeconds, user_group_id: id, ...fields } = request.body;
    if (currentToken !== undefined) {
      const extra = Object.keys(request.body).filter((field) => !ROTATE_FIELDS.has(field));
      if (extra.length > 0) {
        throw new AppError('ambiguous_request', `a rotation (current_token) takes only current_token and grace_period_seconds, not ${extra.join(', ')}`, {
          details: extra.map((field) => ({ field, issue: 'not_allowed_with_current_token' })),
        });
      }
      const rotated = await tokenRotation.rotateUserGroupToken(deps, principalOf(request), actorOf(request), {
        current_token: currentToken,
        grace_period_seconds: graceSeconds,
      });
      return sendJson(reply, 200, userGroupResponseJson(rotated));
    }
    if (graceSeconds !== undefined) {
      throw new AppError('ambiguous_request', 'grace_period_seconds belongs to a rotation: send it with current_token', {
        details: [{ field: 'grace_period_seconds', issue: 'requires_current_token' }],
      });
    }
    if (id === undefined) throw validationFailed('user_group_id', 'required', 'user_group_id is required');
    const created = await userGroups.createUserGroup(deps, principalOf(request), actorOf(request), { ...fields, user_group_id: id });
    return sendJson(reply, 201, userGroupResponseJson(created));
  });

  api.put('/api/user', { schema: operations.updateOperation }, async (request, reply) => {
    const updated = await userGroups.updateUserGroup(deps, principalOf(request), actorOf(request), request.body);
    return sendJson(reply, 200, userGroupResponseJson(updated));
  });

  api.delete('/api/user', { schema: operations.deleteOperation, preValidation: readBodyOfAnyMethod }, async (request, reply) => {
    // cascade says how, not which group: it may come in the query string of a request that
    // identifies the group in its body (DELETE /api/user?cascade=true).
    const { cascade: bodyCascade, ...body } = request.body ?? {};
    const { cascade: queryCascade, ...query } = request.query;
    if (bodyCascade !== undefined && queryCascade !== undefined) {
      throw new AppError('ambiguous_request', 'give cascade in the JSON body or in the query string, not both');
    }
    const key = identification<UserGroupKeyInput>(body, query);
    const { group, deletedCount } = await userGroups.removeUserGroup(deps, principalOf(request), actorOf(request), {
      ...key,
      cascade: bodyCascade ?? queryCascade ?? false,
    });
    return sendJson(reply, 200, deletedResponseJson(group, deletedCount));
  });

  api.get('/api/users', { schema: operations.listOperation }, async (request, reply) => {
    const page = await listing.listUserGroupsPage(deps, principalOf(request), request.query);
    return sendJson(reply, 200, listResponseJson(page.objects, page.nextCursor));
  });

  api.get('/api/user/lookup', { schema: operations.lookupOperation }, async (request, reply) => {
    const group = await userGroups.lookupUserGroup(deps, principalOf(request), request.query);
    return sendJson(reply, 200, userGroupResponseJson(group));
  });

  api.get('/api/user/history', { schema: operations.historyOperation }, async (request) => ({
    success: 1 as const,
    ...(await history.userGroupHistoryEntries(deps, principalOf(request), request.query)),
  }));
}
