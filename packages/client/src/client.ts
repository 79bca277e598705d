// A typed client for the User Group Service: one method per operation, typed errors,
// bounded retries on 429 and 503, and a deadline per call. Needs only the global fetch
// (Node 18+, browsers, Deno, Bun).
import { UserGroupServiceError, type UserGroupServiceErrorCode } from './errors.js';
import { DEFAULT_RETRY, parseRetryAfter, retryDelayMs, type RetryOptions } from './retry.js';
import { operationQueryParameters } from './openapi.js';
import type {
  AnswerOf,
  ParamsOf,
  CreateGroupTagParams,
  DeleteGroupTagParams,
  DeletedGroupTagResponse,
  GroupTag,
  GroupTagResponse,
  ListGroupTagsParams,
  ListGroupTagsResponse,
  RenameGroupTagParams,
  RenamedGroupTagResponse,
  ApiTokenHistoryParams,
  ApiTokenHistoryResponse,
  ListEventsParams,
  UpsertUserGroupsParams,
  UpsertUserGroupsResponse,
  ListEventsResponse,
  CreateWebhookEndpointParams,
  CreatedWebhookEndpointResponse,
  DeletedWebhookEndpointResponse,
  EnabledWebhookEndpointResponse,
  ListWebhookDeliveriesParams,
  WebhookDeliveriesResponse,
  WebhookEndpointListResponse,
  WebhookTestResponse,
  ApiTokenListResponse,
  CreateApiTokenParams,
  CreatedApiTokenResponse,
  CurrentApiTokenResponse,
  RevokedApiTokenResponse,
  CreateEmbedTokenParams,
  CreateUserGroupParams,
  DeleteUserGroupParams,
  DeleteUserGroupResponse,
  EmbedContextParams,
  JwksParams,
  EmbedContextResponse,
  EmbedTokenDiscovery,
  EmbedTokenResponse,
  ErrorDetail,
  IntrospectionResponse,
  JsonWebKeySet,
  GetOrCreateUserGroupParams,
  GetOrCreateUserGroupResponse,
  ListUserGroupsParams,
  ListUserGroupsResponse,
  RotateTokenParams,
  UpdateUserGroupParams,
  UserGroupHistoryParams,
  UserGroupHistoryResponse,
  UserGroupResponse,
  UserGroupWithoutToken,
} from './types.js';

/**
 * The JWKS URL of a service, from its public URL (the `iss` of its embed tokens), e.g. for
 * jose: `createRemoteJWKSet(jwksUrl(issuer), { cacheMaxAge: 300_000 })`. Without `alg`, the
 * set lists the ES256 and RS256 keys only; a verifier that implements EdDSA and must accept
 * its tokens asks for them: `jwksUrl(issuer, { alg: ['ES256', 'RS256', 'EdDSA'] })`.
 */
export function jwksUrl(publicUrl: string | URL, { alg }: { alg?: readonly ('ES256' | 'RS256' | 'EdDSA')[] } = {}): URL {
  const base = String(publicUrl).replace(/\/+$/, '');
  const url = new URL(`${base}/.well-known/jwks.json`);
  if (alg !== undefined && alg.length > 0) url.searchParams.set('alg', alg.join(','));
  return url;
}

export interface UserGroupServiceClientOptions {
  /** Where the service runs, e.g. `https://ugs.internal.example.com`. */
  baseUrl: string;
  /** The API token (`ugs_api_…`), for every method but getEmbedContext. */
  apiToken?: string;
  /** A call (all its attempts and waits together) fails with code `timeout` after this long (default 10 s). */
  timeoutMs?: number;
  retry?: RetryOptions;
  /** Another fetch implementation (a custom agent, a test double); default: the global fetch. */
  fetch?: typeof fetch;
  /** Sent with every request. */
  headers?: Record<string, string>;
}

export interface CallOptions {
  /** Cancels the call (code `aborted`). */
  signal?: AbortSignal;
  /** Overrides the client's timeoutMs for this call. */
  timeoutMs?: number;
  /** Sent as X-Request-Id (letters, digits and `._:-`, at most 128), to follow the call in the service's logs. */
  requestId?: string;
  /** Extra headers for this call (e.g. `Origin` for an origin-bound embed token). */
  headers?: Record<string, string>;
}

/**
 * Which failures may be retried. `overload`: only 429 and 503, which the service sends
 * before changing anything (for calls that must not run twice, such as create and
 * rotate). `idempotent`: also when no response arrived (a connection reset).
 */
