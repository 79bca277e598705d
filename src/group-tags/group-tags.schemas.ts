// The tag set over HTTP (docs/api.md, "Tags"), declared once: validation, the response
// allow-list, the handlers' types and the OpenAPI document. A new tag's name follows the rule
// of a group's tags (Tag), so that every tag a group may carry can be named here and no other;
// a name that finds a tag (a rename's or a delete's `name`) follows the older, wider rule
// (TagReference), so that a tag stored before the rule tightened can still be renamed or deleted.
import { Type, type Static } from 'typebox';
import { PLAIN_TEXT } from '../http/text.schemas.ts';
import { EnvironmentTag, Success, Tag, TagReference } from '../user-groups/user-groups.schemas.ts';

const TagName = Type.Unsafe<string>({
  ...Tag,
  description:
    'The tag: 1-64 characters, no control or bidirectional control characters, not only white space or zero-width characters. Case-sensitive; stored in Unicode NFC.',
});
const EXISTING_TAG = 'A tag of the set, spelled as the set has it or in another spelling of the same NFC form: 1-64 characters, no control characters.';
const ExistingTagName = Type.Unsafe<string>({ ...TagReference, description: EXISTING_TAG });

export const GroupTag = Type.Object(
  {
    name: Type.String({ examples: ['beta'] }),
    user_group_count: Type.Integer({
      minimum: 0,
      description: 'How many groups of the environment carry it (0: created, or dropped by its last group).',
      examples: [12],
    }),
  },
  { title: 'GroupTag', additionalProperties: false, description: 'A tag of the environment and how many groups carry it.' },
);
export type GroupTagJson = Static<typeof GroupTag>;

export const ListGroupTagsQuery = Type.Object(
  {
    api_environment_tag: Type.Optional(EnvironmentTag),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, description: 'Page size, 1-500 (default 100).' })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400, description: 'The next_cursor of the previous page.' })),
    q: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: PLAIN_TEXT, description: 'Only tags that start with this (case-sensitive).' })),
  },
  { additionalProperties: false },
);
export type ListGroupTagsInput = Static<typeof ListGroupTagsQuery>;

export const GroupTagList = Type.Object(
  {
    success: Success,
    group_tags: Type.Array(GroupTag, { description: 'In code-point order of their names.' }),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page; null on the last page.' }),
  },
  { title: 'GroupTagList' },
);

export const CreateGroupTagBody = Type.Object(
  { name: TagName, api_environment_tag: Type.Optional(EnvironmentTag) },
  { title: 'CreateGroupTagRequest', additionalProperties: false, examples: [{ name: 'enterprise' }] },
);
export type CreateGroupTagInput = Static<typeof CreateGroupTagBody>;

export const GroupTagResponse = Type.Object({ success: Success, group_tag: GroupTag }, { title: 'GroupTagResponse' });

export const RenameGroupTagBody = Type.Object(
  {
    name: Type.Unsafe<string>({ ...ExistingTagName, description: `The tag to rename. ${EXISTING_TAG}` }),
    new_name: Type.Unsafe<string>({ ...TagName, description: 'Its new name. A tag that exists already: the two are merged into it.' }),
    api_environment_tag: Type.Optional(EnvironmentTag),
  },
  { title: 'RenameGroupTagRequest', additionalProperties: false, examples: [{ name: 'beta', new_name: 'early-access' }] },
);
export type RenameGroupTagInput = Static<typeof RenameGroupTagBody>;

const UserGroupsChanged = Type.Integer({ minimum: 0, description: 'How many groups changed: each has a history entry and a user_group.updated event.' });

export const RenamedGroupTagResponse = Type.Object(
  {
    success: Success,
    group_tag: GroupTag,
    merged: Type.Boolean({ description: 'True when new_name was a tag already: the two are one now.' }),
    user_groups_changed: UserGroupsChanged,
  },
  { title: 'RenamedGroupTag' },
);

/** DELETE /api/group_tags names the tag in a JSON body or in the query string, never both. */
export const GroupTagKey = Type.Object(
  { name: Type.Optional(ExistingTagName), api_environment_tag: Type.Optional(EnvironmentTag) },
  { title: 'GroupTagKey', additionalProperties: false },
);
export type GroupTagKeyInput = Static<typeof GroupTagKey>;
export const GroupTagKeyQuery = Type.Object(
  { name: Type.Optional(ExistingTagName), api_environment_tag: Type.Optional(EnvironmentTag) },
  { additionalProperties: false },
);

export const DeletedGroupTagResponse = Type.Object(
  {
    success: Success,
    name: Type.String({ description: 'The tag, no longer in the set.' }),
    user_groups_changed: UserGroupsChanged,
  },
  { title: 'DeletedGroupTag' },
);
