// Table types as the database sees them. They are kept apart from the API's types: columns
// use portable types (text timestamps, 0/1 booleans, JSON as text) so that one set of
// queries runs on SQLite and PostgreSQL alike.
import type { Generated, Selectable } from 'kysely';

export type Environment = 'Customer' | 'Testing';

interface AccountsTable {
  id: Generated<number>;
  slug: string;
  /** JSON array of the account's level names, shallowest first; null: none declared. */
  hierarchy_levels: string | null;
  created_at: string;
}

export interface ApiTokensTable {
  id: Generated<number>;
  account_id: number;
  name: string | null;
  /** SHA-256 of the whole token, hex. The token itself is never stored. */
  token_hash: string;
  /** The first characters of the token, enough to recognise it in a list. */
  token_start: string;
  /** Comma-separated, e.g. `read,write`. */
  scopes: string;
  /** The only environment this token may use, or null for any. */
  allowed_environment: Environment | null;
  default_environment: Environment;
  expires_at: string | null;
  revoked_at: string | null;
  created_at: string;
}

/** A column's type, written as a value so that the table's column list exists at run time too. */
const column = <T>() => undefined as unknown as T;

/**
 * Every column of user_groups, named once: the table type (UserGroupsTable) and the column
 * list that every prepared read names (USER_GROUP_COLUMNS in user-groups/group-sql.ts) both
 * come from here.
 */
export const USER_GROUP_COLUMN_TYPES = {
  team_id: column<Generated<number>>(),
  account_id: column<number>(),
  environment: column<Environment>(),
  provided_id: column<string>(),
  name: column<string>(),
  /** JSON text, exactly what the API returns; null until given. */
  mapping: column<string | null>(),
  properties: column<string | null>(),
  is_demo_group: column<number>(),
  /** The parent's team_id (same account and environment), or null for a root. */
  parent_team_id: column<number | null>(),
  hierarchy_level: column<string | null>(),
  /** JSON array of distinct tags in code-point order, exactly what the API returns. */
  group_tags: column<string>(),
  /** SHA-256 of the current user group token, for lookups by token. */
  token_hash: column<string>(),
  /** The current token, AES-256-GCM encrypted under a versioned key. */
  token_ciphertext: column<string>(),
  /** Incremented on every rotation; short-lived embed tokens carry it. */
  token_generation: column<Generated<number>>(),
  created_at: column<string>(),
  updated_at: column<string>(),
};

export type UserGroupsTable = typeof USER_GROUP_COLUMN_TYPES;

/** One row per tag of a group, for the tag filter; `scope` is `<account_id>/<environment>`. */
interface UserGroupTagsTable {
  team_id: number;
  scope: string;
  tag: string;
}

/** The tenant's tag set (migration 0014): every tag its groups carry, and those created before any group has them. */
interface GroupTagSetTable {
  account_id: number;
  environment: Environment;
  name: string;
}

/** Tokens retired by a rotation with a grace period: still good on the embed side until expires_at. */
interface RetiredTokensTable {
  token_hash: string;
  team_id: number;
  /** The group's account and environment (migration 0005): every statement names them. */
  account_id: number;
  environment: Environment;
  expires_at: string;
}

interface AuditLogTable {
  id: Generated<number>;
  account_id: number;
  /** `user_group` or `api_token`. */
  subject_type: string;
  /** team_id or API token id, as text. */
  subject_id: string;
  /** A group's environment; for an API token, the environment it is restricted to (null: none). */
  environment: Environment | null;
  provided_id: string | null;
  action: string;
  /** JSON array of changed field names, for updates. */
  changed_fields: string | null;
  /** JSON object: field -> { old, new }, for parent changes, renames and tag changes. */
  details: string | null;
  /** The acting API token's id; null when something else acted (actor says what). */
  actor_token_id: number | null;
  /** Who acted: api_token, command_line, first_start or service (migration 0012; null on entries an older version wrote meanwhile). */
  actor: string | null;
  request_id: string | null;
  created_at: string;
}

/** Keys that sign embed tokens (migration 0004). Times are ISO-8601 UTC text. */
interface EmbedSigningKeysTable {
  /** The JWK thumbprint (RFC 7638) of the public key. */
  kid: string;
  algorithm: string;
  public_jwk: string;
  private_key_sealed: string;
  created_at: string;
  /** Signs from here on, until the next key activates. */
  activates_at: string;
  /** When the next key took over; null for the newest key. */
  retired_at: string | null;
  /** At least the latest `exp` this key signed: it stays published until then. */
  signed_until: string;
}

/** The secret keys the database knows (migration 0018): the highest sealing_order is the one it seals under. */
interface SecretKeysTable {
  /** The key's id (keyring.ts), which begins every value sealed under it. */
  key_id: string;
  sealing_order: number;
  introduced_at: string;
}

