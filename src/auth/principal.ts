// What an authenticated API token may do, and the environment rules that follow from it.
import { AppError } from '../foundations/errors.ts';
import type { Environment } from '../db/schema.ts';

/** `admin` manages the account's API tokens; it implies neither `read` nor `write`. */
export type Scope = 'read' | 'write' | 'admin';
export const SCOPES: readonly Scope[] = ['read', 'write', 'admin'];

export interface Principal {
  tokenId: number;
  /** SHA-256 of the API token (not a secret): rate limits key on it without hashing again. */
  tokenHash: string;
  accountId: number;
  scopes: ReadonlySet<Scope>;
  /** The only environment this token may touch, or null for both. */
  allowedEnvironment: Environment | null;
  defaultEnvironment: Environment;
  /** When the token stops working (ISO 8601), or null. */
  expiresAt: string | null;
}

/** `write` includes what `read` allows (docs/api.md, "Tokens"); `admin` is only itself. */
export function hasScope(principal: Principal, scope: Scope): boolean {
  return principal.scopes.has(scope) || (scope === 'read' && principal.scopes.has('write'));
}

export function requireScope(principal: Principal, scope: Scope, what: string): void {
  if (!hasScope(principal, scope)) {
    throw new AppError('insufficient_scope', `${what} needs an API token with the ${scope} scope`);
  }
}

/** The environment a request works in: the one it names, else the token's default. */
export function resolveEnvironment(principal: Principal, requested: Environment | undefined): Environment {
  const environment = requested ?? principal.defaultEnvironment;
  assertEnvironmentAllowed(principal, environment);
  return environment;
}

function assertEnvironmentAllowed(principal: Principal, environment: Environment): void {
  if (principal.allowedEnvironment && principal.allowedEnvironment !== environment) throw environmentForbidden(principal.allowedEnvironment);
}

export function environmentForbidden(allowed: Environment): AppError {
  return new AppError('environment_forbidden', `this API token may only be used in the ${allowed} environment`);
}
