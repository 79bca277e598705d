// The hottest reads (a group by its identity or by its token hash, an API token by its hash)
// run straight on the driver instead of through Kysely's executor. Kysely still builds and
// compiles them (prepared-read.ts); what they skip is its per-query machinery: a connection
// mutex, half a dozen awaits, the logging wrapper: a large share of a get-or-create hit inside
// the loaded server (docs/performance.md, "What was optimized").
//
// And they run together: the reads asked for during one turn of the event loop wait for its
// end (end-of-turn.ts) and go as one batch. On SQLite a batch is one read transaction, which
// saves every read but the first its locking system calls; on PostgreSQL the calls of one
// prepared query become one statement (its `batched` form), which saves round trips, the
// wake-ups of a database process and that process's per-statement work (the figures:
// docs/performance.md, "Calibration"). A batch runs after every request in it arrived, so each still
// sees everything committed before it was asked.
//
// SQLite: a second connection to the same file, used for nothing else. In WAL mode it sees
// exactly what has been committed, never another request's open transaction on the main
// connection, which is why these reads cannot simply skip the mutex there. PostgreSQL:
// pool.query with named statements, parsed and planned once per connection.
import crypto from 'node:crypto';
import SQLite from 'better-sqlite3';
import type pg from 'pg';
import type { CompiledQuery, Kysely, LogEvent } from 'kysely';
import type { BatchedRow, BatchedStatement, BoundRead, PreparedRead } from './prepared-read.ts';
import type { Database } from './schema.ts';
import { atEndOfTurn } from '../foundations/end-of-turn.ts';
import { withUnaryPlusParameters } from './sqlite-parameters.ts';
import type { QueryTracing } from '../tracing/trace-context.ts';

/** A database's hot reads: committed rows only, never a transaction's. */
export interface HotReads {
  /** The first row of a prepared read, or undefined; reported to onQuery like a Kysely query. */
  first<A extends unknown[], R>(read: PreparedRead<A, R>, ...args: A): Promise<R | undefined>;
  /** Every row of a prepared read, in the statement's order (a group and its ancestors). */
  all<A extends unknown[], R>(read: PreparedRead<A, R>, ...args: A): Promise<R[]>;
  close(): Promise<void>;
}

type OnQuery = ((event: LogEvent) => void) | undefined;

/** Where a PostgreSQL read is sent: the pool, or a replica's checked connections (replica.ts). */
export interface Queryable {
  query(config: pg.QueryConfig): Promise<pg.QueryResult>;
}

/** Who hears of each finished read: the metrics (onQuery) and, when tracing is on, the trace of the request that asked. */
interface QuerySinks {
  onQuery: OnQuery;
  tracing: QueryTracing | undefined;
}

interface Pending {
  read: BoundRead;
  /** Whether the caller wants every row (all) or the first (first). */
  many: boolean;
  /** Called with a row or undefined (first), or with an array of rows (all). */
  resolve(answer: unknown): void;
  reject(err: unknown): void;
  /** The asking request's trace context (tracing on), for the statement's span. */
  trace: unknown;
}

const READER_MMAP_BYTES = 1024 * 1024 * 1024;

/** PostgreSQL statements take at most this many calls; a larger batch is split. */
const MAX_BATCH = 100;

/** `askedBy`: the call, or the calls of a batch, that the statement answered; each gets a span when tracing is on. */
function report({ onQuery, tracing }: QuerySinks, query: CompiledQuery, started: number, askedBy: Pending | Pending[], error?: unknown): void {
  if (!onQuery && !tracing) return;
  const queryDurationMillis = performance.now() - started;
  const event: LogEvent = error === undefined ? { level: 'query', query, queryDurationMillis } : { level: 'error', error, query, queryDurationMillis };
  onQuery?.(event);
  if (tracing) for (const { trace } of Array.isArray(askedBy) ? askedBy : [askedBy]) tracing.statement(event, trace);
}

/**
 * Collects the reads of one event-loop turn and hands them to `run` together, at its end.
 * `db` compiles them: the database's own Kysely instance, for its dialect.
 */
function batchingReads(db: Kysely<Database>, run: (batch: Pending[]) => void, close: () => Promise<void>, tracing: QueryTracing | undefined): HotReads {
  let pending: Pending[] = [];
  const flush = () => {
    const batch = pending;
    pending = [];
    run(batch);
  };
  const enqueue = <T>(read: BoundRead, many: boolean) =>
    new Promise<T>((resolve, reject) => {
      if (pending.length === 0) atEndOfTurn(flush);
      pending.push({ read, many, resolve: resolve as (answer: unknown) => void, reject, trace: tracing?.capture() });
    });
  return {
    first: <A extends unknown[], R>(prepared: PreparedRead<A, R>, ...args: A) => enqueue<R | undefined>(prepared.bind(db, args), false),
    all: <A extends unknown[], R>(prepared: PreparedRead<A, R>, ...args: A) => enqueue<R[]>(prepared.bind(db, args), true),
    close,
  };
}

