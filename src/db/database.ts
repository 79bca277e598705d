// A database factory per dialect. Everything above this file speaks Kysely and does not
// know which one it got, except where the two truly differ (see transaction.ts, migrate.ts).
import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { Kysely, PostgresAdapter, PostgresDialect, SqliteDialect, sql } from './kysely.ts';
import type { LogEvent, SqliteDatabase } from 'kysely';
import type { Database } from './schema.ts';
import { BoundedMap } from '../foundations/bounded-map.ts';
import { postgresHotReads, sqliteHotReads, type HotReads } from './hot-reads.ts';
import { withUnaryPlusParameters } from './sqlite-parameters.ts';
import { retryWhileLockedSync } from './sqlite-lock.ts';
import { SqliteDialectWithWriteLine } from './sqlite-write-line.ts';
import { watchSqliteFile, type FileProblem, type SqliteFileWatch } from './sqlite-file-watch.ts';
import type { QueryTracing } from '../tracing/trace-context.ts';
import { FailoverPool, POOL_WAIT_MS, pooledClient, type PrimaryStatus } from './postgres-pool.ts';
import type { ReplicaReadiness } from './replica-readiness.ts';

export type Dialect = 'sqlite' | 'postgres';

/** The dialect a Kysely instance (or transaction) speaks, for the few statements that differ. */
export function dialectOf(db: Kysely<Database>): Dialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite';
}

/** The node that answered a page view's read (the `pool` label of ugs_database_reads_total). */
export type ReadPool = 'primary' | 'replica';

/**
 * The reads of a page view (docs/api.md, "Reads from replicas"): on the primary, or, with
 * UGS_DATABASE_READ_URL, on a replica when it is known to hold every write the account has
 * been answered (read-routing.ts). Each says whose rows it reads, which decides that.
 */
export interface PageViewReads {
  /** Hot reads of one account's rows (a group by its identity). */
  ofAccount<T>(accountId: number, read: (reads: HotReads) => Promise<T>): Promise<T>;
  /**
   * A hot read by a token's hash, which learns the account from the row it finds (`accountOf`):
   * a row found on a replica is read again there once the account's position is known.
   */
  findingAccount<T>(read: (reads: HotReads) => Promise<T | undefined>, accountOf: (row: T) => number): Promise<T | undefined>;
  /** Rows of no account (the embed signing keys, account slugs). */
  shared<T>(read: (db: Kysely<Database>) => Promise<T>): Promise<T>;
  /** Told of every read routed here, with the node that answered it (the metrics). */
  onRead: Set<(pool: ReadPool) => void>;
}

export interface DatabaseHandle {
  /** Transactions and every query that is not a hot read (Kysely). */
  db: Kysely<Database>;
  /** The hot reads (hot-reads.ts): committed rows, batched per event-loop turn. */
  reads: HotReads;
  /**
   * Long reads of committed rows outside any transaction (an event stream's pages of the
   * feed). On SQLite a read-only connection of their own: `db`'s one connection is every
   * write's, and reads queued there held it from them (openSqlite). On PostgreSQL, `db`.
   */
  committedReads: Kysely<Database>;
  dialect: Dialect;
  /** A redacted description for logs (never a password). */
  description: string;
  /** The PostgreSQL connection pool (for its gauges); absent on SQLite. */
  pool?: pg.Pool;
  /**
   * PostgreSQL: whether the primary was reachable at the last try (postgres-pool.ts): while it is
   * `unreachable`, everything that needs it fails at once (503 unavailable) until the probe
   * reaches it again. Answers at once, never waits for the database. Absent on SQLite (and
   * then every page view tries the primary first in the `fallback` mode: read-routing.ts).
   */
  primaryStatus?: () => PrimaryStatus;
  /** SQLite: how long a write waits for another process's write lock (sqlite-lock.ts). */
  lockWaitMs?: number;
  /** Called after every write transaction commits (the event sequencer moves what it wrote). */
  onCommit: Set<() => void>;
  /** Where page views read (read-routing.ts); the primary alone unless a replica is configured. */
  pageViews: PageViewReads;
  /**
   * PostgreSQL with a replica (read-routing.ts): after a write transaction commits, and before it
   * is answered, `positionAfterCommit` reads the positions its commits were sent with
   * (commit-position.ts), else asks on the connection it committed on, and `record` is awaited
   * with the accounts whose history it wrote (transaction.ts).
   */
  afterWrite?: {
    positionAfterCommit(conn: Kysely<Database>, asked: readonly Promise<string | undefined>[]): Promise<bigint>;
    record(accountIds: ReadonlySet<number>, position: bigint): Promise<void>;
  };
  /** What the replica can do now, for /readyz; absent without UGS_DATABASE_READ_URL. */
  replicaReadiness?: () => Promise<ReplicaReadiness>;
  /** SQLite: what became of the opened file, if it is no longer at its path (sqlite-file-watch.ts); absent on PostgreSQL. */
  fileProblem?: () => FileProblem | null;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** Called for errors of idle pooled connections, which would otherwise crash the process. */
  onPoolError?: (err: Error) => void;
  /** PostgreSQL: connections kept at most (default 10). */
  poolSize?: number;
  /**
   * PostgreSQL behind PgBouncer in transaction pool mode, where consecutive statements of one
   * client may run on different server connections: the hot reads use unnamed statements (a
   * named one is prepared on one server connection only), and no statement_timeout startup
   * parameter is sent (PgBouncer refuses unknown ones; set it on the role instead).
   */
  pgbouncerTransactionMode?: boolean;
  /** Called after every query with its duration (Kysely's log event), e.g. for metrics. */
  onQuery?: (event: LogEvent) => void;
  /** SQLite: how long a write waits for another process's write lock before failing (default 5 s). */
  lockWaitMs?: number;
  /** Statements as spans of the request that sent them; absent when tracing is off. */
  tracing?: QueryTracing;
  /**
   * SQLite: called within a second when the opened database file is deleted or replaced at its
   * path, and again if it is put back (sqlite-file-watch.ts). Without it nothing is timed;
   * writes are refused either way.
   */
  onFileChange?: (problem: FileProblem | null) => void;
  /** PostgreSQL: called when the primary is found unreachable (with what a connection met), and when it is reached again (postgres-pool.ts). */
  onPrimaryStatus?: (status: PrimaryStatus, cause?: unknown) => void;
}

