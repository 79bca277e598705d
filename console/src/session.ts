// The signed-in token and what it may do. The token lives in sessionStorage only: never in a
// URL, a cookie or localStorage; it leaves the page only in the Authorization header, which
// the client sets. Closing the tab or "Sign out" forgets it.
import { UserGroupServiceClient, type CurrentApiTokenResponse, type EnvironmentTag } from '../../packages/client/src/index.ts';

const TOKEN_KEY = 'ugs-console-token';
const ENVIRONMENT_KEY = 'ugs-console-environment';

export interface Session {
  client: UserGroupServiceClient;
  account: string;
  token: CurrentApiTokenResponse['api_token'];
  canWrite: boolean;
  isAdmin: boolean;
  /** The environments this token may use. */
  environments: EnvironmentTag[];
}

export const storedToken = (): string | null => sessionStorage.getItem(TOKEN_KEY);

export function clientFor(apiToken: string): UserGroupServiceClient {
  return new UserGroupServiceClient({ baseUrl: location.origin, apiToken });
}

/** Asks the service who the token is; throws the service's error (invalid_api_token…) if it is not valid. */
export async function openSession(apiToken: string): Promise<Session> {
  const client = clientFor(apiToken);
  const { account, api_token: token } = await client.getCurrentApiToken();
  sessionStorage.setItem(TOKEN_KEY, apiToken);
  return {
    client,
    account,
    token,
    canWrite: token.scopes.includes('write'),
    isAdmin: token.scopes.includes('admin'),
    environments: token.allowed_environment ? [token.allowed_environment] : ['Customer', 'Testing'],
  };
}

export function closeSession(): void {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(ENVIRONMENT_KEY);
}

export function storedEnvironment(session: Session): EnvironmentTag {
  const stored = sessionStorage.getItem(ENVIRONMENT_KEY) as EnvironmentTag | null;
  return stored && session.environments.includes(stored) ? stored : session.token.default_environment;
}

export function storeEnvironment(environment: EnvironmentTag): void {
  sessionStorage.setItem(ENVIRONMENT_KEY, environment);
}
