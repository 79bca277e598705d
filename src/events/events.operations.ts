// Change events as the OpenAPI document describes them (docs/api.md, "Change events"), and
// their code samples.
import { apiTokenAccess } from '../auth/route-access.ts';
import { AUTH_ERRORS, errorResponses } from '../http/envelope.schemas.ts';
import type { CodeSample } from '../http/openapi.ts';
import * as schemas from './events.schemas.ts';

const tags = ['Change events'];

export const eventFeedOperation = {
  tags,
  operationId: 'listEvents',
  summary: "The account's change events, in order",
  description: [
    'Needs the `read` scope. Every committed change to a user group, an API token or an embed signing key of the account, oldest first, each with an id that grows and is never given out twice;',
    "a token restricted to one environment sees only that environment's events. Poll with `after` = the `next_cursor` of the last answer.",
    'Events are kept for `UGS_EVENT_RETENTION` (7 days by default): a cursor older than that is `410 cursor_expired`, and the consumer should resynchronise.',
  ].join(' '),
  ...apiTokenAccess('read', 'token', 'reading change events'),
  querystring: schemas.EventFeedQuery,
  response: {
    200: { ...schemas.EventFeedResponse, 'x-response-description': 'The next events, and where to go on.' },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed', 'cursor_expired'),
  },
};

const client =
  "import { UserGroupServiceClient } from '@ugs/client';\nconst ugs = new UserGroupServiceClient({ baseUrl: process.env.UGS!, apiToken: process.env.UGS_TOKEN! });\n";

export const eventCodeSamples: Record<string, CodeSample[]> = {
  listEvents: [
    {
      lang: 'Shell',
      label: 'curl',
      source: 'curl "$UGS/api/events?after=1795684443220000&types=user_group.updated,user_group.deleted" -H "Authorization: Token $UGS_TOKEN"',
    },
    { lang: 'TypeScript', label: '@ugs/client', source: `${client}const { events, next_cursor } = await ugs.listEvents({ after: '1795684443220000' });` },
  ],
};
