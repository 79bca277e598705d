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
