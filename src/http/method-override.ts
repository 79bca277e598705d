// `X-HTTP-Method-Override: GET` on POST reaches the GET route's handler and schema, for
// clients that cannot send a body with GET. It is a router constraint, so the choice is
// made once, by the router, and the two POST routes never see each other's requests.
import type { ConstraintStrategy, Handler, HTTPVersion } from 'find-my-way';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { validationFailed } from '../foundations/errors.ts';

export const METHOD_OVERRIDE_CONSTRAINT = 'methodOverride';

export const methodOverrideStrategy: ConstraintStrategy<HTTPVersion.V1> = {
  name: METHOD_OVERRIDE_CONSTRAINT,
  storage() {
    const handlers = new Map<string, Handler<HTTPVersion.V1>>();
    return {
      get: (value) => handlers.get(value) ?? null,
      set: (value, handler) => void handlers.set(value, handler),
    };
  },
  // No header: '' has no route of its own, so the request goes to the route without the constraint.
  deriveConstraint(req) {
    const value = req.headers['x-http-method-override'];
    return typeof value === 'string' ? value.toUpperCase() : '';
  },
  validate(value) {
    if (typeof value !== 'string') throw new Error('the methodOverride constraint takes a method name');
  },
  mustMatchWhenDerived: false,
};

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
