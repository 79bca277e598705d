// The tag set's operations as the OpenAPI document describes them (docs/api.md, "Tags"), and
// their code samples.
import { apiTokenAccess } from '../auth/route-access.ts';
import { AUTH_ERRORS, BODY_ERRORS, LOCK_ERRORS, errorResponses } from '../http/envelope.schemas.ts';
import type { CodeSample } from '../http/openapi.ts';
import * as schemas from './group-tags.schemas.ts';

const tags = ['Tags'];
const BATCHES =
  'Each group that changes gets a history entry and a `user_group.updated` event with `changes.group_tags`. The groups change `UGS_TAG_BATCH_SIZE` (500) at a time, each batch in its own transaction: a PUT running meanwhile is never overwritten, and the tag leaves the set only once no group carries it.';

export const listGroupTagsOperation = {
  tags,
  operationId: 'listGroupTags',
  summary: "List the environment's tags, with how many groups carry each",
  description:
    "Every tag of the environment (`api_environment_tag`, else the API token's default): those groups carry, and those created with `POST /api/group_tags` or dropped by their last group (0 groups). In code-point order of their names, a page at a time (`limit`, `cursor`: keyset pagination); `q` keeps the tags that start with it. The `read` scope suffices.",
  ...apiTokenAccess('read', 'request', 'listing tags'),
  querystring: schemas.ListGroupTagsQuery,
  response: {
    200: { ...schemas.GroupTagList, 'x-response-description': 'One page of tags.' },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed'),
  },
};

export const createGroupTagOperation = {
  tags,
  operationId: 'createGroupTag',
  summary: 'Create a tag that no group carries yet',
  description:
    "The tag is listed with 0 groups, and offered when a group is edited in the console. A tag that exists (created before, or carried by a group) is `409 group_tag_exists`; one past the environment's bound (`UGS_MAX_TAGS_PER_ENVIRONMENT`, 10,000) is `409 tag_limit_reached`. The name is stored in Unicode NFC. Needs the `write` scope.",
  ...apiTokenAccess('write', 'request', 'creating a tag'),
  body: schemas.CreateGroupTagBody,
  response: {
    201: { ...schemas.GroupTagResponse, 'x-response-description': 'The tag, with 0 groups.' },
    ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, ...LOCK_ERRORS, 'group_tag_exists', 'tag_limit_reached'),
  },
};

export const renameGroupTagOperation = {
  tags,
  operationId: 'renameGroupTag',
  summary: 'Rename a tag on every group that carries it',
  description: [
    'Every group with `name` gets `new_name` instead; a group that has both keeps one `new_name`.',
    'A `new_name` that exists already merges the two tags into it (`merged: true`).',
    "An unknown `name` is `404 group_tag_not_found`; `new_name` equal to `name` is `400 validation_failed`. `new_name` is stored in Unicode NFC, and counts against the environment's bound of tags in the place of `name`. Needs the `write` scope.",
    BATCHES,
  ].join(' '),
  ...apiTokenAccess('write', 'request', 'renaming a tag'),
  body: schemas.RenameGroupTagBody,
  response: {
    200: { ...schemas.RenamedGroupTagResponse, 'x-response-description': 'The tag under its new name, and how many groups changed.' },
    ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, ...LOCK_ERRORS, 'group_tag_not_found', 'tag_limit_reached', 'too_many_heavy_operations'),
  },
};

export const deleteGroupTagOperation = {
  tags,
  operationId: 'deleteGroupTag',
  summary: 'Delete a tag from every group and from the set',
  description: [
    'The tag is named by JSON body or query string (`name`, `api_environment_tag`), not both (`400 ambiguous_request`).',
    'An unknown tag is `404 group_tag_not_found`. Needs the `write` scope.',
    BATCHES,
  ].join(' '),
  ...apiTokenAccess('write', 'request', 'deleting a tag'),
  body: schemas.GroupTagKey,
  querystring: schemas.GroupTagKeyQuery,
  response: {
    200: { ...schemas.DeletedGroupTagResponse, 'x-response-description': 'The tag is gone; how many groups changed.' },
    ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, ...LOCK_ERRORS, 'ambiguous_request', 'group_tag_not_found', 'too_many_heavy_operations'),
  },
};

const curl = (source: string): CodeSample => ({ lang: 'Shell', label: 'curl', source });
const typescript = (source: string): CodeSample => ({ lang: 'TypeScript', label: '@ugs/client', source });
const client =
  "import { UserGroupServiceClient } from '@ugs/client';\nconst ugs = new UserGroupServiceClient({ baseUrl: process.env.UGS!, apiToken: process.env.TOKEN! });\n";

export const groupTagCodeSamples: Record<string, CodeSample[]> = {
  listGroupTags: [
    curl('curl "$UGS/api/group_tags?q=be" -H "Authorization: Token $TOKEN"'),
    typescript(`${client}const { group_tags, next_cursor } = await ugs.listGroupTags({ q: 'be' });`),
  ],
  createGroupTag: [
    curl('curl -X POST "$UGS/api/group_tags" -H "Authorization: Token $TOKEN" -H \'Content-Type: application/json\' \\\n  -d \'{"name": "enterprise"}\''),
    typescript(`${client}const { group_tag } = await ugs.createGroupTag({ name: 'enterprise' });`),
  ],
  renameGroupTag: [
    curl(
      'curl -X POST "$UGS/api/group_tags/rename" -H "Authorization: Token $TOKEN" -H \'Content-Type: application/json\' \\\n  -d \'{"name": "beta", "new_name": "early-access"}\'',
    ),
    typescript(`${client}const { group_tag, user_groups_changed } = await ugs.renameGroupTag({ name: 'beta', new_name: 'early-access' });`),
  ],
  deleteGroupTag: [
    curl('curl -X DELETE "$UGS/api/group_tags?name=beta" -H "Authorization: Token $TOKEN"'),
    typescript(`${client}const { user_groups_changed } = await ugs.deleteGroupTag({ name: 'beta' });`),
  ],
};
