// The operations of /api/user, /api/users and /api/user/history as the OpenAPI document
// describes them (docs/api.md, "Operations"): what each takes, answers and may refuse. The
// routes (user-groups.routes.ts) attach them; validation, types and the document all come
// from here and from the schemas beside it.
import { apiTokenAccess } from '../auth/route-access.ts';
import { AUTH_ERRORS, BODY_ERRORS, LOCK_ERRORS, errorResponses } from '../http/envelope.schemas.ts';
import type { CodeSample } from '../http/openapi.ts';
import * as schemas from './user-groups.schemas.ts';

const tags = ['User groups'];

const getOrCreateDescription = [
  'Identify the group by query string (`?user_group_id=…&name=…&api_environment_tag=…`), by JSON body,',
  'or send `POST /api/user` with header `X-HTTP-Method-Override: GET` and a JSON body. Body and query together: `400 ambiguous_request`.',
  'Exists: `200`, `new_user_group: false`, nothing modified even if the name or properties differ.',
  'Missing: created from the given fields, `201`, `new_user_group: true` (needs the write scope: `403 insufficient_scope` otherwise;',
  'an unknown `parent_user_group_id` is `400 parent_not_found`, a too deep one `400 hierarchy_too_deep`).',
  "Answers carry `computed_properties` and `computed_mapping`: the group's own values over its ancestors'.",
].join(' ');

const getOrCreateResponses = {
  200: { ...schemas.GetOrCreateResponse, 'x-response-description': 'The group exists: nothing was changed.' },
  201: { ...schemas.GetOrCreateResponse, 'x-response-description': 'The group was created from the given fields.' },
  ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, ...LOCK_ERRORS, 'ambiguous_request', 'parent_not_found', 'hierarchy_too_deep', 'tag_limit_reached'),
};

const getOrCreate = {
  tags,
  operationId: 'getOrCreateUserGroup',
  summary: 'Get a user group, creating it if it does not exist',
  description: getOrCreateDescription,
  ...apiTokenAccess('read', 'request', 'looking up a user group'),
  querystring: schemas.GetUserQuery,
  response: getOrCreateResponses,
};

/** GET /api/user. Its body schema is `x-get-body`: Fastify takes no body schema on GET (see getBodyOf). */
export const getOrCreateOperation = { ...getOrCreate, 'x-get-body': schemas.GetUserBody };

/** POST /api/user with X-HTTP-Method-Override: GET: the same operation, hidden from the document. */
export const getOrCreateOverrideOperation = { ...getOrCreate, body: schemas.GetUserBody, hide: true };

export const createOrRotateOperation = {
  tags,
  operationId: 'createOrRotateUserGroup',
  summary: 'Create a user group, or rotate its token',
  description: [
    'Without `current_token`: creates the group (`user_group_id` required); `201`, or `409 user_group_exists` with nothing changed.',
    'A parent must exist in the same account and environment (`400 parent_not_found`) and the hierarchy stay within its depth (`400 hierarchy_too_deep`).',
    'With `current_token`: rotates that token (send nothing but `current_token` and optionally `grace_period_seconds`, else `400 ambiguous_request`);',
    '`200` with the new token, or `404 token_not_found` if the token is unknown, of another account, or no longer current.',
    'During the grace period the old token still works on the embed side only; a rotation without grace ends every earlier token at once.',
  ].join(' '),
  ...apiTokenAccess('write', 'request', 'creating a user group or rotating its token'),
  body: schemas.PostUserBody,
  response: {
    200: { ...schemas.UserGroupResponse, 'x-response-description': 'The token was rotated (or, with X-HTTP-Method-Override: GET, the group exists).' },
    201: { ...schemas.UserGroupResponse, 'x-response-description': 'The group was created.' },
    ...errorResponses(
      ...AUTH_ERRORS,
      ...BODY_ERRORS,
      ...LOCK_ERRORS,
      'ambiguous_request',
      'user_group_exists',
      'token_not_found',
      'parent_not_found',
      'hierarchy_too_deep',
      'tag_limit_reached',
    ),
  },
};

