// The PostgreSQL connection pool, with what a failover asks of it (docs/operations.md, "When the
// primary cannot be reached"; docs/api.md, "Errors"):
// - A new connection gets CONNECT_TIMEOUT_MS to be ready; a wait for one of the pool's own
//   connections, which is no sign of an outage, gets longer (POOL_WAIT_MS).
// - A breaker: once a new connection fails as unreachable (isUnreachable), every checkout fails
//   at once with PrimaryUnreachable (503 unavailable) instead of waiting out a connect timeout
//   of its own, while one probe every PROBE_INTERVAL_MS tries a connection; the first that
//   succeeds closes it. Kysely's queries, the hot reads (pool.query) and the background loops all
//   check out here, so none of them waits either.
// - A connection that met a node that cannot take writes (25006, or a server shutting it down:
//   leavesPool), or whose session began read-only (a standby, a database or role set to
//   default_transaction_read_only), is dropped when it is released, never handed out again: a
//   session keeps the read-only state it began with, so a pool that kept it would refuse writes
//   long after the database took them again.
// - A write transaction's commit goes as one query with the select of the WAL position it
//   reached (commit-position.ts).
import pg from 'pg';
import { runningTimeDeadline } from '../foundations/running-time-deadline.ts';
import { commitAskingPosition } from './commit-position.ts';
import { PrimaryUnreachable, isUnreachable, leavesPool } from './errors.ts';

/**
 * How long a new connection may take to be ready (TCP, startup, authentication), counted in
 * the time this process ran (running-time-deadline.ts: a host starved of CPU is not taken for a
 * gone database). A healthy server
 * answers in milliseconds, tens of them across a region with TLS: a second is far above that, so
 * a slow server is not taken for a gone one, and it is the bound on how long the first request
 * of an outage waits to learn it (HAProxy with no primary accepts the connection and never
 * answers; without this bound every request waited out the 3 s of the pool's wait).
 */
export const CONNECT_TIMEOUT_MS = 1000;
/**
 * How long a request waits for one of the pool's connections when every one is in use: a busy
 * pool, not an outage (heavy operations hold connections for seconds; writes that wait for each
 * other's row locks hold theirs meanwhile), so longer than a connect. An outage is found by the
 * connect timeout and the breaker, not by this wait, which only sheds load: two statement
 * timeouts, so that a request queued behind slow ones is answered rather than refused (with 3 s,
 * contending writes on a host whose every core was busy answered 503 on a healthy database).
 */
export const POOL_WAIT_MS = 10_000;
/**
 * How often the open breaker tries a connection. A quarter second: the service takes writes again
 * within about that of the primary's return, at the cost of one connection attempt at a time per
 * instance (a refused one costs nothing; one a proxy holds lasts CONNECT_TIMEOUT_MS, and the next
 * starts a quarter second after it ends).
 */
export const PROBE_INTERVAL_MS = 250;

/** Whether the pool's breaker is closed (`reachable`) or open (`unreachable`: checkouts fail at once). */
export type PrimaryStatus = 'reachable' | 'unreachable';

export interface FailoverPoolOptions {
  /** SQL run on each new connection before the pool hands it out (session settings), if any. */
  sessionSettings?: string;
  /** Called when the breaker opens (with what a connection met) and when it closes again. */
  onStatusChange?: (status: PrimaryStatus, cause?: unknown) => void;
}

/** Passed to a release so that pg-pool drops the connection instead of keeping it. */
const DROPPED = new Error('the connection met a node that cannot take writes, or began read-only: dropped from the pool');

interface PooledClient extends pg.ClientBase {
  /** The session began read-only: its writes would all be refused (25006). */
  bornReadOnly: boolean;
}

/**
 * The client class of the primary's pool and of the replica's: its own connect deadline, the
 * session settings, and whether the session began read-only.
 */
export function pooledClient(sessionSettings: string | undefined): typeof pg.Client {
  return class extends pg.Client implements PooledClient {
    bornReadOnly = false;

    override connect(): Promise<pg.Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, client: pg.Client) => void)): void;
    override connect(callback?: ((err: Error) => void) | ((err: null, client: pg.Client) => void)): Promise<pg.Client> | undefined {
      // What node-postgres's own connectionTimeoutMillis does, on a deadline that does not run
      // out while this process was not running (running-time-deadline.ts).
      const cancel = runningTimeDeadline(CONNECT_TIMEOUT_MS, () => {
        (this.connection as unknown as { _ending: boolean })._ending = true;
        this.connection.stream.destroy(new Error('timeout expired'));
      });
      // Once connected, a socket error during the session's query is emitted as 'error' before
      // the pool's listener is on (database.ts adds it when the pool hands the connection out):
      // with nobody listening it ended the process. The query fails with it, and so the connect.
      const meanwhile = () => undefined;
      this.on('error', meanwhile);
      // One round trip: the settings, then the session's read-only state (the last result).
      const ready = super
        .connect()
        .finally(cancel)
        .then(() => this.query(`${sessionSettings ? `${sessionSettings}; ` : ''}select current_setting('transaction_read_only') as read_only`))
        .then((results) => {
          const last = (Array.isArray(results) ? results.at(-1) : results) as pg.QueryResult<{ read_only: string }> | undefined;
          this.bornReadOnly = last?.rows[0]?.read_only === 'on';
          return this;
        })
        .finally(() => this.off('error', meanwhile));
      if (!callback) return ready;
      const done = callback as (err: Error | null, client?: pg.Client) => void;
      ready.then(
        (client) => done(null, client),
        (err: Error) => done(err),
      );
      return undefined;
    }
  };
}

