// Idempotent retries (docs/api.md, "Idempotent retries"): a write sent with an
// `Idempotency-Key` header runs once; a retry with the same key and the same request within
// 24 h gets the first answer again, with `Idempotent-Replayed: true`. A route opts in with
// `config: { idempotent: true }`; the onRoute hook below then adds a preHandler that claims
// the key (or replays, or refuses) and an onSend hook that stores the answer, and declares
// the header and the new answers in the route's OpenAPI description.
//
// Keys belong to the API token that sent them (as Stripe's belong to the API key): a stored
// answer is replayed only to the token that was allowed to make it, after that token was
// authenticated again, and another token of the account sending the same key makes another
// operation. A token's scopes and environment never change, and a revoked or expired token is
// refused before the preHandler, so the replay needs no scope or environment check of its
// own. A token without the scope the route declares never gets here: it is refused right after
// authentication and the rate limit (auth/route-access.ts), before the key is read. The environment, which the
// body or a row names, is the service's to check, after the claim: a key another token holds
// is not this request's key, so a lesser token can neither receive nor block a more
// privileged token's answer.
//
// What is stored: the answers of the operation, 2xx and 4xx, so a retry sees what the first
// request saw (the token it was given, or why it was refused). Not stored, the key released:
// refusals (keepsAnswer: 401, 403, and a 404 answered to a token restricted to one
// environment, which may mean "not in your environment"), so that a refused request never
// holds the key's answer; 5xx (a fault or an outage: a retry runs for real); 429 (nothing
// ran). The answer is sealed under the secret key (keyring purpose idempotent-answer): its
// body may hold a token. A stored answer that no configured key opens any more (its key was
// removed within the 24 h) is dropped, and the retry runs as a new request.
import crypto from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { DatabaseHandle } from '../db/database.ts';
import { inTransaction } from '../db/transaction.ts';
import { isDatabaseUnavailable } from '../db/errors.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { AppError, validationFailed } from '../foundations/errors.ts';
import { principalOf } from '../auth/authenticate.ts';
import type { Principal } from '../auth/principal.ts';
import { errorResponses } from '../http/envelope.schemas.ts';
import { claimKey, dropAnswer, extendLock, findKey, finishKey, releaseKey, type KeyOfToken } from './idempotency-keys.repository.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route takes an Idempotency-Key header (idempotency.ts). */
    idempotent?: boolean;
    /**
     * The route changes nothing (minting an embed token): while the primary cannot be reached
     * its key is not claimed and the request runs without it, a retry getting a new answer as
     * valid as the first (docs/api.md, "Reads from replicas").
     */
    runsWithoutKeyWhilePrimaryAway?: boolean;
  }
}

/** How long a key and its answer are kept. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const REPLAYED_HEADER = 'idempotent-replayed';
const KEY_TEXT = /^[\x20-\x7e]{1,255}$/;
/** Claims tried before answering 409: a row can vanish between a failed claim and its read (a 5xx released it). */
const CLAIM_ATTEMPTS = 3;

export interface IdempotencyDeps {
  database: DatabaseHandle;
  keyring: Keyring;
  now: () => Date;
  /**
   * How long a running request holds its key without news from its instance: the owner
   * extends it every third of it while it runs, so it lapses only when the owner's process
   * died; a retry may then take the key over.
   */
  lockMs: number;
}

interface OwnedKey extends KeyOfToken {
  owner: string;
  heartbeat: NodeJS.Timeout;
}

interface StoredAnswer {
  type: string;
  body: string;
}

/**
 * Whether an answer is kept for retries (see the top of this file): not a fault, not a rate
 * limit, not a refusal. A `409 idempotency_key_in_use` is never the answer of the request that
 * owns the key: it is given to the others, before they run, and stored for none.
 */
function keepsAnswer(status: number, principal: Pick<Principal, 'allowedEnvironment'>): boolean {
  if (status < 200 || status >= 500 || status === 429) return false;
  return !isRefusal(status, principal);
}

