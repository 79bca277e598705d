// `X-HTTP-Method-Override: GET` on POST reaches the GET route's handler and schema, for
// clients that cannot send a body with GET. It is a router constraint, so the choice is
// made once, by the router, and the two POST routes never see each other's requests.
import type { ConstraintStrategy } from 'find-my-way';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { validationFailed } from '../errors.ts';

export const METHOD_OVERRIDE_CONSTRAINT = 'methodOverride';

export const methodOverrideStrategy: ConstraintStrategy<never, string> = {
  name: METHOD_OVERRIDE_CONSTRAINT,
  storage() {
    const handlers = new Map<string, unknown>();
    return {
      get: (value: string) => (handlers.get(value) ?? null) as never,
      set: (value: string, store: unknown) => void handlers.set(value, store),
    };
  },
  deriveConstraint(req: { headers: Record<string, string | string[] | undefined> }) {
    const value = req.headers['x-http-method-override'];
    return typeof value === 'string' ? value.toUpperCase() : undefined;
  },
  validate(value: unknown) {
    if (typeof value !== 'string') throw new Error('the methodOverride constraint takes a method name');
  },
  mustMatchWhenDerived: false,
} as unknown as ConstraintStrategy<never, string>;

/**
 * The override is honoured only as GET on POST /api/user (docs/api.md); anywhere else it is
 * refused, never silently ignored: a client that sends it expects another method to run.
 */
export function refuseOtherOverrides(request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void {
  const value = request.headers['x-http-method-override'];
  if (value === undefined) return done();
  if (request.method === 'POST' && request.routeOptions.url === '/api/user' && typeof value === 'string' && value.toUpperCase() === 'GET') return done();
  done(validationFailed('X-HTTP-Method-Override', 'not_allowed', 'X-HTTP-Method-Override is honoured only as GET, on POST /api/user'));
}
