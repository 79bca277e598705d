// /api/group_tags and /api/group_tags/rename: HTTP in, service call, HTTP out (docs/api.md,
// "Tags"). The rules live in group-tags.service.ts.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { AppError, validationFailed } from '../foundations/errors.ts';
import { actorOf, principalOf } from '../auth/authenticate.ts';
import { readBodyOfAnyMethod } from '../http/json-body.ts';
import * as operations from './group-tags.operations.ts';
import * as service from './group-tags.service.ts';
import type { GroupTagKeyInput } from './group-tags.schemas.ts';

/** The tag a DELETE names, from its JSON body or its query string, never both (they could name two tags). */
function tagKey(body: GroupTagKeyInput | undefined, query: GroupTagKeyInput): GroupTagKeyInput & { name: string } {
  const inBody = body !== undefined && Object.keys(body).length > 0;
  if (inBody && Object.keys(query).length > 0) throw new AppError('ambiguous_request', 'name the tag in the JSON body or in the query string, not both');
  const source = inBody ? body : query;
  if (source.name === undefined) throw validationFailed('name', 'required', 'name is required');
  return { ...source, name: source.name };
}

export function registerGroupTagRoutes(app: FastifyInstance, deps: service.GroupTagDeps): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.get('/api/group_tags', { schema: operations.listGroupTagsOperation }, async (request) => {
    const { tags, nextCursor } = await service.listGroupTagsPage(deps, principalOf(request), request.query);
    return { success: 1 as const, group_tags: tags, next_cursor: nextCursor };
  });

  api.post('/api/group_tags', { schema: operations.createGroupTagOperation, config: { idempotent: true } }, async (request, reply) => {
    const tag = await service.createGroupTag(deps, principalOf(request), request.body);
    reply.code(201);
    return { success: 1 as const, group_tag: tag };
  });

  api.post('/api/group_tags/rename', { schema: operations.renameGroupTagOperation, config: { idempotent: true } }, async (request) => {
    const renamed = await service.renameGroupTag(deps, principalOf(request), actorOf(request), request.body);
    return { success: 1 as const, group_tag: renamed.tag, merged: renamed.merged, user_groups_changed: renamed.userGroupsChanged };
  });

  api.delete('/api/group_tags', { schema: operations.deleteGroupTagOperation, preValidation: readBodyOfAnyMethod }, async (request) => {
    const deleted = await service.deleteGroupTagEverywhere(deps, principalOf(request), actorOf(request), tagKey(request.body, request.query));
    return { success: 1 as const, name: deleted.tag.name, user_groups_changed: deleted.userGroupsChanged };
  });
}
