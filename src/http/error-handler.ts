// One error envelope for every failure, and one place that decides what a caller may see:
// AppErrors speak for themselves, framework errors are translated, and anything else is a
// generic 500 whose details go only to the log, under the request id.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../foundations/errors.ts';
import { isDatabaseUnavailable, isLockTimeout, isReadOnlyNode, storageFault, type StorageFault } from '../db/errors.ts';
import { validationError } from './validation.ts';
import { BODY_LIMIT_BYTES } from './json-body.ts';
import { throttledWarning, type ThrottledWarning } from '../foundations/throttled-warning.ts';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 2;
/** A full disk is freed, or a dropped database restored, by a person or a job, not in two seconds. */
const STORAGE_RETRY_AFTER_SECONDS = 30;

/** What the log says once every 10 s at most, per cause (db/errors.ts, storageFault). */
const STORAGE_ALARMS: Record<StorageFault, string> = {
  full_or_failing: 'database storage full or failing: writes answer 503 storage_unavailable until there is room',
  missing:
    'database missing: the database or its tables are gone (dropped, or created again empty); requests answer 503 storage_unavailable until it is restored',
  refused:
    'database refuses the service: its credentials no longer work (a password changed or a role dropped?); requests answer 503 storage_unavailable until they do',
  file_gone: 'database file deleted or replaced: writes answer 503 storage_unavailable',
};

/** What a caller is told of each cause; the rest (a path, a code) is in the log. */
const STORAGE_MESSAGES: Record<StorageFault, string> = {
  full_or_failing: 'the database cannot write right now (its storage is full or failing); nothing was changed: retry later',
  missing: 'the service cannot reach its data right now (its database is missing or refuses it); nothing was changed: retry later',
  refused: 'the service cannot reach its data right now (its database is missing or refuses it); nothing was changed: retry later',
  file_gone: "the service's database file was deleted or replaced while it ran; nothing was changed: writes are refused until an operator restores it",
};

/** The answer while the data is out of reach (docs/api.md, "Errors"): the caller can only retry later. */
export function storageUnavailable(fault: StorageFault): AppError {
  return new AppError('storage_unavailable', STORAGE_MESSAGES[fault], { headers: { 'retry-after': String(STORAGE_RETRY_AFTER_SECONDS) } });
}

/** The answer to a wait for a lock that ran out (docs/api.md, "Errors"): other requests are changing the same rows; nothing was changed. */
export function lockTimeout(what = 'other requests held a lock this request needs (they change the same rows) for too long'): AppError {
  return new AppError('lock_timeout', `${what}; nothing was changed: retry shortly`, {
    headers: { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS) },
  });
}

export function errorBody(error: AppError, requestId: string) {
  return {
    success: 0 as const,
    error: {
      code: error.code,
      message: error.message,
      ...(error.details ? { details: error.details } : {}),
      request_id: requestId,
    },
  };
}

function sendError(reply: FastifyReply, request: FastifyRequest, error: AppError): FastifyReply {
  if (error.headers) reply.headers(error.headers);
  return reply.code(error.status).type('application/json; charset=utf-8').send(errorBody(error, request.id));
}

/** The client hung up before its request arrived: its stream errors, but nothing is wrong here. */
function clientHungUp(request: FastifyRequest): boolean {
  return request.raw.destroyed && request.raw.complete === false;
}

interface Alarms {
  unavailable: ThrottledWarning;
  storage: ThrottledWarning;
}

function translate(err: FastifyError, request: FastifyRequest, alarms: Alarms): AppError {
  if (err instanceof AppError) return err;
  // Before the driver-error checks: a reset of the client's own socket is not the database's.
  if (clientHungUp(request)) return new AppError('bad_request', 'the client closed the connection before the request arrived');
  if (err.validation) return validationError(err.validation, err.validationContext ?? 'body');
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('payload_too_large', `request body is larger than ${BODY_LIMIT_BYTES} bytes`);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('unsupported_media_type', 'a request body must be sent as Content-Type: application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('invalid_json', 'request body is not valid JSON');
  }
  const fault = storageFault(err);
  if (fault) {
    alarms.storage(err, STORAGE_ALARMS[fault], request);
    return storageUnavailable(fault);
  }
  if (isLockTimeout(err)) return lockTimeout();
  if (isDatabaseUnavailable(err)) {
    alarms.unavailable(err, 'database unavailable: answering 503', request);
    const message = isReadOnlyNode(err)
      ? 'the database cannot take writes right now (it is read-only: failing over, or in recovery); nothing was changed: retry shortly'
      : 'the database is unavailable; retry shortly';
    return new AppError('unavailable', message, {
      headers: { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS) },
    });
  }
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    return new AppError('validation_failed', 'the request could not be understood');
  }
  request.log.error({ err }, 'unexpected error');
  return new AppError('internal_error', 'internal error; quote the request id when reporting it');
}

export function registerErrorHandling(app: FastifyInstance): void {
  const alarms: Alarms = { unavailable: throttledWarning(app.log), storage: throttledWarning(app.log, 'error') };
  app.setErrorHandler((err: FastifyError, request, reply) => sendError(reply, request, translate(err, request, alarms)));

  app.setNotFoundHandler(notFoundHandler(app));
}

/**
 * 405 with `Allow` when the path exists under other methods, else 404. Also set inside the
 * embed plugin (embed.routes.ts), so that its 404s and 405s carry CORS headers a browser
 * needs to read them; `app` is the root instance, which knows every route.
 */
export function notFoundHandler(app: FastifyInstance) {
  return (request: FastifyRequest, reply: FastifyReply) => {
    const url = request.url.split('?')[0];
    const allowed = METHODS.filter((method) => app.hasRoute({ url, method }));
    if (allowed.length > 0) {
      return sendError(
        reply,
        request,
        new AppError('method_not_allowed', `${request.method} is not allowed on ${url}; use ${allowed.join(', ')}`, {
          headers: { allow: allowed.join(', ') },
        }),
      );
    }
    return sendError(reply, request, new AppError('not_found', `no route ${request.method} ${url}`));
  };
}