/** Kysely's log hook: onQuery, and a span per statement when tracing is on (nothing more when it is off). */
function queryLog({ onQuery, tracing }: DatabaseOptions): ((event: LogEvent) => void) | undefined {
  if (!tracing) return onQuery;
  return (event) => {
    onQuery?.(event);
    tracing.statement(event);
  };
}

const INT8_OID = 20;
/** SQLite: how long opening waits for another process that holds the file (switching it to WAL, say). */
const OPEN_LOCK_WAIT_MS = 5000;
/** PostgreSQL: a statement running longer is cancelled by the server; the client gives up a second later. */
const STATEMENT_TIMEOUT_MS = 5000;
/**
 * PostgreSQL: a wait for a lock ends first, as a lock timeout (db/errors.ts, isLockTimeout). It
 * applies to each lock a statement waits for, and a row lock is two (the row's place in line,
 * then its holder): below half the statement timeout, so that both end before it.
 */
const LOCK_TIMEOUT_MS = 2000;

export function openDatabase(url: string, options: DatabaseOptions = {}): DatabaseHandle {
  if (url.startsWith('sqlite:')) return openSqlite(url.slice('sqlite:'.length), options);
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) return openPostgres(url, options);
  throw new Error(`DATABASE_URL must start with sqlite: or postgres://, got "${redactUrl(url)}"`);
}

function openSqlite(file: string, options: DatabaseOptions): DatabaseHandle {
  if (!file) throw new Error('DATABASE_URL=sqlite:<file path> needs a file path');
  // The hot reads use a second connection to the same file (hot-reads.ts), which an
  // in-memory database cannot have: it would be another, empty database.
  if (file === ':memory:' || file.startsWith('file:'))
    throw new Error('DATABASE_URL=sqlite: needs a file path (an in-memory database cannot be shared by two connections)');
  createPrivately(file);
  const connection = new SQLite(file);
  const watch = watchSqliteFile(file, { onChange: options.onFileChange });
  // WAL lets readers run beside the one writer, also across processes sharing the file;
  // synchronous=FULL makes an acknowledged commit survive a power cut, not only a crash.
  // Switching a new file to WAL needs it to itself for a moment: wait for that at start, when
  // nothing is being served. The busy timeout does not cover every case: when another process
  // is writing the new file's first page (two instances starting together), SQLite answers
  // BUSY at once rather than risk a deadlock, so the switch is tried again until the wait is up.
  // Then no busy timeout: it would wait for another process's lock on the event loop; writes
  // wait for it asynchronously instead (sqlite-lock.ts).
  connection.pragma(`busy_timeout = ${OPEN_LOCK_WAIT_MS}`);
  retryWhileLockedSync(() => connection.pragma('journal_mode = WAL'), OPEN_LOCK_WAIT_MS);
  connection.pragma('synchronous = FULL');
  connection.pragma('busy_timeout = 0');
  connection.pragma('foreign_keys = ON');
  const db = new Kysely<Database>({ dialect: new SqliteDialectWithWriteLine({ database: withStatementCache(connection, watch) }), log: queryLog(options) });
  const reads = sqliteHotReads(db, file, options.onQuery, options.tracing);
  // An account's event streams each read every one of its events, a page at a time: on `db`,
  // under that account's bulk work, those reads held the write connection most of the time,
  // and every other account's writes waited behind them (docs/performance.md, "Why the code is
  // the way it is"). In WAL mode a connection of their own reads what is committed beside the
  // writer, and neither waits for the other.
  const committedReads = new Kysely<Database>({ dialect: new SqliteDialect({ database: readOnlyConnection(file) }), log: queryLog(options) });
  return withPrimaryPageViews({
    db,
    reads,
    committedReads,
    dialect: 'sqlite',
    description: `sqlite:${file}`,
    lockWaitMs: options.lockWaitMs,
    onCommit: new Set(),
    fileProblem: watch.problem,
    close: async () => {
      watch.close();
      await reads.close();
      await committedReads.destroy();
      await db.destroy();
    },
  });
}

