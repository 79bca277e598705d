// The embed side (docs/api.md, "The embed side"): what an embedded dashboard learns from the token it
// holds, the short-lived embed tokens a backend mints for it, and their introspection. A
// long-lived user group token resolves by its hash (the current token, else a token still in
// its grace period); an embed token resolves by its signature, then by its group's current
// token generation.
import type { DatabaseHandle } from '../db/database.ts';
import type { ServiceEvents } from '../metrics/metrics.ts';
import { AppError, validationFailed } from '../foundations/errors.ts';
import { bareToken, credentialFromAuthorization, hashToken, looksLikeJws, MAX_EMBED_TOKEN_BYTES, tokenKind } from '../auth/token-format.ts';
import { resolveEnvironment, type Principal } from '../auth/principal.ts';
import { findUserGroup } from '../user-groups/user-groups.repository.ts';
import { normalizeUserGroupId } from '../user-groups/stored-fields.ts';
import type { AccountSlugs } from '../accounts/accounts.repository.ts';
import * as repository from './embed.repository.ts';
import type { ResolvedGroup } from '../user-groups/group-chain.ts';
import type { Environment } from '../db/schema.ts';
import { EmbedTokenTooLarge, type EmbedClaims, type EmbedTokens } from './embed-token.ts';
import { variablesJson, type ViewedGroup } from './embed-context.json.ts';
import { reservedAttributeKeys, viewerClaim, viewerVariables } from './embed-viewer.ts';
import { EMBED_TOKEN_DEFAULT_SECONDS, type EmbedTokenInput, type EmbedTokenView } from './embed.schemas.ts';

export interface EmbedDeps {
  database: DatabaseHandle;
  embedTokens: EmbedTokens;
  /** The account slug an embed token names. */
  accountSlugs: AccountSlugs;
  now: () => Date;
  events: Pick<ServiceEvents, 'embedTokenIssued'>;
}

/** What the browser sent besides the token: the bindings an embed token may demand. */
interface EmbedCaller {
  authorization: string | undefined;
  origin: string | undefined;
  embedId: string | undefined;
}

const BEARER = { 'www-authenticate': 'Bearer' };
function invalidToken(message = 'the token is not valid (unknown, malformed, expired, rotated, or its user group was deleted)'): AppError {
  return new AppError('invalid_token', message, { headers: BEARER });
}

function bearerToken(header: string | undefined): string {
  const token = credentialFromAuthorization(header);
  if (token === undefined) throw invalidToken('send a user group token or an embed token as Authorization: Bearer <token>');
  if (token === null) {
    const scheme = bareToken(header as string) ? 'the Authorization header has no scheme' : 'the Authorization header is not of the form Bearer <token>';
    throw invalidToken(`${scheme}: send a user group token or an embed token as Authorization: Bearer <token>`);
  }
  return token;
}

/** The group the caller's token identifies, and the viewer an embed token names (the routes write its context with embed-context.json.ts). */
export async function resolveEmbedGroup(deps: EmbedDeps, caller: EmbedCaller): Promise<ViewedGroup> {
  const token = bearerToken(caller.authorization);
  return looksLikeJws(token) ? groupForEmbedToken(deps, token, caller) : groupForUserGroupToken(deps, token);
}

async function groupForUserGroupToken(deps: EmbedDeps, token: string): Promise<ResolvedGroup<repository.EmbedGroupRow>> {
  const kind = tokenKind(token); // checksum: a mistyped token costs no lookup
  if (kind === 'api') {
    throw new AppError('wrong_token_kind', 'an API token was sent where a user group token or embed token is needed; never give an API token to a browser', {
      headers: BEARER,
    });
  }
  if (kind !== 'user_group') throw invalidToken();
  const hash = hashToken(token);
  // The retired-token table is read only when the token is not a current one: the usual
  // request costs one lookup, a token in its grace period one more. The token names the
  // account only through the row (docs/api.md, "Reads from replicas").
  const group = await deps.database.pageViews.findingAccount(
    async (reads) =>
      (await repository.findGroupByCurrentTokenHash(reads, hash)) ?? (await repository.findGroupByRetiredTokenHash(reads, hash, deps.now().toISOString())),
    (found) => found.row.account_id,
  );
  if (!group) throw invalidToken();
  return group;
}

