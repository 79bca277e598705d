// Reading one group never creates it: GET /api/user is get-or-create, which would re-create a
// group deleted a moment ago; GET /api/user/lookup answers 404 instead.
import { isUserGroupServiceError, type EnvironmentTag, type UserGroup, type UserGroupServiceClient } from '../../packages/client/src/index.ts';

/** The group with its current token, or null when there is none. */
export async function findGroup(client: UserGroupServiceClient, environment: EnvironmentTag, id: string): Promise<UserGroup | null> {
  try {
    return (await client.lookupUserGroup({ user_group_id: id, api_environment_tag: environment })).user_group;
  } catch (error) {
    if (isUserGroupServiceError(error) && error.code === 'user_group_not_found') return null;
    throw error;
  }
}

export const pretty = (value: unknown) => (value === null || value === undefined ? '' : JSON.stringify(value, null, 2));

/** A group's fields as the console's pages name them (the form's and the group page's labels). */
const FIELD_WORDS: Record<string, string> = {
  user_group_id: 'user_group_id',
  name: 'name',
  parent_user_group_id: 'parent',
  hierarchy_level: 'level',
  group_tags: 'tags',
  is_demo_group: 'demo group',
};
export const fieldInWords = (field: string) => FIELD_WORDS[field] ?? field;

/** "name, parent and tags". */
export const listInWords = (items: string[]) => (items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`);

/** What a history entry of a group says happened, in words: Created, Changed name and tags, Token rotated, Deleted. */
export function changeInWords(action: string, changedFields: string[] | null | undefined): string {
  switch (action) {
    case 'user_group.create':
      return 'Created';
    case 'user_group.update':
      return changedFields?.length ? `Changed ${listInWords(changedFields.map(fieldInWords))}` : 'Changed';
    case 'user_group.rotate':
      return 'Token rotated';
    case 'user_group.delete':
      return 'Deleted';
    default:
      return action;
  }
}

/** An old or new value of a change, as a person reads it: none for null, the text itself, JSON otherwise. */
export function valueInWords(value: unknown): string {
  if (value === null || value === undefined) return 'none';
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.length ? value.map(valueInWords).join(', ') : 'none';
  return JSON.stringify(value);
}