/** A change's event, written in the change's transaction (migration 0006); JSON `data`. */
interface EventOutboxTable {
  id: Generated<number>;
  account_id: number;
  /** A group's environment; an API token's restriction (null: none); null for a signing key. */
  environment: Environment | null;
  type: string;
  occurred_at: string;
  data: string;
}

/** The feed: an account's events numbered by `seq` in the order they were sequenced. */
interface EventsTable extends EventOutboxTable {
  seq: number;
}

interface EventHeadsTable {
  account_id: number;
  last_seq: number;
  /** Every event of the account up to this seq was removed by retention. */
  pruned_through: number;
}

interface WebhookEndpointsTable {
  id: Generated<number>;
  account_id: number;
  url: string;
  /** JSON array of event types; null: every type. */
  types: string | null;
  description: string | null;
  /** The only environment whose events it receives; null: every event. */
  environment: Environment | null;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: string | null;
  created_at: string;
  failing_since: string | null;
  disabled_at: string | null;
  /** When the endpoint's next delivery is due; null: idle, nothing to deliver (migration 0006). */
  next_attempt_at: string | null;
  lease_owner: string | null;
  lease_until: string | null;
  /** The account's event seq up to which its deliveries are made (migration 0009). */
  cursor_seq: Generated<number>;
  /** JSON [[after, through], ...]: seqs made while it was disabled, never delivered (through null: still disabled). */
  skipped_seqs: string | null;
}

interface WebhookDeliveriesTable {
  id: Generated<number>;
  endpoint_id: number;
  account_id: number;
  event_seq: number;
  event_type: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: Generated<number>;
  next_attempt_at: string;
  created_at: string;
  finished_at: string | null;
}

interface WebhookAttemptsTable {
  id: Generated<number>;
  delivery_id: number;
  account_id: number;
  attempted_at: string;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
}

/** An Idempotency-Key an account sent in the last 24 h, and the answer it got (migration 0007). */
interface IdempotencyKeysTable {
  id: Generated<number>;
  account_id: number;
  /** The API token that sent the key: keys are per token (migration 0008). */
  api_token_id: number;
  idempotency_key: string;
  /** SHA-256 (hex) of the request's method, path and canonical JSON body. */
  request_hash: string;
  state: 'running' | 'done';
  /** The attempt running the request; null once done. */
  owner: string | null;
  locked_until: string | null;
  response_status: number | null;
  /** The answer, sealed under the secret key (purpose idempotent-answer). */
  response_sealed: string | null;
  created_at: string;
  expires_at: string;
}

/** An event stream open on some instance, while its lease lasts (migration 0010). */
interface EventStreamsTable {
  id: Generated<number>;
  account_id: number;
  api_token_id: number;
  opened_at: string;
  /** The instance serving it renews this; past it, the stream no longer counts. */
  lease_until: string;
}

/** A process serving this database, while its heartbeat lasts (migration 0017, an expand change). */
interface InstancesTable {
  id: string;
  host: string;
  pid: number;
  version: string;
  /** The last migration its code knows. */
  schema: string;
  /** JSON: the settings every instance of one database must share. */
  settings: string;
  started_at: string;
  seen_at: string;
}

/**
 * The heavy operations an account runs (migration 0016; docs/api.md, "Heavy operations"): one
 * row per slot, held by one operation while its lease lasts.
 */
interface HeavyOperationsTable {
  account_id: number;
  /** 0 to the per-account limit less one. */
  slot: number;
  /** The instance and the operation holding it (random), for compare-and-swap. */
  holder: string;
  /** What holds it: upsert, tag_rename, tag_delete, export. */
  operation: string;
  started_at: string;
  lease_until: string;
}

export interface Database {
  accounts: AccountsTable;
  api_tokens: ApiTokensTable;
  user_groups: UserGroupsTable;
  user_group_tags: UserGroupTagsTable;
  group_tag_set: GroupTagSetTable;
  retired_tokens: RetiredTokensTable;
  audit_log: AuditLogTable;
  embed_signing_keys: EmbedSigningKeysTable;
  event_outbox: EventOutboxTable;
  events: EventsTable;
  event_heads: EventHeadsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  idempotency_keys: IdempotencyKeysTable;
  event_streams: EventStreamsTable;
  instances: InstancesTable;
  secret_keys: SecretKeysTable;
  heavy_operations: HeavyOperationsTable;
}

export type AccountRow = Selectable<AccountsTable>;
export type InstanceRow = Selectable<InstancesTable>;
export type ApiTokenRow = Selectable<ApiTokensTable>;
export type UserGroupRow = Selectable<UserGroupsTable>;
export type AuditLogRow = Selectable<AuditLogTable>;
export type EmbedSigningKeyRow = Selectable<EmbedSigningKeysTable>;
export type EventRow = Selectable<EventsTable>;
export type WebhookEndpointRow = Selectable<WebhookEndpointsTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;
