// Errors of the HTTP layer itself, raised before there is a request for Fastify to handle: a
// request that is not valid HTTP (400), headers over Node's limit (431), a request whose
// headers or body did not arrive within its timeout (408). Node hands over the socket: the
// answer is written here, as the API's error envelope with an X-Request-Id, and the
// connection is closed (docs/api.md, "Errors"). The error's raw packet, which holds the
// request's Authorization header, is never logged.
import type { Socket } from 'node:net';
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { AppError } from '../foundations/errors.ts';
import { errorBody } from './error-handler.ts';
import { generateRequestId } from './request-context.ts';

function errorFor(code: string | undefined): AppError {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return new AppError('request_timeout', 'the request did not arrive in time: send the headers and the body without pausing');
  }
  if (code === 'HPE_HEADER_OVERFLOW') return new AppError('headers_too_large', 'the request headers are larger than the server accepts (16 KiB)');
  return new AppError('bad_request', 'the request is not valid HTTP/1.1');
}

export function handleClientError(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Socket): void {
  const response = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  // Reset, already closed, or a response of ours already on its way: nothing can be written.
  if (err.code === 'ECONNRESET' || !socket.writable || response?.headersSent) {
    socket.destroy();
    return;
  }
  const error = errorFor(err.code);
  const requestId = generateRequestId({ headers: {} } as Parameters<typeof generateRequestId>[0]);
  const body = JSON.stringify(errorBody(error, requestId));
  this.log.info({ request_id: requestId, status: error.status, code: err.code }, 'client error');
  socket.end(
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      'Cache-Control: no-store\r\n' +
      `X-Request-Id: ${requestId}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
  );
}
