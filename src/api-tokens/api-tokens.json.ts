// API tokens as the API answers them: an allow-list of fields, so neither a token value nor
// its hash can reach a response.
import type { AuditLogRow } from '../db/schema.ts';
import { actorOfEntry } from '../audit/audit.repository.ts';
import type { ApiTokenListing } from './api-tokens.repository.ts';
import { apiTokenStatus } from './api-tokens.service.ts';
import type { Scope } from '../auth/principal.ts';
import type { ApiTokenJson } from './api-tokens.schemas.ts';

export function apiTokenJson(token: ApiTokenListing, now: Date): ApiTokenJson {
  return {
    id: token.id,
    name: token.name,
    token_start: token.token_start,
    scopes: token.scopes.split(',') as Scope[],
    allowed_environment: token.allowed_environment,
    default_environment: token.default_environment,
    status: apiTokenStatus(token, now),
    expires_at: token.expires_at,
    revoked_at: token.revoked_at,
    created_at: token.created_at,
  };
}

export function apiTokenHistoryEntryJson(entry: AuditLogRow) {
  return {
    id: Number(entry.id),
    action: entry.action as 'api_token.issue' | 'api_token.revoke',
    api_token_id: Number(entry.subject_id),
    actor: actorOfEntry(entry),
    actor_token_id: entry.actor_token_id === null ? null : Number(entry.actor_token_id),
    request_id: entry.request_id,
    created_at: entry.created_at,
  };
}
