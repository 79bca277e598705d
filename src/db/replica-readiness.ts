// What /readyz says of the replica page views may read from (read-routing.ts; docs/api.md,
// "Reads from replicas"). Apart, so that the handle's type names it without importing the routing.

export interface ReplicaReadiness {
  /** UGS_DATABASE_READ_FROM. */
  mode: 'fallback' | 'replica';
  /** Whether reads can go to the replica at all: Redis holds the write positions (REDIS_URL). */
  in_use: boolean;
  /** The replica answered a check within the connect timeout. */
  reachable: boolean;
  /** Still a standby (false once it was promoted, or when the URL reaches a primary). */
  standby?: boolean;
  /** The age of the oldest commit it received and has not replayed; 0 when it replayed all it received. */
  lag_seconds?: number;
  /** UGS_DATABASE_READ_MAX_LAG_MS, in seconds: a replica lagging more serves nothing. */
  max_lag_seconds: number;
  /** Its replay position (pg_last_wal_replay_lsn). */
  replay_lsn?: string;
}
