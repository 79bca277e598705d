// The replica that page views may read from (UGS_DATABASE_READ_URL; docs/api.md, "Reads from
// replicas"): its own small pool, and a check on each connection before it serves. The check
// runs on the connection that will serve the read, never on another: behind a read-only port
// of HAProxy two connections may reach two standbys, and what one of them has replayed says
// nothing about the other. A connection's replay position only moves forward (it stays on one
// server for its life), so a position it showed once holds for every later read on it; its
// lag is asked again when the last answer is older than CHECK_VALID_MS.
//
// The order matters: the position is read in one statement and the rows in a later one, each
// with its own snapshot (read committed), so the rows' snapshot was taken after the position
// was replayed and holds every commit up to it. Read in the same statement, the position could
// be later than the snapshot.
import pg from 'pg';
import { Kysely, PostgresDialect } from './kysely.ts';
import type { Database } from './schema.ts';
import { postgresHotReads, type HotReads, type Queryable } from './hot-reads.ts';
import { postgresPoolOptions, type DatabaseOptions } from './database.ts';
import { isDatabaseUnavailable } from './errors.ts';
import { parseLsn } from './wal-position.ts';

/** How long a connection's lag, once asked, is trusted before it is asked again. */
const CHECK_VALID_MS = 250;

/** What a connection to the replica answered when last checked. */
export interface ReplicaCheck {
  /** The replay position (a promoted node, no longer in recovery: its current write position). */
  replayed: bigint;
  /** The age of the oldest commit it has received and not replayed (0 when it has replayed all it received). */
  lagSeconds: number;
  /** Still a standby (false: the node was promoted, or the URL reaches a primary). */
  standby: boolean;
  /** performance.now() when asked. */
  at: number;
}

/**
 * The replica cannot serve this read: too far behind, or not yet past the caller's position.
 * Not an outage: the read goes to the primary (or answers 503 when the primary is away too).
 */
export class ReplicaNotUsable extends Error {
  constructor(
    readonly reason: 'lagging' | 'behind',
    message: string,
  ) {
    super(message);
    this.name = 'ReplicaNotUsable';
  }
}

const CHECK_SQL = `select pg_is_in_recovery() as standby,
  (case when pg_is_in_recovery() then pg_last_wal_replay_lsn() else pg_current_wal_lsn() end)::text as replayed,
  (case when not pg_is_in_recovery() or pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() then 0
        else coalesce(extract(epoch from now() - pg_last_xact_replay_timestamp()), 0) end)::float8 as lag_seconds`;

export class Replica {
  readonly pool: pg.Pool;
  /** For the rows of no account (signing keys, account slugs): any connection within the lag bound. */
  readonly db: Kysely<Database>;
  private readonly checks = new WeakMap<pg.PoolClient, ReplicaCheck>();
  /** The newest check of any connection, for /readyz. */
  last: ReplicaCheck | undefined;
  private readonly anyPosition: HotReads;

  constructor(
    url: string,
    private readonly maxLagMs: number,
    private readonly options: DatabaseOptions & { poolSize: number },
  ) {
    this.pool = new pg.Pool(postgresPoolOptions(url, options));
    this.pool.on('connect', (client) => client.on('error', (err) => options.onPoolError?.(err)));
    this.pool.on('error', () => undefined);
    this.db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: { connect: () => this.connect(0n), end: () => this.pool.end() } }),
      log: options.onQuery,
    });
    this.anyPosition = this.readsAtLeast(0n);
  }

  /** Hot reads on connections that have replayed `position` and lag no more than the bound. */
  readsAtLeast(position: bigint): HotReads {
    if (position === 0n && this.anyPosition) return this.anyPosition;
    const queryable: Queryable = {
      query: async (config) => {
        const client = await this.connect(position);
        try {
          const result = await client.query(config);
          client.release();
          return result;
        } catch (err) {
          client.release(isDatabaseUnavailable(err) ? (err as Error) : undefined);
          throw err;
        }
      },
    };
    return postgresHotReads(this.db, queryable, this.options.onQuery, this.options.tracing, { namedStatements: !this.options.pgbouncerTransactionMode });
  }

  /** A connection that may serve a read needing `position`; ReplicaNotUsable otherwise. */
  async connect(position: bigint): Promise<pg.PoolClient> {
    const client = await this.pool.connect();
    try {
      let check = this.checks.get(client);
      if (!check || !this.serves(check, position)) check = await this.check(client);
      if (check.lagSeconds * 1000 > this.maxLagMs)
        throw new ReplicaNotUsable('lagging', `the replica lags ${check.lagSeconds.toFixed(3)} s, over UGS_DATABASE_READ_MAX_LAG_MS`);
      if (check.replayed < position) throw new ReplicaNotUsable('behind', 'the replica has not yet replayed the account’s last write');
      return client;
    } catch (err) {
      client.release(err instanceof ReplicaNotUsable ? undefined : (err as Error));
      throw err;
    }
  }

  /** Asks a connection where the replica is; the answer is kept for that connection. */
  async check(client: pg.PoolClient): Promise<ReplicaCheck> {
    const { rows } = await client.query<{ standby: boolean; replayed: string | null; lag_seconds: number }>(CHECK_SQL);
    const row = rows[0];
    const check: ReplicaCheck = {
      replayed: (row.replayed && parseLsn(row.replayed)) || 0n,
      lagSeconds: Math.max(0, Number(row.lag_seconds)),
      standby: row.standby,
      at: performance.now(),
    };
    this.checks.set(client, check);
    this.last = check;
    return check;
  }

  /** A check on a connection of its own, for /readyz. */
  async probe(): Promise<ReplicaCheck> {
    const client = await this.pool.connect();
    try {
      const check = await this.check(client);
      client.release();
      return check;
    } catch (err) {
      client.release(err as Error);
      throw err;
    }
  }

  get maxLagSeconds(): number {
    return this.maxLagMs / 1000;
  }

  private serves(check: ReplicaCheck, position: bigint): boolean {
    return performance.now() - check.at < CHECK_VALID_MS && check.replayed >= position;
  }

  close(): Promise<void> {
    return this.db.destroy();
  }
}
