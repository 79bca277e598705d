// Reading one group without creating it: GET /api/user is get-or-create, so the console finds
// a group through the list (q is a prefix of the user_group_id or the name; the exact id is
// among the matches, a page at a time).
import type { EnvironmentTag, UserGroupServiceClient, UserGroupWithoutToken } from '../../packages/client/src/index.ts';

const MAX_PAGES = 20;

export async function findGroup(client: UserGroupServiceClient, environment: EnvironmentTag, id: string): Promise<UserGroupWithoutToken | null> {
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const { user_groups, next_cursor } = await client.listUserGroups({ api_environment_tag: environment, q: id, limit: 500, cursor });
    const found = user_groups.find((group) => group.provided_id === id);
    if (found) return found;
    if (!next_cursor) return null;
    cursor = next_cursor;
  }
  return null;
}

/** The group's current token, to rotate it: GET /api/user answers an existing group with its token. */
export async function currentToken(client: UserGroupServiceClient, environment: EnvironmentTag, id: string): Promise<string> {
  const { user_group } = await client.getOrCreateUserGroup({ user_group_id: id, api_environment_tag: environment });
  return user_group.token;
}

export const pretty = (value: unknown) => (value === null || value === undefined ? '' : JSON.stringify(value, null, 2));