async function groupForEmbedToken(deps: EmbedDeps, token: string, caller: EmbedCaller): Promise<ViewedGroup> {
  const claims = await deps.embedTokens.verify(token, deps.now());
  if (!claims) throw invalidToken();
  // The bindings are checked before the lookup: a token used from the wrong place learns
  // nothing about its group, and costs no query.
  if (claims.origin !== undefined && caller.origin !== claims.origin) {
    throw new AppError('origin_forbidden', "this embed token is bound to another origin (the request's Origin header must match the one it was issued for)");
  }
  if (claims.embedId !== undefined && caller.embedId !== claims.embedId) {
    throw new AppError(
      'embed_id_forbidden',
      'this embed token is bound to another dashboard (send the embed_id it was issued for as the embed_id query parameter)',
    );
  }
  const named = namedTenant(claims);
  const tenant = named && { accountId: await deps.accountSlugs.idOf(named.accountSlug), environment: named.environment };
  const group = await currentGroupOf(deps, claims, tenant);

  if (!group) throw invalidToken();
  // A token without a viewer answers the group as read, with nothing added.
  return claims.viewer === undefined ? group : { ...group, viewer: claims.viewer };
}

/** The account and environment an embed token names (ugs_account, ugs_environment); undefined for an HS256 token, which names none. */
function namedTenant(claims: EmbedClaims): { accountSlug: string; environment: Environment } | undefined {
  const { ugs_account: accountSlug, ugs_environment: environment } = claims.payload;
  if (typeof accountSlug !== 'string' || (environment !== 'Customer' && environment !== 'Testing')) return undefined;
  return { accountSlug, environment };
}

/**
 * The token's group in the tenant given (undefined for an HS256 token), unless it was deleted
 * (team ids are never reused) or rotated since the token was issued.
 */
async function currentGroupOf(
  deps: EmbedDeps,
  claims: EmbedClaims,
  tenant: { accountId: number | undefined; environment: Environment } | undefined,
): Promise<ResolvedGroup<repository.EmbedGroupRow> | undefined> {
  if (tenant?.accountId === undefined && claims.kid.startsWith('hs256:')) return legacyGroupOf(deps, claims);
  if (tenant?.accountId === undefined) return undefined;
  const { accountId, environment } = tenant;
  const group = await deps.database.pageViews.ofAccount(accountId, (reads) => repository.findGroupByTeamId(reads, { accountId, environment }, claims.teamId));
  return group && group.row.token_generation === claims.generation ? group : undefined;
}

async function legacyGroupOf(deps: EmbedDeps, claims: EmbedClaims): Promise<ResolvedGroup<repository.EmbedGroupRow> | undefined> {
  const group = await deps.database.pageViews.findingAccount(
    (reads) => repository.findGroupByLegacyTeamId(reads, claims.teamId),
    (found) => found.row.account_id,
  );
  return group && group.row.token_generation === claims.generation ? group : undefined;
}

