// Hot reads, declared once: Kysely builds and compiles each one once per database, with
// placeholders where the arguments go, and every call only binds new values. They run only
// on a database's HotReads (hot-reads.ts), never in a transaction: a repository function that
// takes HotReads is on the fast path, one that takes a Kysely instance is not, and the types
// say which.
import type { Compilable, CompiledQuery, Kysely, RawBuilder } from 'kysely';
import type { Database } from './schema.ts';

/** A row of a batched statement: `batch_index` is the 1-based position of the call it answers. */
export type BatchedRow<R> = R & { batch_index: number };

/** One call of a prepared read, bound to its arguments. */
export interface BoundRead<R = unknown> {
  /** The single-row statement with this call's parameters. */
  query: CompiledQuery<R>;
  /** This call's arguments (for the batched statement). */
  args: readonly unknown[];
  /** How several calls run as one statement (PostgreSQL); one object per prepared read and database. */
  batch?: BatchedStatement<R>;
}

export interface BatchedStatement<R> {
  compile(argLists: readonly (readonly unknown[])[]): CompiledQuery<BatchedRow<R>>;
}

export interface PreparedRead<A extends unknown[], R> {
  /** This call's statement, compiled for `db`'s dialect (once per database, then cached). */
  bind(db: Kysely<Database>, args: A): BoundRead<R>;
}

type Columns<A extends unknown[]> = { [K in keyof A]: A[K][] };

/** What a prepared read is built from: a query builder, or raw SQL (sql``). */
type Statement<R> = Compilable<R> | RawBuilder<R>;

const isRawBuilder = <R>(statement: Statement<R>): statement is RawBuilder<R> => 'isRawBuilder' in statement && statement.isRawBuilder === true;

interface Template<R> {
  compiled: CompiledQuery<R>;
  /** For each compiled parameter, the index of the call argument it takes, or -1 for a constant. */
  slots: number[];
}

/**
 * Compiles `build` once with placeholders for its arguments, remembering where each one
 * landed. Each placeholder must become exactly one parameter: used twice, or inlined into the
 * SQL text, or dropped, a call would bind its arguments to the wrong places, so that fails
 * here, at the first call, rather than as a wrong answer.
 */
function template<R>(db: Kysely<Database>, build: (...placeholders: string[]) => Statement<R>, arity: number): Template<R> {
  const placeholders = Array.from({ length: arity }, (_, i) => `\u0000ugs-parameter-${i}`);
  const statement = build(...placeholders);
  // A query builder compiles itself; a raw statement (sql``) needs the database's dialect.
  const compiled = isRawBuilder(statement) ? statement.compile(db) : statement.compile();
  const slots = compiled.parameters.map((p) => placeholders.indexOf(p as string));
  placeholders.forEach((placeholder, i) => {
    const uses = slots.filter((slot) => slot === i).length;
    if (uses !== 1 || compiled.sql.includes(placeholder)) {
      throw new Error(`prepared read: argument ${i} must be used once, as a plain value (used ${uses} times): ${compiled.sql}`);
    }
  });
  return { compiled, slots };
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
 * `build` receives placeholders in place of the call's arguments; it must use each one once,
 * as a plain value (a comparison operand). The query must name its columns (no selectAll): a
 * prepared statement over `select *` breaks on PostgreSQL when a migration adds a column while
 * instances are running.
 *
 * `batched` (PostgreSQL) is the same lookup for many calls at once: it receives one array per
 * argument and must return, with each row, `batch_index`, the 1-based position of the call in
 * those arrays (`unnest(...) with ordinality`); after the arrays it is given the database,
 * for a statement built with Kysely's query builder. Without it, PostgreSQL runs each call alone.
 */
export function preparedRead<A extends unknown[], R>(
  build: (db: Kysely<Database>, ...args: A) => Statement<R>,
  options: { batched?: (...columnsAndDb: [...Columns<A>, Kysely<Database>]) => RawBuilder<BatchedRow<R>> } = {},
): PreparedRead<A, R> {
  const compiledFor = new WeakMap<Kysely<Database>, { single: Template<R>; batch?: BatchedStatement<R> }>();
  const compile = (db: Kysely<Database>, arity: number) => {
    const single = template(db, (...p) => build(db, ...(p as A)), arity);
    const batchedBuild = options.batched;
    if (!batchedBuild) return { single };
    const batchedTemplate = template(db, (...p) => batchedBuild(...(p as Columns<A>), db), arity);
    // Argument i of the batched statement is the column of every call's argument i.
    const batch: BatchedStatement<R> = {
      compile: (argLists) =>
        bind(
          batchedTemplate,
          Array.from({ length: arity }, (_, i) => argLists.map((a) => a[i])),
        ),
    };
    return { single, batch };
  };
  return {
    bind(db, args) {
      let entry = compiledFor.get(db);
      if (!entry) compiledFor.set(db, (entry = compile(db, args.length)));
      return { query: bind(entry.single, args), args, batch: entry.batch };
    },
  };
}