type RetryClass = 'overload' | 'idempotent';

interface RequestSpec {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  /** `api`: the API token; `none`: a public document; otherwise the user group token or embed token to send as Bearer. */
  auth: 'api' | 'none' | { bearer: string };
  retry: RetryClass;
  /** A standard document (a JWK set, discovery metadata): its answer has no `success` envelope. */
  document?: true;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const RETRY_STATUSES = new Set([429, 503]);
/** What get-or-create may take as a query string (from the OpenAPI document, openapi.ts). */
const GET_OR_CREATE_QUERY: ReadonlySet<string> = new Set(operationQueryParameters.getOrCreateUserGroup);

/** The parameters as a query string, when every one may go there (null and objects cannot). */
function asGetOrCreateQuery(params: object): Record<string, string | number | boolean | undefined> | undefined {
  const entries = Object.entries(params);
  const fits = entries.every(([field, value]) => GET_OR_CREATE_QUERY.has(field) && (value === undefined || (value !== null && typeof value !== 'object')));
  return fits ? Object.fromEntries(entries) : undefined;
}

export class UserGroupServiceClient {
  readonly #baseUrl: string;
  readonly #apiToken: string | undefined;
  readonly #timeoutMs: number;
  readonly #retry: Required<RetryOptions>;
  readonly #fetch: typeof fetch;
  readonly #headers: Record<string, string>;