/**
 * PostgreSQL: what each new connection's session sets before the pool hands it out.
 * - jit = off: PostgreSQL compiles a statement whose estimated cost passes jit_above_cost, and
 *   without statistics a batched page's estimate grows with the table: on a large,
 *   never-analyzed table compiling took far longer than the statement it compiled
 *   (docs/performance.md, "Why the code is the way it is").
 * - lock_timeout: a wait for another transaction's lock ends as 55P03, which the API answers
 *   429 lock_timeout rather than 503 (db/errors.ts, isLockTimeout). Not a startup parameter,
 *   as statement_timeout is: PgBouncer refuses one it was not told to ignore.
 * Behind PgBouncer in transaction mode a session setting would reach one server connection
 * only: none is made, set them on the role there (docs/operations.md, "PgBouncer").
 */
const SESSION_SETTINGS = `set jit = off; set lock_timeout = ${LOCK_TIMEOUT_MS}`;

// bigint ids (team_id) fit in a JavaScript number for the next 2^53 groups.
const PG_TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * The replica's pool settings (replica.ts): the primary's client (its session settings and
 * connect deadline, postgres-pool.ts), the same bounded connect (a replica that is gone is learnt of as fast as a primary that is), and no
 * breaker: a replica's connection is checked before each use.
 */
export function postgresPoolOptions(url: string, options: DatabaseOptions): pg.PoolConfig {
  return {
    connectionString: url,
    Client: pooledClient(options.pgbouncerTransactionMode ? undefined : SESSION_SETTINGS),
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: POOL_WAIT_MS,
    idleTimeoutMillis: 30_000,
    ...(options.pgbouncerTransactionMode ? {} : { statement_timeout: STATEMENT_TIMEOUT_MS }),
    query_timeout: STATEMENT_TIMEOUT_MS + 1000,
    types: PG_TYPES,
  };
}

function openPostgres(url: string, options: DatabaseOptions): DatabaseHandle {
  // Bounded waits everywhere: a request never hangs on an unreachable database, and learns of
  // an outage within a connect timeout, or at once while the breaker is open (postgres-pool.ts).
  const pool = new FailoverPool(
    {
      connectionString: url,
      max: options.poolSize ?? 10,
      ...(options.pgbouncerTransactionMode ? {} : { statement_timeout: STATEMENT_TIMEOUT_MS }),
      query_timeout: STATEMENT_TIMEOUT_MS + 1000,
      types: PG_TYPES,
    },
    { sessionSettings: options.pgbouncerTransactionMode ? undefined : SESSION_SETTINGS, onStatusChange: options.onPrimaryStatus },
  );
  // node-postgres emits 'error' on a client whose socket dies. The pool listens only while a
  // client is idle; a client checked out at that moment (a query in flight, a transaction
  // between statements) would have no listener and crash the process. Every client gets one
  // for its whole life: the failed query itself is rejected (and answered 503), and the pool
  // drops the broken client when it is released.
  pool.on('connect', (client) => client.on('error', (err) => options.onPoolError?.(err)));
  pool.on('error', () => undefined); // already reported by the client's own listener above
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), log: queryLog(options) });
  return withPrimaryPageViews({
    db,
    reads: postgresHotReads(db, pool, options.onQuery, options.tracing, { namedStatements: !options.pgbouncerTransactionMode }),
    committedReads: db,
    dialect: 'postgres',
    description: redactUrl(url),
    pool,
    primaryStatus: () => pool.primaryStatus(),
    onCommit: new Set(),
    close: () => db.destroy(),
  });
}

