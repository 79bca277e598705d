// GET /api/events/stream: change events as Server-Sent Events (docs/api.md, "Change events",
// "The stream"). HTTP in, the stream's rules (event-stream.ts), the stream out.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AccountSlugs } from '../accounts/accounts.repository.ts';
import { principalOf } from '../auth/authenticate.ts';
import type { EventStreams } from './event-stream.ts';
import * as operations from './event-stream.operations.ts';

export interface EventStreamRouteDeps {
  streams: EventStreams;
  accountSlugs: AccountSlugs;
}

export function registerEventStreamRoute(app: FastifyInstance, deps: EventStreamRouteDeps): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.get('/api/events/stream', { schema: operations.eventStreamOperation }, async (request, reply) => {
    const principal = principalOf(request);
    const account = await deps.accountSlugs.get(principal.accountId);
    const stream = await deps.streams.open(
      principal,
      account,
      { after: request.query.after, lastEventId: request.headers['last-event-id'], types: request.query.types },
      reply.raw,
    );
    // A proxy must pass each event on as it comes (nginx buffers otherwise).
    return reply.type('text/event-stream; charset=utf-8').header('x-accel-buffering', 'no').send(stream);
  });
}
