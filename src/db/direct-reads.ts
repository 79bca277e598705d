// The hottest reads (a group by its identity or by its token hash, an API token by its hash)
// run straight on the driver instead of through Kysely's executor. Kysely still builds and
// compiles them (prepared-query.ts); what they skip is its per-query machinery: a connection
// mutex, half a dozen awaits, the logging wrapper. Inside the loaded server that measured
// 12-15 µs of a ~65 µs get-or-create hit, against ~2.5 µs in a tight loop
// (docs/performance.md).
//
// SQLite: a second connection to the same file, used for nothing else. In WAL mode it sees
// exactly what has been committed, never another request's open transaction on the main
// connection, which is why these reads cannot simply skip the mutex there. PostgreSQL:
// pool.query with a named statement, so that each connection parses and plans it once.
import crypto from 'node:crypto';
import SQLite from 'better-sqlite3';
import type pg from 'pg';
import type { CompiledQuery, LogEvent } from 'kysely';

export interface DirectReader {
  /** The first row of a compiled read, or undefined. Reported to onQuery like a Kysely query. */
  first<R>(query: CompiledQuery<R>): Promise<R | undefined>;
  close(): Promise<void>;
}

type OnQuery = ((event: LogEvent) => void) | undefined;

function report(onQuery: OnQuery, query: CompiledQuery, started: number, error?: unknown): void {
  if (!onQuery) return;
  const queryDurationMillis = performance.now() - started;
  onQuery(error === undefined ? { level: 'query', query, queryDurationMillis } : { level: 'error', error, query, queryDurationMillis });
}

export function sqliteDirectReader(file: string, onQuery: OnQuery): DirectReader {
  const connection = new SQLite(file);
  connection.pragma('busy_timeout = 5000');
  connection.pragma('query_only = ON'); // a guard: this connection only ever reads
  // Only compiled-once queries come here (prepared-query.ts), so the set of texts is fixed.
  const statements = new Map<string, SQLite.Statement>();
  return {
    first<R>(query: CompiledQuery<R>) {
      const started = performance.now();
      try {
        let statement = statements.get(query.sql);
        if (statement === undefined) {
          statement = connection.prepare(query.sql);
          statements.set(query.sql, statement);
        }
        const row = statement.get(query.parameters as unknown[]) as R | undefined;
        report(onQuery, query, started);
        return Promise.resolve(row);
      } catch (error) {
        report(onQuery, query, started, error);
        return Promise.reject(error);
      }
    },
    close: async () => void connection.close(),
  };
}

export function postgresDirectReader(pool: pg.Pool, onQuery: OnQuery): DirectReader {
  const names = new Map<string, string>();
  const nameOf = (text: string) => {
    let name = names.get(text);
    if (name === undefined) {
      name = `ugs_${crypto.hash('sha256', text).slice(0, 16)}`;
      names.set(text, name);
    }
    return name;
  };
  return {
    async first<R>(query: CompiledQuery<R>) {
      const started = performance.now();
      try {
        const result = await pool.query({ name: nameOf(query.sql), text: query.sql, values: query.parameters as unknown[] });
        report(onQuery, query, started);
        return result.rows[0] as R | undefined;
      } catch (error) {
        report(onQuery, query, started, error);
        throw error;
      }
    },
    close: async () => undefined, // the pool belongs to the database handle
  };
}