export function sqliteHotReads(db: Kysely<Database>, file: string, onQuery: OnQuery, tracing?: QueryTracing): HotReads {
  const sinks: QuerySinks = { onQuery, tracing };
  const connection = new SQLite(file);
  // No busy timeout (sqlite-lock.ts): in WAL mode a read never waits for a writer.
  connection.pragma('busy_timeout = 0');
  connection.pragma('query_only = ON'); // a guard: this connection only ever reads
  // Pages read through a memory map instead of pread() and SQLite's 2 MB page cache: lookups
  // in a large file run faster (docs/performance.md, "What was optimized"). Only this
  // read-only connection maps the file; the pages are the operating system's cache, shared
  // and reclaimable.
  connection.pragma(`mmap_size = ${READER_MMAP_BYTES}`);
  // Only compiled-once queries come here (prepared-read.ts), so the set of texts is fixed.
  const statements = new Map<string, SQLite.Statement>();
  const statement = (sql: string) => {
    let prepared = statements.get(sql);
    if (prepared === undefined) {
      prepared = connection.prepare(withUnaryPlusParameters(sql));
      statements.set(sql, prepared);
    }
    return prepared;
  };
  const begin = connection.prepare('begin');
  const commit = connection.prepare('commit');
  const rollback = connection.prepare('rollback');
  /** Ends the read transaction; never throws (this runs from setImmediate, where a throw kills the process). */
  const end = () => {
    try {
      commit.run();
    } catch {
      try {
        rollback.run();
      } catch {
        // no transaction left open: nothing to end
      }
    }
  };

  const runOne = (pending: Pending) => {
    const { read, many, resolve, reject } = pending;
    const started = performance.now();
    try {
      const prepared = statement(read.query.sql);
      const parameters = read.query.parameters as unknown[];
      const answer = many ? prepared.all(parameters) : prepared.get(parameters);
      report(sinks, read.query, started, pending);
      resolve(answer);
    } catch (err) {
      report(sinks, read.query, started, pending, err);
      reject(err);
    }
  };

  return batchingReads(
    db,
    (batch) => {
      if (batch.length === 1) return runOne(batch[0]);
      try {
        begin.run(); // deferred: the snapshot is taken at the first read
      } catch (err) {
        for (const { reject } of batch) reject(err);
        return;
      }
      try {
        for (const pending of batch) runOne(pending);
      } finally {
        end();
      }
    },
    async () => void connection.close(),
    tracing,
  );
}

/** `namedStatements: false`: unnamed statements, parsed and planned on every call (PgBouncer's transaction mode, database.ts). */
export function postgresHotReads(
  db: Kysely<Database>,
  pool: Queryable,
  onQuery: OnQuery,
  tracing?: QueryTracing,
  { namedStatements = true }: { namedStatements?: boolean } = {},
): HotReads {
  const sinks: QuerySinks = { onQuery, tracing };
  const names = new Map<string, string>();
  const nameOf = (text: string) => {
    let name = names.get(text);
    if (name === undefined) {
      name = `ugs_${crypto.hash('sha256', text).slice(0, 16)}`;
      names.set(text, name);
    }
    return name;
  };
  const execute = async <R>(query: CompiledQuery<R>, askedBy: Pending | Pending[]): Promise<R[]> => {
    const started = performance.now();
    try {
      const text = query.sql;
      const values = query.parameters as unknown[];
      const result = await pool.query(namedStatements ? { name: nameOf(text), text, values } : { text, values });
      report(sinks, query, started, askedBy);
      return result.rows as R[];
    } catch (err) {
      report(sinks, query, started, askedBy, err);
      throw err;
    }
  };

  const runAlone = (pending: Pending) => execute(pending.read.query, pending).then((rows) => pending.resolve(pending.many ? rows : rows[0]), pending.reject);

  // The rows of a batch come back in batch_index order (each batched statement says so); a
  // call that wants every row gets all of its own, in their order.
  const runTogether = (statement: BatchedStatement<unknown>, calls: Pending[]) => {
    const answers = calls.map(({ many }) => (many ? [] : undefined)) as unknown[];
    execute(statement.compile(calls.map(({ read }) => read.args)), calls).then(
      (rows) => {
        for (const row of rows as BatchedRow<unknown>[]) {
          const i = Number(row.batch_index) - 1;
          if (calls[i].many) (answers[i] as unknown[]).push(row);
          else answers[i] ??= row;
        }
        calls.forEach(({ resolve }, i) => resolve(answers[i]));
      },
      (err) => calls.forEach(({ reject }) => reject(err)),
    );
  };

  return batchingReads(
    db,
    (batch) => {
      const byStatement = new Map<BatchedStatement<unknown>, Pending[]>();
      for (const pending of batch) {
        const statement = pending.read.batch;
        if (!statement) {
          void runAlone(pending);
          continue;
        }
        let calls = byStatement.get(statement);
        if (!calls) byStatement.set(statement, (calls = []));
        calls.push(pending);
      }
      for (const [statement, calls] of byStatement) {
        if (calls.length === 1) {
          void runAlone(calls[0]);
          continue;
        }
        for (let start = 0; start < calls.length; start += MAX_BATCH) runTogether(statement, calls.slice(start, start + MAX_BATCH));
      }
    },
    async () => undefined, // the pool belongs to the database handle
    tracing,
  );
}
