// Who acts on a change that the history records: an API token during a request, or no token
// at all (the command-line tool, the first start, the service's own work).
import type { AuditLogRow } from '../db/schema.ts';

/** Who acted, as history entries say it (docs/api.md, "GET /api/user/history"): only `api_token` has a token id. */
export type ActorKind = 'api_token' | 'command_line' | 'first_start' | 'service';
export const ACTOR_KINDS: readonly ActorKind[] = ['api_token', 'command_line', 'first_start', 'service'];

/** Who acts: an API token during a request, or, with no token and no request, one of the others. */
export type Actor = { kind: 'api_token'; tokenId: number; requestId: string } | { kind: Exclude<ActorKind, 'api_token'>; tokenId: null; requestId: null };

/** `ugs`, the command-line tool. */
export const COMMAND_LINE_ACTOR: Actor = { kind: 'command_line', tokenId: null, requestId: null };
/** The first start on an empty database (bootstrap.ts), which issues the first API token. */
export const FIRST_START_ACTOR: Actor = { kind: 'first_start', tokenId: null, requestId: null };
/** The service's own work, no one asked for it (a failing webhook endpoint disabled). */
export const SERVICE_ACTOR: Actor = { kind: 'service', tokenId: null, requestId: null };

/** Who acted in a stored entry; one written by a version before migration 0012 has no `actor`, and says it by its token id. */
export function actorOfEntry(row: Pick<AuditLogRow, 'actor' | 'actor_token_id'>): ActorKind {
  return (row.actor as ActorKind | null) ?? (row.actor_token_id !== null ? 'api_token' : 'command_line');
}
