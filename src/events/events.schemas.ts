// Change events over HTTP, declared once: validation, the response allow-list and the
// OpenAPI document (docs/api.md, "Change events").
import { Type, type Static } from 'typebox';
import { EVENT_TYPES } from '../outbox/outbox.ts';

// A later release may add types (docs/api.md, "Change events"): not a breaking change for npm run check:api.
export const EventTypeName = Type.Enum([...EVENT_TYPES], { title: 'EventType', type: 'string', 'x-ugs-open-enum': true });

export const ChangeEvent = Type.Object(
  {
    id: Type.Integer({
      minimum: 1,
      description:
        "The event's place in its account's feed: ids grow in the order the feed gives them, and are never given out twice, not even after a restore of the database. Not consecutive: at least the time of the change in microseconds since 1970, below 2^53.",
      examples: [1795684443221000],
    }),
    type: EventTypeName,
    occurred_at: Type.String({ format: 'date-time', description: 'When the change was made.' }),
    account: Type.String({ description: 'The slug of the account whose change it is.', examples: ['acme'] }),
    data: Type.Record(Type.String(), Type.Unknown(), {
      description:
        "What changed. A user group's events: team_id, user_group_id, api_environment_tag, generation, and changed_fields, changes ({field: {old, new}} for a rename, a move or tags) and grace_period_ends_at where they apply. An API token's: api_token_id, allowed_environment. A signing key's: kid, algorithm. A webhook endpoint's: webhook_endpoint_id, url, environment. Never a token, a key or a secret.",
      examples: [{ team_id: 17, user_group_id: 'customer-42', api_environment_tag: 'Customer', generation: 0, changed_fields: ['properties'] }],
    }),
  },
  { title: 'ChangeEvent', additionalProperties: false },
);
export type ChangeEventJson = Static<typeof ChangeEvent>;

const Cursor = Type.String({
  pattern: '^(0|[1-9][0-9]{0,15})$',
  description: 'An event id (next_cursor of the previous page): the feed goes on after it. Absent: from the oldest event kept.',
  examples: ['1795684443220000'],
});

export const EventTypesFilter = Type.String({
  pattern: '^[a-z_.]+(,[a-z_.]+)*$',
  description: 'Comma-separated event types; absent: every type.',
  examples: ['user_group.updated,user_group.deleted'],
});

export const EventFeedQuery = Type.Object(
  {
    after: Type.Optional(Cursor),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, description: 'At most this many events, 1-500 (default 100).' })),
    types: Type.Optional(EventTypesFilter),
  },
  { additionalProperties: false },
);

export const EventFeedResponse = Type.Object(
  {
    success: Type.Literal(1),
    events: Type.Array(ChangeEvent),
    next_cursor: Type.String({
      description:
        "Where the next request goes on (its `after`): the last event's id, or, when there was none, the point this read reached. Always present: a consumer polls with it.",
      examples: ['1795684443221000'],
    }),
  },
  { title: 'EventFeed' },
);