  constructor(options: UserGroupServiceClientOptions) {
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#apiToken = options.apiToken;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#retry = { ...DEFAULT_RETRY, ...options.retry };
    if (!(this.#retry.maxAttempts >= 1)) throw new RangeError('retry.maxAttempts must be at least 1');
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#headers = { ...options.headers };
  }

  /** Creates a user group: `201`, or `user_group_exists` (409). Retried only on 429/503. */
  createUserGroup(params: CreateUserGroupParams, options?: CallOptions): Promise<UserGroupResponse> {
    return this.#call({ method: 'POST', path: '/api/user', body: params, auth: 'api', retry: 'overload' }, options);
  }

  /**
   * Returns the user group, creating it if missing (`new_user_group` says which). Sent as
   * `GET /api/user?…` when only query-string fields are given; with `mapping`,
   * `properties` or `group_tags` as `POST /api/user` with `X-HTTP-Method-Override: GET`, since fetch
   * cannot send a body with GET. Either way the call is idempotent.
   */
  getOrCreateUserGroup(params: GetOrCreateUserGroupParams, options?: CallOptions): Promise<GetOrCreateUserGroupResponse> {
    // A null parent or level means "none", which a query string cannot say: those go in a body.
    const query = asGetOrCreateQuery(params);
    if (query) return this.#call({ method: 'GET', path: '/api/user', query, auth: 'api', retry: 'idempotent' }, options);
    return this.#call(
      { method: 'POST', path: '/api/user', body: params, headers: { 'x-http-method-override': 'GET' }, auth: 'api', retry: 'idempotent' },
      options,
    );
  }

  /** The group and its current token; never creates it: `user_group_not_found` (404) if it does not exist. */
  lookupUserGroup(params: ParamsOf<'lookupUserGroup'>, options?: CallOptions): Promise<AnswerOf<'lookupUserGroup'>> {
    return this.#call({ method: 'GET', path: '/api/user/lookup', query: params, auth: 'api', retry: 'idempotent' }, options);
  }

  /**
   * Replaces the given fields (`null` clears mapping, properties, the parent or the level;
   * `group_tags` replaces the set); `new_user_group_id` renames. Never creates:
   * `user_group_not_found` (404).
   */
  updateUserGroup(params: UpdateUserGroupParams, options?: CallOptions): Promise<UserGroupResponse> {
    return this.#call({ method: 'PUT', path: '/api/user', body: params, auth: 'api', retry: 'idempotent' }, options);
  }

  /** Gives the group of `current_token` a new token; `token_not_found` (404). Retried only on 429/503. */
  rotateToken(params: RotateTokenParams, options?: CallOptions): Promise<UserGroupResponse> {
    return this.#call({ method: 'POST', path: '/api/user', body: params, auth: 'api', retry: 'overload' }, options);
  }

  /**
   * Deletes a user group and answers it without its token; with `cascade: true` its whole
   * subtree (`deleted_count` says how many), else a group with children is
   * `user_group_has_children` (409). Retried when no response came,
   * so a retry after a lost response can report `user_group_not_found` for a group this
   * very call deleted.
   */
  deleteUserGroup(params: DeleteUserGroupParams, options?: CallOptions): Promise<DeleteUserGroupResponse> {
    return this.#call({ method: 'DELETE', path: '/api/user', query: params, auth: 'api', retry: 'idempotent' }, options);
  }

  /** One page of user groups (without tokens); pass `next_cursor` as `cursor` for the next. */
  listUserGroups(params: ListUserGroupsParams = {}, options?: CallOptions): Promise<ListUserGroupsResponse> {
    return this.#call({ method: 'GET', path: '/api/users', query: params, auth: 'api', retry: 'idempotent' }, options);
  }

  /** Every user group of an environment, page after page (`for await (const group of …)`). */
  async *iterateUserGroups(params: Omit<ListUserGroupsParams, 'cursor'> = {}, options?: CallOptions): AsyncGenerator<UserGroupWithoutToken, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.listUserGroups({ ...params, cursor }, options);
      yield* page.user_groups;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** The group's change history, newest first. */
  userGroupHistory(params: UserGroupHistoryParams, options?: CallOptions): Promise<UserGroupHistoryResponse> {
    return this.#call({ method: 'GET', path: '/api/user/history', query: params, auth: 'api', retry: 'idempotent' }, options);
  }

  /** One page of the environment's tags, each with how many groups carry it, in code-point order; pass `next_cursor` as `cursor` for the next. */
  listGroupTags(params: ListGroupTagsParams = {}, options?: CallOptions): Promise<ListGroupTagsResponse> {
    return this.#call({ method: 'GET', path: '/api/group_tags', query: params, auth: 'api', retry: 'idempotent' }, options);
  }

  /** Every tag of an environment, page after page (`for await (const tag of …)`). */
  async *iterateGroupTags(params: Omit<ListGroupTagsParams, 'cursor'> = {}, options?: CallOptions): AsyncGenerator<GroupTag, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.listGroupTags({ ...params, cursor }, options);
      yield* page.group_tags;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** Creates a tag no group carries yet (listed with 0 groups): `201`, or `group_tag_exists` (409). Retried only on 429/503. */
  createGroupTag(params: CreateGroupTagParams, options?: CallOptions): Promise<GroupTagResponse> {
    return this.#call({ method: 'POST', path: '/api/group_tags', body: params, auth: 'api', retry: 'overload' }, options);
  }

  /**
   * Renames a tag on every group that carries it; onto an existing tag, merges the two
   * (`merged: true`). `group_tag_not_found` (404). Retried only on 429/503: a retry after a
   * lost answer would find the old name gone.
   */
  renameGroupTag(params: RenameGroupTagParams, options?: CallOptions): Promise<RenamedGroupTagResponse> {
    return this.#call({ method: 'POST', path: '/api/group_tags/rename', body: params, auth: 'api', retry: 'overload' }, options);
  }

  /**
   * Removes a tag from every group and from the set. `group_tag_not_found` (404). Retried when
   * no response came, so a retry after a lost response can report `group_tag_not_found` for a
   * tag this very call deleted.
   */
  deleteGroupTag(params: DeleteGroupTagParams, options?: CallOptions): Promise<DeletedGroupTagResponse> {
    return this.#call({ method: 'DELETE', path: '/api/group_tags', query: params, auth: 'api', retry: 'idempotent' }, options);
  }

  /** A short-lived signed embed token for one user group (issuing a second one is harmless, so it is retried). */
  createEmbedToken(params: CreateEmbedTokenParams, options?: CallOptions): Promise<EmbedTokenResponse> {
    return this.#call({ method: 'POST', path: '/api/embed_token', body: params, auth: 'api', retry: 'idempotent' }, options);
  }

  /** What an embedded dashboard sees, for a user group token or an embed token (no API token needed). */
  getEmbedContext(token: string, params: EmbedContextParams = {}, options?: CallOptions): Promise<EmbedContextResponse> {
    return this.#call({ method: 'GET', path: '/api/embed/context', query: params, auth: { bearer: token }, retry: 'idempotent' }, options);
  }

  /**
   * Whether an embed token is valid now (RFC 7662): `active: false` once it expired, its group
   * was rotated or deleted, or it belongs to another account. For verifiers that must honour
   * those at once; a check against the JWKS (see jwksUrl) knows only the expiry.
   */
  introspectEmbedToken(token: string, options?: CallOptions): Promise<IntrospectionResponse> {
    return this.#call({ method: 'POST', path: '/api/embed/introspect', body: { token }, auth: 'api', retry: 'idempotent' }, options);
  }

  /** The calling API token: its account, scopes and environments (any token may ask). */
  getCurrentApiToken(options?: CallOptions): Promise<CurrentApiTokenResponse> {
    return this.#call({ method: 'GET', path: '/api/api_tokens/current', auth: 'api', retry: 'idempotent' }, options);
  }

  /** The account's API tokens, revoked and expired ones included; never a value. Needs the admin scope. */
  listApiTokens(options?: CallOptions): Promise<ApiTokenListResponse> {
    return this.#call({ method: 'GET', path: '/api/api_tokens', auth: 'api', retry: 'idempotent' }, options);
  }

  /**
   * Creates an API token in this token's account and answers its value, once. Never more than
   * the calling token has: `insufficient_scope` or `environment_forbidden` (403). Needs the
   * admin scope. Retried only on 429/503 (a retry after a lost answer would make a second token).
   */
  createApiToken(params: CreateApiTokenParams, options?: CallOptions): Promise<CreatedApiTokenResponse> {
    return this.#call({ method: 'POST', path: '/api/api_tokens', body: params, auth: 'api', retry: 'overload' }, options);
  }

  /**
   * Revokes an API token of this account; every instance refuses it within a second.
   * `api_token_not_found` (404), `api_token_revoked` or `last_admin_token` (409).
   */
  revokeApiToken(id: number, options?: CallOptions): Promise<RevokedApiTokenResponse> {
    return this.#call({ method: 'DELETE', path: `/api/api_tokens/${encodeURIComponent(String(id))}`, auth: 'api', retry: 'idempotent' }, options);
  }

  /** Who issued and revoked the account's API tokens, newest first. */
  getApiTokenHistory(params: ApiTokenHistoryParams = {}, options?: CallOptions): Promise<ApiTokenHistoryResponse> {
    return this.#call({ method: 'GET', path: '/api/api_tokens/history', query: params, auth: 'api', retry: 'idempotent' }, options);
  }

  /** Creates or updates up to 1,000 groups in one call; one result per item, in order. Retried only on 429/503. */
  upsertUserGroups(params: UpsertUserGroupsParams, options?: CallOptions): Promise<UpsertUserGroupsResponse> {
    return this.#call({ method: 'POST', path: '/api/users/upsert', body: params, auth: 'api', retry: 'overload' }, options);
  }

  /** The account's change events after `after`, in order; poll again with `next_cursor`. */
  listEvents(params: ListEventsParams = {}, options?: CallOptions): Promise<ListEventsResponse> {
    return this.#call({ method: 'GET', path: '/api/events', query: params, auth: 'api', retry: 'idempotent' }, options);
  }

  /** The account's webhook endpoints; never a secret. Needs the admin scope. */
  listWebhookEndpoints(options?: CallOptions): Promise<WebhookEndpointListResponse> {
    return this.#call({ method: 'GET', path: '/api/webhook_endpoints', auth: 'api', retry: 'idempotent' }, options);
  }

  /**
   * Creates a webhook endpoint and answers its secret (`whsec_…`), once. A URL that resolves to a
   * private or reserved address is `webhook_url_forbidden` (400); one with a user name or password
   * is `validation_failed` (400); one endpoint beyond the account's limit per environment is
   * `webhook_endpoint_limit_reached` (409). Needs the admin scope. Retried only on 429/503.
   */
  createWebhookEndpoint(params: CreateWebhookEndpointParams, options?: CallOptions): Promise<CreatedWebhookEndpointResponse> {
    return this.#call({ method: 'POST', path: '/api/webhook_endpoints', body: params, auth: 'api', retry: 'overload' }, options);
  }

  /** Deletes a webhook endpoint of this account: `webhook_endpoint_not_found` (404) if there is none. */
  deleteWebhookEndpoint(id: number, options?: CallOptions): Promise<DeletedWebhookEndpointResponse> {
    return this.#call({ method: 'DELETE', path: `/api/webhook_endpoints/${encodeURIComponent(String(id))}`, auth: 'api', retry: 'idempotent' }, options);
  }

  /** A new secret for a webhook endpoint, shown once; the old one also signs for 24 h. Retried only on 429/503. */
  rotateWebhookSecret(id: number, options?: CallOptions): Promise<CreatedWebhookEndpointResponse> {
    return this.#call(
      { method: 'POST', path: `/api/webhook_endpoints/${encodeURIComponent(String(id))}/rotate_secret`, auth: 'api', retry: 'overload' },
      options,
    );
  }