export const updateOperation = {
  tags,
  operationId: 'updateUserGroup',
  summary: 'Update a user group',
  description: [
    'Identified by `user_group_id` (and `api_environment_tag`).',
    `Give at least one of ${schemas.UPDATABLE_FIELDS.map((field) => `\`${field}\``).join(', ')}:`,
    `given fields replace the stored ones (\`null\` clears ${schemas.CLEARED_BY_NULL.map((field) => `\`${field}\``).join(', ')}; \`group_tags\` replaces the set), absent fields stay.`,
    '`new_user_group_id` renames the group, which keeps its token, children and history (`409 user_group_exists` if taken). A move under the group itself or one of its descendants is `409 hierarchy_cycle`. Never creates: `404 user_group_not_found`.',
  ].join(' '),
  ...apiTokenAccess('write', 'request', 'updating a user group'),
  body: schemas.PutUserBody,
  response: {
    200: { ...schemas.UserGroupResponse, 'x-response-description': 'The group, updated.' },
    ...errorResponses(
      ...AUTH_ERRORS,
      ...BODY_ERRORS,
      ...LOCK_ERRORS,
      'user_group_not_found',
      'user_group_exists',
      'parent_not_found',
      'hierarchy_too_deep',
      'hierarchy_cycle',
      'tag_limit_reached',
    ),
  },
};

export const deleteOperation = {
  tags,
  operationId: 'deleteUserGroup',
  summary: 'Delete a user group',
  description:
    'Identified by JSON body or query string (`user_group_id`, `api_environment_tag`). Its tokens stop working at once. Answers the deleted group without its token, and `deleted_count`. A group with children is `409 user_group_has_children` unless `cascade=true`, which deletes the whole subtree in one transaction. Creating the same id later gives a new team_id and token.',
  ...apiTokenAccess('write', 'request', 'deleting a user group'),
  body: schemas.UserGroupKey,
  querystring: schemas.UserGroupKeyQuery,
  response: {
    200: { ...schemas.DeletedResponse, 'x-response-description': 'The group was deleted; it is answered without its token.' },
    ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, ...LOCK_ERRORS, 'ambiguous_request', 'user_group_not_found', 'user_group_has_children'),
  },
};

export const listOperation = {
  tags,
  operationId: 'listUserGroups',
  summary: 'List user groups',
  description:
    'One environment at a time, in creation order (keyset pagination on team_id: stable under concurrent inserts, the same cost at any depth). Tokens are not included: fetch a group to get its token. `q` keeps the groups whose user_group_id or name starts with it; `parent_user_group_id` the children of that group, `tag` the groups with that tag, `hierarchy_level` those of that level. Filters combine, with each other and with the cursor.',
  ...apiTokenAccess('read', 'request', 'listing user groups'),
  querystring: schemas.ListQuery,
  response: {
    200: { ...schemas.ListResponse, 'x-response-description': 'One page of groups, without tokens.' },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed'),
  },
};

export const upsertOperation = {
  tags,
  operationId: 'upsertUserGroups',
  summary: 'Create or update up to 1,000 user groups in one call',
  description: [
    'Needs the `write` scope. Each item is created when missing, or else gets the fields it gives (absent fields stay, as in PUT), in order, committed in parts of 100 items (on PostgreSQL, a run of new groups without parent, level or tags in parts of up to 500):',
    'an item may name as parent a group created by an earlier item. An item that breaks a rule fails alone (`status: "failed"`, with the `error` code a single call would answer) and changes nothing; the others go on.',
    "A call is one of its account's heavy operations: when the account already runs as many as it may, it waits for one to end, then is refused with `429 too_many_heavy_operations`.",
    `The answer is \`200\` whatever the items' outcomes. More than ${schemas.UPSERT_MAX_ITEMS} items, or a body over ${schemas.UPSERT_BODY_LIMIT_BYTES / 1024 / 1024} MiB, is refused whole and changes nothing.`,
  ].join(' '),
  ...apiTokenAccess('write', 'items', 'upserting user groups'),
  body: schemas.UpsertBody,
  response: {
    200: { ...schemas.UpsertResponse, 'x-response-description': 'One result per item, in order, and the counts.' },
    ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS, ...LOCK_ERRORS, 'too_many_heavy_operations'),
  },
};

export const lookupOperation = {
  tags,
  operationId: 'lookupUserGroup',
  summary: 'Look a user group up, never creating it',
  description:
    "The group with this user_group_id in the environment (`api_environment_tag`, else the API token's default), with its current token: `200`, or `404 user_group_not_found`. Unlike `GET /api/user` it never creates: the read scope is always enough, and a group deleted meanwhile stays deleted.",
  ...apiTokenAccess('read', 'request', 'reading a user group'),
  querystring: schemas.LookupQuery,
  response: {
    200: { ...schemas.UserGroupResponse, 'x-response-description': 'The group and its current token.' },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed', 'user_group_not_found'),
  },
};

