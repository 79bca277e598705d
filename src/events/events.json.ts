// An event as the feed, the stream and a webhook delivery all carry it (docs/api.md,
// "Change events"): the one place that turns a row into it.
import type { EventRow } from '../db/schema.ts';
import type { EventType } from '../outbox/outbox.ts';
import type { ChangeEventJson } from './events.schemas.ts';

export function eventJson(row: EventRow, accountSlug: string): ChangeEventJson {
  return {
    id: Number(row.seq),
    type: row.type as EventType,
    occurred_at: row.occurred_at,
    account: accountSlug,
    data: JSON.parse(row.data) as Record<string, unknown>,
  };
}