type ConnectCallback = (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void;

export class FailoverPool extends pg.Pool {
  #status: PrimaryStatus = 'reachable';
  #probe: NodeJS.Timeout | undefined;
  readonly #Client: typeof pg.Client;
  readonly #onStatusChange: FailoverPoolOptions['onStatusChange'];
  /** Connections that met an error after which they must not serve again (leavesPool). */
  readonly #leaving = new WeakSet<pg.ClientBase>();

  constructor(config: Omit<pg.PoolConfig, 'Client' | 'connectionTimeoutMillis'>, options: FailoverPoolOptions = {}) {
    const Client = pooledClient(options.sessionSettings);
    super({ ...config, Client, connectionTimeoutMillis: POOL_WAIT_MS });
    this.#Client = Client;
    this.#onStatusChange = options.onStatusChange;
    this.on('connect', (client) => this.#watchQueries(client));
  }

  /** The breaker's state (DatabaseHandle.primaryStatus). */
  primaryStatus(): PrimaryStatus {
    return this.#status;
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<pg.PoolClient> | undefined {
    const checkedOut = this.#checkOut();
    if (!callback) return checkedOut;
    checkedOut.then(
      (client) => callback(undefined, client, (release) => client.release(release as Error | boolean | undefined)),
      (err: Error) => callback(err, undefined, () => undefined),
    );
    return undefined;
  }

  override end(): Promise<void>;
  override end(callback: () => void): void;
  override end(callback?: () => void): Promise<void> | undefined {
    clearTimeout(this.#probe);
    if (!callback) return super.end();
    super.end(callback);
    return undefined;
  }

  async #checkOut(): Promise<pg.PoolClient> {
    if (this.#status === 'unreachable') throw new PrimaryUnreachable();
    let client: pg.PoolClient;
    try {
      client = await super.connect();
    } catch (err) {
      if (isUnreachable(err)) this.#open(err);
      throw err;
    }
    // pg-pool gives each checkout its own release; the connection leaves if it must.
    const release = client.release;
    client.release = (err?: Error | boolean) => release(err || (this.#mustLeave(client) ? DROPPED : undefined));
    return client;
  }

  #mustLeave(client: pg.ClientBase): boolean {
    return this.#leaving.has(client) || (client as PooledClient).bornReadOnly === true;
  }

  /**
   * Marks the connection to leave when a query of it fails so (a rejection the caller handles
   * too); a write transaction's commit goes with the query of its position (commit-position.ts).
   */
  #watchQueries(client: pg.ClientBase): void {
    const query = client.query as (...args: unknown[]) => unknown;
    client.query = ((...args: unknown[]) => {
      const isCommit = args[0] === 'commit' && (args[1] === undefined || (Array.isArray(args[1]) && args[1].length === 0));
      const result = isCommit ? commitAskingPosition((text) => query.call(client, text) as Promise<unknown>) : query.apply(client, args);
      if (typeof (result as Promise<unknown> | undefined)?.then === 'function') {
        (result as Promise<unknown>).then(undefined, (err: unknown) => {
          if (leavesPool(err)) this.#leaving.add(client);
        });
      }
      return result;
    }) as typeof client.query;
  }

  #open(cause: unknown): void {
    if (this.#status === 'unreachable' || this.ending) return;
    this.#status = 'unreachable';
    this.#onStatusChange?.('unreachable', cause);
    this.#scheduleProbe();
  }

  #scheduleProbe(): void {
    this.#probe = setTimeout(() => void this.#probeOnce(), PROBE_INTERVAL_MS);
    this.#probe.unref();
  }

  /**
   * One connection of its own, outside the pool (whose connections may all be checked out).
   * Reached, or refused by a server that answers (credentials, a missing database): closed, and
   * requests learn the rest from their own connections.
   */
  async #probeOnce(): Promise<void> {
    const client = new this.#Client(this.options);
    client.on('error', () => undefined);
    let reached: boolean;
    try {
      await client.connect();
      reached = true;
    } catch (err) {
      reached = !isUnreachable(err);
    }
    void client.end().catch(() => undefined);
    if (this.ending) return;
    if (!reached) return this.#scheduleProbe();
    this.#status = 'reachable';
    this.#onStatusChange?.('reachable');
  }
}
