// Hot-path reads, built and compiled by Kysely once per database instead of on every call: a
// call only binds new parameters. Called on the database itself they go to its direct reader
// (direct-reads.ts), which runs the reads of one event-loop turn together; called on a
// transaction they run through Kysely on the transaction's own connection, so that they see
// what the transaction has written.
import type { Compilable, CompiledQuery, Kysely, RawBuilder } from 'kysely';
import type { Database } from './schema.ts';
import type { DirectReader } from './direct-reads.ts';

/** A row of a batched statement: `batch_index` is the 1-based position of the call it answers. */
export type BatchedRow<R> = R & { batch_index: number };

/** One call of a prepared query, as the direct reader receives it. */
export interface DirectRead<R = unknown> {
  /** The single-row statement with this call's parameters. */
  query: CompiledQuery<R>;
  /** This call's arguments (for the batched statement). */
  args: readonly unknown[];
  /** How several calls run as one statement (PostgreSQL); one object per prepared query and database. */
  batch?: BatchedStatement<R>;
}

export interface BatchedStatement<R> {
  compile(argLists: readonly (readonly unknown[])[]): CompiledQuery<BatchedRow<R>>;
}

const directReaders = new WeakMap<Kysely<Database>, DirectReader>();

/** Makes `db` (a database's root instance, never a transaction) run prepared queries on `reader`. */
export function attachDirectReader(db: Kysely<Database>, reader: DirectReader): void {
  directReaders.set(db, reader);
}

type Columns<A extends unknown[]> = { [K in keyof A]: A[K][] };

interface Template<R> {
  compiled: CompiledQuery<R>;
  /** For each compiled parameter, the index of the call argument it takes, or -1 for a constant. */
  slots: number[];
}

/** Compiles `build` once with placeholders for its arguments, remembering where each one landed. */
function template<R>(build: (...placeholders: string[]) => Compilable<R>, arity: number): Template<R> {
  const placeholders = Array.from({ length: arity }, (_, i) => `\u0000ugs-parameter-${i}`);
  const compiled = build(...placeholders).compile();
  return { compiled, slots: compiled.parameters.map((p) => placeholders.indexOf(p as string)) };
}

function bind<R>({ compiled, slots }: Template<R>, args: readonly unknown[]): CompiledQuery<R> {
  return {
    query: compiled.query,
    queryId: compiled.queryId,
    sql: compiled.sql,
    parameters: slots.map((slot, i) => (slot === -1 ? compiled.parameters[i] : args[slot])),
  };
}

/**
 * `build` receives placeholders in place of the call's arguments; it must use each one as a
 * plain value (a comparison operand), so that it lands in the compiled parameters. The query
 * must name its columns (no selectAll): a prepared statement over `select *` breaks on
 * PostgreSQL when a migration adds a column while instances are running.
 *
 * `batched` (PostgreSQL) is the same lookup for many calls at once: it receives one array per
 * argument and must return, with each row, `batch_index`, the 1-based position of the call in
 * those arrays (`unnest(...) with ordinality`). Without it, PostgreSQL runs each call alone.
 */
export function preparedQuery<A extends unknown[], R>(
  build: (db: Kysely<Database>, ...args: A) => Compilable<R>,
  options: { batched?: (...columns: Columns<A>) => RawBuilder<BatchedRow<R>> } = {},
) {
  const prepared = new WeakMap<Kysely<Database>, { single: Template<R>; batch?: BatchedStatement<R> }>();
  return async (db: Kysely<Database>, ...args: A): Promise<R | undefined> => {
    let entry = prepared.get(db);
    if (!entry) {
      const single = template((...p) => build(db, ...(p as A)), args.length);
      const batchedBuild = options.batched;
      let batch: BatchedStatement<R> | undefined;
      if (batchedBuild) {
        const batchedTemplate = template((...p) => {
          const raw = batchedBuild(...(p as unknown as Columns<A>));
          return { compile: () => raw.compile(db) };
        }, args.length);
        // Argument i of the batched statement is the column of every call's argument i.
        batch = { compile: (argLists) => bind(batchedTemplate, Array.from({ length: args.length }, (_, i) => argLists.map((a) => a[i]))) };
      }
      entry = { single, batch };
      prepared.set(db, entry);
    }
    const query = bind(entry.single, args);
    const reader = directReaders.get(db);
    if (reader) return reader.first({ query, args, batch: entry.batch });
    return (await db.executeQuery<R>(query)).rows[0];
  };
}