  /** Enables an endpoint disabled after 3 days of failures: its pending deliveries are sent again at once. */
  enableWebhookEndpoint(id: number, options?: CallOptions): Promise<EnabledWebhookEndpointResponse> {
    return this.#call({ method: 'POST', path: `/api/webhook_endpoints/${encodeURIComponent(String(id))}/enable`, auth: 'api', retry: 'idempotent' }, options);
  }

  /** A webhook endpoint's latest deliveries, newest first, with every attempt. */
  listWebhookDeliveries(id: number, params: ListWebhookDeliveriesParams = {}, options?: CallOptions): Promise<WebhookDeliveriesResponse> {
    return this.#call(
      { method: 'GET', path: `/api/webhook_endpoints/${encodeURIComponent(String(id))}/deliveries`, query: params, auth: 'api', retry: 'idempotent' },
      options,
    );
  }

  /**
   * Sends a `webhook_endpoint.test` event to the endpoint now and answers how it went; while the
   * account's webhook requests are all in flight, `webhook_endpoint_busy` (429). Retried only on 429/503.
   */
  testWebhookEndpoint(id: number, options?: CallOptions): Promise<WebhookTestResponse> {
    return this.#call({ method: 'POST', path: `/api/webhook_endpoints/${encodeURIComponent(String(id))}/test`, auth: 'api', retry: 'overload' }, options);
  }

