// /api/events: the feed of change events (docs/api.md, "Change events"). HTTP in, service
// call, HTTP out.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { DatabaseHandle } from '../db/database.ts';
import type { AccountSlugs } from '../accounts/accounts.repository.ts';
import { principalOf } from '../auth/authenticate.ts';
import * as operations from './events.operations.ts';
import * as service from './events.service.ts';
import { eventJson } from './events.json.ts';

export interface EventRouteDeps {
  database: DatabaseHandle;
  accountSlugs: AccountSlugs;
}

export function registerEventRoutes(app: FastifyInstance, deps: EventRouteDeps): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.get('/api/events', { schema: operations.eventFeedOperation }, async (request) => {
    const principal = principalOf(request);
    const page = await service.readEventFeed(deps.database, principal, request.query);
    const account = await deps.accountSlugs.get(principal.accountId);
    return { success: 1 as const, events: page.events.map((row) => eventJson(row, account)), next_cursor: page.nextCursor };
  });
}