/** Page views read the primary: no replica is configured (or, until read-routing.ts installs one, not yet). */
function withPrimaryPageViews(handle: Omit<DatabaseHandle, 'pageViews'>): DatabaseHandle {
  const onRead = new Set<(pool: ReadPool) => void>();
  const counted = <T>(answer: Promise<T>) =>
    answer.then((value) => {
      for (const listener of onRead) listener('primary');
      return value;
    });
  return Object.assign(handle, {
    pageViews: {
      ofAccount: <T>(_accountId: number, read: (reads: HotReads) => Promise<T>) => counted(read(handle.reads)),
      findingAccount: <T>(read: (reads: HotReads) => Promise<T | undefined>) => counted(read(handle.reads)),
      shared: <T>(read: (db: Kysely<Database>) => Promise<T>) => counted(read(handle.db)),
      onRead,
    },
  });
}

/** SQLite: a connection that only reads, and never waits for a lock (in WAL mode a read waits for no writer). */
function readOnlyConnection(file: string): SQLite.Database {
  const connection = new SQLite(file);
  connection.pragma('busy_timeout = 0');
  connection.pragma('query_only = ON');
  return connection;
}

/**
 * The database file holds sealed tokens and token hashes: a new file and the directories
 * made for it are readable by their owner only. SQLite gives the -wal and -shm files the
 * database file's mode. An existing file or directory is left as it is.
 */
function createPrivately(file: string): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true, mode: 0o700 });
  fs.closeSync(fs.openSync(file, 'a', 0o600));
}

const STATEMENT_CACHE_SIZE = 256;

/**
 * Kysely prepares every query anew, and preparing costs more than running a lookup by
 * key. Statements are reused by their SQL text instead: safe because Kysely's SQLite driver
 * runs one query at a time and never streams, and SQLite re-prepares a statement by itself
 * after a schema change. Statements that write are guarded by `watch` (below).
 */
function withStatementCache(connection: SQLite.Database, watch: Pick<SqliteFileWatch, 'assertIntact'>): SqliteDatabase {
  const statements = new BoundedMap<string, SqliteStatement>(STATEMENT_CACHE_SIZE);
  return {
    close: () => connection.close(),
    prepare(sqlText: string) {
      let statement = statements.get(sqlText);
      if (!statement) {
        const prepared = connection.prepare(withUnaryPlusParameters(sqlText));
        statement = prepared.reader ? prepared : guardedWrite(connection, prepared, watch);
        statements.set(sqlText, statement);
      }
      return statement;
    },
  };
}

type SqliteStatement = ReturnType<SqliteDatabase['prepare']>;

/**
 * A write commits only while the database file at the path is the one opened
 * (sqlite-file-watch.ts): checked before a transaction begins (or a write on its own runs),
 * and again just before its COMMIT, so that a file deleted or replaced meanwhile rolls the
 * transaction back and the error is answered 503 storage_unavailable with nothing changed.
 * Never after a commit: a committed write is acknowledged, never answered 5xx (a file that
 * goes in the instant between the last check and the commit holds that write, in the copy
 * the process keeps open; the next write is refused). A rollback is never stopped.
 */
function guardedWrite(connection: SQLite.Database, statement: SQLite.Statement, watch: Pick<SqliteFileWatch, 'assertIntact'>): SqliteStatement {
  const rollback = /^\s*rollback\b/i.test(statement.source);
  const commit = /^\s*(commit|end)\b/i.test(statement.source);
  return {
    reader: false,
    all: (parameters) => statement.all(parameters),
    iterate: (parameters) => statement.iterate(parameters),
    run(parameters) {
      if (commit || (!connection.inTransaction && !rollback)) watch.assertIntact();
      return statement.run(parameters);
    },
  };
}

/**
 * The database answers, and holds the service's tables (one created again empty is not ready:
 * db/errors.ts, storageFault); whether it takes writes (PostgreSQL: a session of a standby, or
 * of a database set read-only, is read-only; SQLite: always, the file checks are elsewhere).
 */
export async function pingDatabase(handle: Pick<DatabaseHandle, 'db' | 'dialect'>): Promise<boolean> {
  if (handle.dialect === 'sqlite') {
    await sql`select 1 from kysely_migration limit 1`.execute(handle.db);
    return true;
  }
  const { rows } = await sql<{ read_only: string }>`select current_setting('transaction_read_only') as read_only from kysely_migration limit 1`.execute(
    handle.db,
  );
  return rows[0]?.read_only !== 'on';
}

export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}