  /**
   * The public keys that verify embed tokens (RFC 7517). Needs no token. Without `alg`, the ES256
   * and RS256 keys only; `{ alg: 'ES256,RS256,EdDSA' }`: every published key.
   */
  getJwks(params: JwksParams = {}, options?: CallOptions): Promise<JsonWebKeySet> {
    return this.#call({ method: 'GET', path: '/.well-known/jwks.json', query: params, auth: 'none', retry: 'idempotent', document: true }, options);
  }

  /** The issuer of embed tokens, where its keys are, and their algorithms (the signing key's first). Needs no token. */
  getEmbedTokenDiscovery(options?: CallOptions): Promise<EmbedTokenDiscovery> {
    return this.#call({ method: 'GET', path: '/.well-known/openid-configuration', auth: 'none', retry: 'idempotent', document: true }, options);
  }

  /** Where this service publishes the public keys of its embed tokens (ES256 and RS256; for EdDSA keys too, the function jwksUrl with `alg`). */
  jwksUrl(): URL {
    return jwksUrl(this.#baseUrl);
  }

  async #call<T>(spec: RequestSpec, options: CallOptions = {}): Promise<T> {
    const deadline = new Deadline(options.timeoutMs ?? this.#timeoutMs, options.signal);
    try {
      for (let attempt = 1; ; attempt++) {
        let failure: UserGroupServiceError;
        try {
          return await this.#attempt<T>(spec, options, deadline.signal);
        } catch (err) {
          failure = deadline.translate(err);
        }
        const retryable = (failure.status !== 0 && RETRY_STATUSES.has(failure.status)) || (failure.code === 'network_error' && spec.retry === 'idempotent');
        if (!retryable || attempt >= this.#retry.maxAttempts) throw failure;
        const wait = retryDelayMs(attempt, failure.retryAfterSeconds === undefined ? undefined : failure.retryAfterSeconds * 1000, this.#retry);
        if (wait > this.#retry.maxDelayMs || wait > deadline.remainingMs()) throw failure;
        await deadline.sleep(wait);
      }
    } catch (err) {
      throw deadline.translate(err);
    } finally {
      deadline.dispose();
    }
  }

  async #attempt<T>(spec: RequestSpec, options: CallOptions, signal: AbortSignal): Promise<T> {
    const url = new URL(this.#baseUrl + spec.path);
    for (const [key, value] of Object.entries(spec.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    const headers: Record<string, string> = { accept: 'application/json', ...this.#headers, ...spec.headers, ...options.headers };
    if (spec.auth === 'api') {
      if (!this.#apiToken) throw new TypeError('this call needs an API token: pass apiToken to the UserGroupServiceClient');
      headers.authorization = `Token ${this.#apiToken}`;
    } else if (spec.auth !== 'none') {
      headers.authorization = `Bearer ${spec.auth.bearer}`;
    }
    if (options.requestId) headers['x-request-id'] = options.requestId;
    let body: string | undefined;
    if (spec.body !== undefined) {
      body = JSON.stringify(spec.body);
      headers['content-type'] = 'application/json';
    }

    let response: Response;
    let text: string;
    try {
      response = await this.#fetch(url, { method: spec.method, headers, body, signal });
      text = await response.text();
    } catch (err) {
      if (signal.aborted) throw err; // the deadline or the caller: translated by #call
      throw new UserGroupServiceError({
        code: 'network_error',
        status: 0,
        message: `${spec.method} ${spec.path}: no response (${(err as Error).message})`,
        cause: err,
      });
    }
    const requestId = response.headers.get('x-request-id') ?? undefined;
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    const envelope = json as { success?: unknown; error?: { code?: unknown; message?: unknown; details?: unknown; request_id?: unknown } } | undefined;
    if (response.ok && (envelope?.success === 1 || (spec.document && json !== undefined))) return json as T;

    const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
    const retryAfterSeconds = retryAfterMs === undefined ? undefined : retryAfterMs / 1000;
    const error = envelope?.error;
    if (!response.ok && error && typeof error.code === 'string') {
      throw new UserGroupServiceError({
        code: error.code as UserGroupServiceErrorCode,
        message: typeof error.message === 'string' ? error.message : `${spec.method} ${spec.path} failed with ${response.status}`,
        status: response.status,
        requestId: typeof error.request_id === 'string' ? error.request_id : requestId,
        details: Array.isArray(error.details) ? (error.details as ErrorDetail[]) : [],
        retryAfterSeconds,
      });
    }
    throw new UserGroupServiceError({
      code: 'invalid_response',
      message: `${spec.method} ${spec.path}: unexpected ${response.status} response${text ? `: ${text.slice(0, 200)}` : ''}`,
      status: response.status,
      requestId,
      retryAfterSeconds,
    });
  }
}

const TIMED_OUT = Symbol('timed out');

/**
 * One call's time budget and cancellation: a single AbortSignal that fires on the caller's
 * signal or at the deadline (AbortSignal.any would do, but is missing before Node 20.3).
 */
class Deadline {
  readonly signal: AbortSignal;
  readonly #controller = new AbortController();
  readonly #endsAt: number;
  readonly #timer: ReturnType<typeof setTimeout>;
  readonly #timeoutMs: number;
  readonly #caller?: AbortSignal;
  readonly #onCallerAbort = () => this.#controller.abort(this.#caller?.reason);

  constructor(timeoutMs: number, caller?: AbortSignal) {
    this.signal = this.#controller.signal;
    this.#timeoutMs = timeoutMs;
    this.#endsAt = Date.now() + timeoutMs;
    this.#timer = setTimeout(() => this.#controller.abort(TIMED_OUT), timeoutMs);
    this.#caller = caller;
    if (caller?.aborted) this.#controller.abort(caller.reason);
    else caller?.addEventListener('abort', this.#onCallerAbort, { once: true });
  }

  remainingMs(): number {
    return Math.max(0, this.#endsAt - Date.now());
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.signal.aborted) return reject(this.signal.reason);
      const onAbort = () => {
        clearTimeout(timer);
        reject(this.signal.reason);
      };
      const timer = setTimeout(() => {
        this.signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      this.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Any failure as a UserGroupServiceError; aborts say whether the deadline or the caller ended the call. */
  translate(err: unknown): UserGroupServiceError {
    if (err instanceof UserGroupServiceError) return err;
    if (this.signal.aborted) {
      return this.signal.reason === TIMED_OUT
        ? new UserGroupServiceError({ code: 'timeout', status: 0, message: `no answer within ${this.#timeoutMs} ms` })
        : new UserGroupServiceError({ code: 'aborted', status: 0, message: 'the call was aborted', cause: this.signal.reason });
    }
    if (err instanceof TypeError) throw err; // a programming error (e.g. no API token): not a service failure
    return new UserGroupServiceError({ code: 'network_error', status: 0, message: (err as Error)?.message ?? String(err), cause: err });
  }

  dispose(): void {
    clearTimeout(this.#timer);
    this.#caller?.removeEventListener('abort', this.#onCallerAbort);
  }
}