export async function issueEmbedToken(deps: EmbedDeps, principal: Principal, input: EmbedTokenInput): Promise<EmbedTokenView> {
  if (input.viewer?.attributes !== undefined) refuseReservedAttributeKeys(input.viewer.attributes);
  const environment = resolveEnvironment(principal, input.api_environment_tag);
  const providedId = normalizeUserGroupId(input.user_group_id);
  if (input.origin !== undefined) assertBrowserOrigin(input.origin);
  const group = await deps.database.pageViews.ofAccount(principal.accountId, (reads) =>
    findUserGroup(reads, { accountId: principal.accountId, environment, providedId }),
  );
  if (!group) throw new AppError('user_group_not_found', `no user group with user_group_id "${providedId}" in ${environment}`);
  if (input.embed_id === deps.embedTokens.options.audience) {
    // The audience of an unbound token: a token bound to it could not be told apart.
    throw validationFailed(
      'embed_id',
      'reserved',
      `embed_id must not be "${input.embed_id}", the audience of tokens that are not bound to a dashboard (UGS_EMBED_AUDIENCE)`,
    );
  }
  const viewer = input.viewer === undefined ? undefined : viewerClaim(input.viewer);
  let signed: { token: string; expiresAt: Date };
  try {
    signed = await deps.embedTokens.sign(
      {
        teamId: group.row.team_id,
        generation: group.row.token_generation,
        userGroupId: group.row.provided_id,
        accountSlug: await deps.accountSlugs.get(principal.accountId),
        environment: group.row.environment,
        variables: viewer === undefined ? (JSON.parse(variablesJson(group)) as Record<string, unknown>) : viewerVariables(group, viewer),
        embedId: input.embed_id,
        origin: input.origin,
        viewer,
      },
      deps.now(),
      input.expires_in_seconds ?? EMBED_TOKEN_DEFAULT_SECONDS,
    );
  } catch (err) {
    if (!(err instanceof EmbedTokenTooLarge)) throw err;
    throw new AppError(
      'embed_token_too_large',
      `the embed token would be ${err.bytes.toLocaleString('en-US')} bytes, over the limit of ${MAX_EMBED_TOKEN_BYTES.toLocaleString('en-US')} bytes (what proxies accept in one header); ` +
        (viewer === undefined
          ? "its variables are the group's computed properties: keep large data out of properties, or use the user group token, whose context is read from the service"
          : "it carries the viewer, and its variables are the group's computed properties and the viewer's attributes (carried twice: in ugs_viewer and in ugs_variables.viewer_attributes): send fewer or shorter attributes, or keep large data out of the group's properties"),
    );
  }
  deps.events.embedTokenIssued();
  return { success: 1, embed_token: signed.token, expires_at: signed.expiresAt.toISOString() };
}

/**
 * RFC 7662: whether an embed token is active now, for callers that must honour a rotation or
 * a deletion at once. A token of another account, or of an environment the API token may not
 * use, is answered as inactive: the caller learns nothing about it.
 */
export async function introspectEmbedToken(deps: EmbedDeps, principal: Principal, token: string): Promise<EmbedClaims | undefined> {
  const claims = await deps.embedTokens.verify(token, deps.now());
  if (!claims) return undefined;
  const named = namedTenant(claims);
  // Only the caller's own account and the environments it may use are looked in.
  if (named && principal.allowedEnvironment !== null && named.environment !== principal.allowedEnvironment) return undefined;
  const group = await currentGroupOf(deps, claims, named && { accountId: principal.accountId, environment: named.environment });
  if (!group || group.row.account_id !== principal.accountId) return undefined;
  if (principal.allowedEnvironment !== null && principal.allowedEnvironment !== group.row.environment) return undefined;
  return claims;
}

/** A rule of the body, so it answers as validation does: after the route's scope, before the environment and existence (docs/api.md, "Errors", precedence). */
function refuseReservedAttributeKeys(attributes: Record<string, unknown>): void {
  const reserved = reservedAttributeKeys(attributes);
  if (reserved.length === 0) return;
  const fields = reserved.map((key) => `viewer.attributes.${key}`);
  throw new AppError(
    'validation_failed',
    `${fields.join(', ')} ${reserved.length === 1 ? 'is a name' : 'are names'} the service uses in an embed token ` +
      '(iss, sub, aud, exp, nbf, iat, jti, any ugs_ name, user_group_id, user_group_name, viewer_id, viewer_attributes; in any case): rename the attribute',
    { details: fields.map((field) => ({ field, issue: 'reserved' })) },
  );
}

/** Browsers send an origin in one serialized form; a token bound to any other spelling could never be used. */
function assertBrowserOrigin(origin: string): void {
  let serialized: string | undefined;
  try {
    const url = new URL(origin);
    if (url.protocol === 'http:' || url.protocol === 'https:') serialized = url.origin;
  } catch {
    // not a URL: refused below
  }
  if (serialized !== origin) {
    throw validationFailed(
      'origin',
      'invalid_format',
      `origin must be a browser origin as sent in the Origin header: scheme://host[:port] without path or trailing slash${serialized ? ` (did you mean "${serialized}"?)` : ''}`,
    );
  }
}
