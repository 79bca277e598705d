// Requests the router cannot even look up: a path whose percent-escapes are not UTF-8
// (`/api/%FF`, `/api/%`, `/api/%E0%A4%A`), or a path parameter over the router's length
// limit. No route and no hook runs for them, so Fastify hands them here with a bare request
// and reply (its `frameworkErrors` option); left to Fastify, they got its own body, with no
// envelope, no X-Request-Id and no log line. Here they get what every answer gets: the
// envelope, X-Request-Id, Cache-Control: no-store, and their one log line and metrics when
// they end (docs/api.md, "Errors").
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../foundations/errors.ts';
import { errorBody } from './error-handler.ts';
import type { RequestEndListener } from './request-end.ts';

function errorFor(err: FastifyError, request: FastifyRequest): AppError {
  switch (err.code) {
    case 'FST_ERR_BAD_URL':
      return new AppError('validation_failed', 'the path holds a percent-escape that is not UTF-8 (a literal % is written %25)', {
        details: [{ field: 'path', issue: 'invalid_encoding' }],
      });
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new AppError('validation_failed', 'a path segment is longer than any id of this API', { details: [{ field: 'path', issue: 'too_long' }] });
    default:
      request.log.error({ err }, 'unexpected error');
      return new AppError('internal_error', 'internal error; quote the request id when reporting it');
  }
}

export function frameworkErrorHandler(listeners: readonly RequestEndListener[]) {
  return (err: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    const error = errorFor(err, request);
    let told = false;
    const tell = (clientGone: boolean) => {
      if (told) return;
      told = true;
      for (const listener of listeners) listener(request, reply, clientGone);
    };
    reply.raw.once('finish', () => tell(false));
    reply.raw.once('close', () => tell(true));
    reply.header('x-request-id', request.id).header('cache-control', 'no-store');
    // As for every answer ready before its body arrived (request-context.ts): nobody reads that body.
    if (request.raw.complete === false) reply.header('connection', 'close');
    reply.code(error.status).type('application/json; charset=utf-8').send(errorBody(error, request.id));
  };
}
