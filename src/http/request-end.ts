// The end of every request, told once to whatever must hear of it (the log line, the request
// metrics): when its answer is written (onResponse), or, when the client went away before it
// was, when the answer is ready to go (onSend). Node never finishes a response whose socket
// is gone, so onResponse never comes for it, though its work may have committed: a create
// whose client hung up still creates. Its line says so (docs/api.md, "Operating endpoints").
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export type RequestEndListener = (request: FastifyRequest, reply: FastifyReply, clientGone: boolean) => void;

const TOLD = Symbol('request end told');

export function onRequestEnd(app: FastifyInstance, listeners: readonly RequestEndListener[]): void {
  const tell = (request: FastifyRequest, reply: FastifyReply, clientGone: boolean) => {
    (request as { [TOLD]?: boolean })[TOLD] = true;
    for (const listener of listeners) listener(request, reply, clientGone);
  };
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.raw.socket?.destroyed === true) tell(request, reply, true);
    // A streamed answer (the event stream) whose client goes away while it is being written:
    // its connection closes, it never finishes, and this is its end. Only streams: a listener
    // on every answer would cost the hot reads.
    else if (typeof (payload as { pipe?: unknown } | null)?.pipe === 'function')
      reply.raw.once('close', () => {
        if ((request as { [TOLD]?: boolean })[TOLD] !== true && !reply.raw.writableFinished) tell(request, reply, true);
      });
    done(null, payload);
  });
  app.addHook('onResponse', (request, reply, done) => {
    if ((request as { [TOLD]?: boolean })[TOLD] !== true) tell(request, reply, false);
    done();
  });
}