/**
 * An answer that says the token may not do this, rather than what the operation found. A
 * token restricted to one environment is answered 404 for what lies outside it, as for what
 * does not exist, and the two cannot be told apart here: none of its 404s is kept (its retry
 * asks again, and finds the same).
 */
function isRefusal(status: number, principal: Pick<Principal, 'allowedEnvironment'>): boolean {
  return status === 401 || status === 403 || (status === 404 && principal.allowedEnvironment !== null);
}

/** The request as compared between a first try and a retry: SHA-256 of method, path and canonical JSON body. */
export function requestHash(request: Pick<FastifyRequest, 'method' | 'url' | 'body'>): string {
  return crypto
    .createHash('sha256')
    .update(`${request.method} ${request.url}\n`)
    .update(canonicalJson(request.body ?? null))
    .digest('hex');
}

/** JSON with every object's keys in code-unit order, so that key order does not make two bodies differ. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const object = value as Record<string, unknown>;
    return `{${Object.keys(object)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(object[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function keyOf(request: FastifyRequest): string | undefined {
  const value = request.headers[IDEMPOTENCY_KEY_HEADER];
  if (value === undefined) return undefined;
  const text = Array.isArray(value) ? value.join(', ') : value;
  if (!KEY_TEXT.test(text)) {
    throw validationFailed(
      'Idempotency-Key',
      text.length === 0 ? 'too_short' : text.length > 255 ? 'too_long' : 'invalid_characters',
      'Idempotency-Key must be 1-255 printable ASCII characters (a UUID is a good key)',
    );
  }
  return text;
}

const asArray = <T>(value: T | T[] | undefined): T[] => (value === undefined ? [] : Array.isArray(value) ? value : [value]);

export function registerIdempotency(app: FastifyInstance, deps: IdempotencyDeps): void {
  const owned = new WeakMap<FastifyRequest, OwnedKey>();
  const at = (date: Date, plusMs: number) => new Date(date.getTime() + plusMs).toISOString();

  /**
   * The key is held by a running request. Retry-After: the seconds left of its lock, after which a
   * retry takes the key over if its instance died (a live one renews the lock every third of it,
   * and answers before then as a rule); at least 1 (docs/api.md, "Idempotent retries").
   */
  const inUse = (lockedUntil: string | null | undefined, now: Date) => {
    const left = lockedUntil ? Math.ceil((Date.parse(lockedUntil) - now.getTime()) / 1000) : 1;
    const seconds = Number.isFinite(left) ? Math.max(1, left) : 1;
    return new AppError('idempotency_key_in_use', 'a request with this Idempotency-Key is still running: retry it once that one has answered', {
      headers: { 'retry-after': String(seconds) },
    });
  };

  async function claimOrReplay(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const key = keyOf(request);
    if (key === undefined) return undefined;
    const principal = principalOf(request);
    const where: KeyOfToken = { accountId: principal.accountId, apiTokenId: principal.tokenId, key };
    const hash = requestHash(request);
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const now = deps.now();
      const owner = crypto.randomBytes(12).toString('base64url');
      const claim = {
        ...where,
        requestHash: hash,
        owner,
        now: now.toISOString(),
        lockedUntil: at(now, deps.lockMs),
        expiresAt: at(now, IDEMPOTENCY_WINDOW_MS),
      };
      let claimed: boolean;
      try {
        claimed = await inTransaction(deps.database, (trx) => claimKey(trx, claim));
      } catch (err) {
        if (!(request.routeOptions.config.runsWithoutKeyWhilePrimaryAway && isDatabaseUnavailable(err))) throw err;
        request.log.warn({ code: (err as { code?: string }).code }, 'the primary is away: the Idempotency-Key is not claimed and the request runs without it');
        return undefined;
      }
      if (claimed) {
        owned.set(request, { ...where, owner, heartbeat: keepLock(request, where, owner) });
        return undefined;
      }
      const row = await findKey(deps.database.db, where);
      if (row === undefined) continue; // released meanwhile: claim again
      if (row.request_hash !== hash) {
        throw new AppError(
          'idempotency_key_reused',
          'this Idempotency-Key was used in the last 24 h for another request (another method, path or body): use a new key for a new request',
        );
      }
      if (row.state === 'running' || row.response_sealed === null || row.response_status === null) throw inUse(row.locked_until, now);
      let answer: StoredAnswer;
      try {
        answer = JSON.parse(deps.keyring.open(row.response_sealed, 'idempotent-answer'));
      } catch (err) {
        request.log.warn({ err }, 'a stored idempotent answer cannot be opened (its secret key is gone): dropped, the request runs again');
        await inTransaction(deps.database, (trx) => dropAnswer(trx, where, row.response_sealed!));
        continue;
      }
      return reply.code(row.response_status).header('content-type', answer.type).header(REPLAYED_HEADER, 'true').send(answer.body);
    }
    throw inUse(null, deps.now());
  }

  /** Extends the lock every third of it while the request runs. */
  function keepLock(request: FastifyRequest, where: KeyOfToken, owner: string): NodeJS.Timeout {
    const timer = setInterval(
      () => {
        inTransaction(deps.database, (trx) => extendLock(trx, where, owner, at(deps.now(), deps.lockMs))).catch((err) =>
          request.log.warn({ err }, 'could not extend the lock of an Idempotency-Key'),
        );
      },
      Math.max(1, Math.floor(deps.lockMs / 3)),
    );
    timer.unref();
    return timer;
  }

  async function storeAnswer(request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
    const claim = owned.get(request);
    if (claim === undefined) return payload;
    owned.delete(request);
    clearInterval(claim.heartbeat);
    const status = reply.statusCode;
    try {
      if (keepsAnswer(status, principalOf(request)) && (typeof payload === 'string' || Buffer.isBuffer(payload))) {
        const answer: StoredAnswer = { type: String(reply.getHeader('content-type') ?? 'application/json; charset=utf-8'), body: payload.toString() };
        const sealed = deps.keyring.seal(JSON.stringify(answer), 'idempotent-answer');
        const stored = await inTransaction(deps.database, (trx) => finishKey(trx, claim, claim.owner, status, sealed));
        if (!stored) request.log.warn('the Idempotency-Key was taken over by a retry while this request ran: its answer is not stored');
      } else {
        await inTransaction(deps.database, (trx) => releaseKey(trx, claim, claim.owner));
      }
    } catch (err) {
      // The answer stands (its work is done or failed already); a retry finds the key running until its lock lapses.
      request.log.error({ err }, 'could not store the answer of an Idempotency-Key');
    }
    return payload;
  }

  app.addHook('onRoute', (route: RouteOptions) => {
    if (route.config?.idempotent !== true) return;
    route.schema = idempotentSchema(route.schema ?? {});
    route.preHandler = [...asArray(route.preHandler), claimOrReplay] as RouteOptions['preHandler'];
    route.onSend = [...asArray(route.onSend), storeAnswer] as RouteOptions['onSend'];
  });
}

/**
 * The route's description with what the OpenAPI document shows of an idempotent operation
 * (http/openapi.ts: the header, Idempotent-Replayed) and the two answers it adds.
 */
function idempotentSchema(schema: NonNullable<RouteOptions['schema']>): NonNullable<RouteOptions['schema']> {
  const responses = { ...((schema.response as Record<string, Record<string, unknown>> | undefined) ?? {}) };
  for (const [status, added] of Object.entries(errorResponses('idempotency_key_in_use', 'idempotency_key_reused', 'validation_failed'))) {
    const known = responses[status];
    const codes = [
      ...new Set([...((known?.['x-error-codes'] as string[] | undefined) ?? []), ...((added as { 'x-error-codes': string[] })['x-error-codes'] ?? [])]),
    ];
    responses[status] = { ...(known ?? added), 'x-error-codes': codes, 'x-response-description': `Error: ${codes.join(', ')}` };
  }
  const marked: Record<string, unknown> = { ...schema, response: responses, 'x-idempotent': true };
  return marked;
}
