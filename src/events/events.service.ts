// The rules of reading change events (docs/api.md, "Change events"), behind the route's `read` scope: the
// caller's account only, and only the environment its token is restricted to; a cursor whose
// events retention removed is refused (410) so that the consumer knows to resync. Where the
// events come from: docs/architecture.md, "The path of a change".
import type { DatabaseHandle } from '../db/database.ts';
import type { Principal } from '../auth/principal.ts';
import { AppError } from '../foundations/errors.ts';
import { EVENT_TYPES, type EventType } from '../outbox/outbox.ts';
import type { EventRow } from '../db/schema.ts';
import * as repository from './events.repository.ts';

export interface FeedInput {
  after?: string;
  limit?: number;
  types?: string;
}

export interface FeedPage {
  events: EventRow[];
  nextCursor: string;
}

/** The types a `types` filter names; null for every type. Unknown names are a 400. */
export function parseEventTypes(text: string | undefined): EventType[] | null {
  if (text === undefined) return null;
  const names = [...new Set(text.split(','))];
  const unknown = names.filter((name) => !(EVENT_TYPES as readonly string[]).includes(name));
  if (unknown.length > 0) {
    throw new AppError('validation_failed', `unknown event type ${unknown.map((name) => `"${name}"`).join(', ')}: types are ${EVENT_TYPES.join(', ')}`, {
      details: [{ field: 'types', issue: 'unknown_type' }],
    });
  }
  return names as EventType[];
}

/**
 * Where a reader starts: after `after`, or after the oldest event kept. A cursor below what
 * retention removed, or beyond the last event handed out, is a 410: the second is not this
 * feed's (another deployment's, or of events lost when the database was restored), and the
 * consumer holds changes the service no longer has.
 */
export async function startingPoint(database: DatabaseHandle, principal: Principal, after: string | undefined): Promise<{ afterSeq: number; lastSeq: number }> {
  const head = await repository.eventHead(database.db, principal.accountId);
  if (after === undefined) return { afterSeq: head.prunedThrough, lastSeq: head.lastSeq };
  const afterSeq = Number(after);
  if (afterSeq < head.prunedThrough) {
    throw new AppError(
      'cursor_expired',
      `events after ${afterSeq} are no longer kept (events are kept for the retention period): resynchronise, then read on from next_cursor of a read without "after"`,
    );
  }
  if (afterSeq > head.lastSeq)
    throw new AppError(
      'cursor_expired',
      `event ${afterSeq} is not in this account's feed (a cursor of another deployment, or of events lost when the database was restored): resynchronise, then read on without "after"`,
    );
  return { afterSeq, lastSeq: head.lastSeq };
}

export async function readEventFeed(database: DatabaseHandle, principal: Principal, input: FeedInput): Promise<FeedPage> {
  const types = parseEventTypes(input.types);
  const limit = input.limit ?? 100;
  const start = await startingPoint(database, principal, input.after);
  const events = await repository.eventsAfter(database.db, {
    accountId: principal.accountId,
    environment: principal.allowedEnvironment,
    afterSeq: start.afterSeq,
    limit,
    types,
  });
  // A full page goes on after its last event; a short one read everything up to the head
  // read before it, so the next read may start there even when filters kept nothing.
  const last = events.length > 0 ? Number(events[events.length - 1].seq) : start.afterSeq;
  return { events, nextCursor: String(events.length === limit ? last : Math.max(last, start.lastSeq)) };
}
