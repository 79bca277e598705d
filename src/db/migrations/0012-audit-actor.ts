// Frozen in time (see 0001). Who acted, for every history entry (docs/api.md, "GET /api/user/history"):
// `actor` is `api_token` (actor_token_id says which), `command_line` (ugs), `first_start`
// (the token the first start on an empty database issues) or `service` (its own work, such as
// disabling a failing webhook endpoint). Before this column, a null actor_token_id stood for
// all three that act without a token, and the first start's token said "issued by the
// command-line tool".
//
// Entries written before it are filled in from what they show: a token id is `api_token`; a
// webhook endpoint disabled without one is `service`; the first token of the account
// `default`, named `bootstrap` (what the first start names it), issued without one, is
// `first_start`; anything else without one, `command_line`. An instance of the previous
// version still running during an upgrade writes no actor: readers derive it the same way.
import { sql } from '../kysely.ts';
import type { Kysely, Migration } from 'kysely';

export function auditActor(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable('audit_log').addColumn('actor', 'text').execute();
      await sql`update audit_log set actor = 'api_token' where actor_token_id is not null`.execute(db);
      await sql`update audit_log set actor = 'service' where actor is null and action = 'webhook_endpoint.disable'`.execute(db);
      await sql`
        update audit_log set actor = 'first_start'
        where actor is null and action = 'api_token.issue' and subject_type = 'api_token'
          and subject_id in (
            select cast(t.id as text) from api_tokens t join accounts a on a.id = t.account_id
            where a.slug = 'default' and t.name = 'bootstrap'
              and t.id = (select min(first.id) from api_tokens first where first.account_id = t.account_id)
          )`.execute(db);
      await sql`update audit_log set actor = 'command_line' where actor is null`.execute(db);
    },
  };
}
