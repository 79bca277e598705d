// Requests that arrive on an open connection while the server shuts down: answered 503 in
// the API's envelope, with Retry-After, and the connection closed, so the client retries on
// another instance. (Fastify's own return503OnClosing answers with a body of its own shape.)
import type { FastifyInstance } from 'fastify';
import { AppError } from '../foundations/errors.ts';
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from './error-handler.ts';

export function refuseRequestsWhileClosing(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', (_request, _reply, done) => {
    if (!closing) return done();
    done(
      new AppError('unavailable', 'the server is shutting down; retry shortly', {
        headers: { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS), connection: 'close' },
      }),
    );
  });
}