export const historyOperation = {
  tags,
  operationId: 'getUserGroupHistory',
  summary: 'The change history of a user group, newest first',
  description:
    'Every create, update (with the changed fields and, for renames, parent and tag changes, their old and new values), rotate and delete of the group with this user_group_id, from before any rename; for a deleted group, of the groups that last had this id. Never holds a token.',
  ...apiTokenAccess('read', 'request', 'reading history'),
  querystring: schemas.HistoryQuery,
  response: {
    200: { ...schemas.HistoryResponse, 'x-response-description': 'The entries, newest first.' },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed'),
  },
};

const curl = (source: string): CodeSample => ({ lang: 'Shell', label: 'curl', source });
const typescript = (source: string): CodeSample => ({ lang: 'TypeScript', label: '@ugs/client', source });
const client =
  "import { UserGroupServiceClient } from '@ugs/client';\nconst ugs = new UserGroupServiceClient({ baseUrl: process.env.UGS!, apiToken: process.env.TOKEN! });\n";

/** Code samples of each operation, by operationId (docs/api.md, "Operations"). */
export const userGroupCodeSamples: Record<string, CodeSample[]> = {
  upsertUserGroups: [
    curl(
      'curl -X POST "$UGS/api/users/upsert" -H "Authorization: Token $TOKEN" -H "Content-Type: application/json" \\\n  -d \'{"user_groups": [{"user_group_id": "acme", "name": "ACME"}, {"user_group_id": "acme-eu", "parent_user_group_id": "acme"}]}\'',
    ),
    typescript(
      `${client}const { results, counts } = await ugs.upsertUserGroups({ user_groups: [{ user_group_id: 'acme', name: 'ACME' }, { user_group_id: 'acme-eu', parent_user_group_id: 'acme' }] });`,
    ),
  ],
  getOrCreateUserGroup: [
    curl('curl "$UGS/api/user?user_group_id=example_1&name=Example%201" \\\n  -H "Authorization: Token $TOKEN"'),
    typescript(
      `${client}const { new_user_group, user_group } = await ugs.getOrCreateUserGroup({ user_group_id: 'example_1', name: 'Example 1', properties: { region: 'emea' } });`,
    ),
  ],
  createOrRotateUserGroup: [
    curl(
      'curl -X POST "$UGS/api/user" -H "Authorization: Token $TOKEN" -H \'Content-Type: application/json\' \\\n  -d \'{"user_group_id": "example_2", "name": "Example 2", "mapping": {"40": "213"}}\'',
    ),
    typescript(
      `${client}const { user_group } = await ugs.createUserGroup({ user_group_id: 'example_2', name: 'Example 2', mapping: { '40': '213' } });\n// rotate: await ugs.rotateToken({ current_token: user_group.token, grace_period_seconds: 300 });`,
    ),
  ],
  updateUserGroup: [
    curl(
      'curl -X PUT "$UGS/api/user" -H "Authorization: Token $TOKEN" -H \'Content-Type: application/json\' \\\n  -d \'{"user_group_id": "example_1", "properties": {"region": "apac"}}\'',
    ),
    typescript(`${client}const { user_group } = await ugs.updateUserGroup({ user_group_id: 'example_1', properties: { region: 'apac' } });`),
  ],
  deleteUserGroup: [
    curl('curl -X DELETE "$UGS/api/user?user_group_id=example_2" -H "Authorization: Token $TOKEN"'),
    typescript(`${client}await ugs.deleteUserGroup({ user_group_id: 'example_2' });`),
  ],
  lookupUserGroup: [
    curl('curl "$UGS/api/user/lookup?user_group_id=example_1" -H "Authorization: Token $TOKEN"'),
    typescript(`${client}const { user_group } = await ugs.lookupUserGroup({ user_group_id: 'example_1' });`),
  ],
  listUserGroups: [
    curl('curl "$UGS/api/users?limit=50&q=exa" -H "Authorization: Token $TOKEN"'),
    typescript(`${client}const { user_groups, next_cursor } = await ugs.listUserGroups({ limit: 50, q: 'exa' });`),
  ],
  getUserGroupHistory: [
    curl('curl "$UGS/api/user/history?user_group_id=example_1" -H "Authorization: Token $TOKEN"'),
    typescript(`${client}const { entries } = await ugs.userGroupHistory({ user_group_id: 'example_1' });`),
  ],
};
