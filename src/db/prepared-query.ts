// Hot-path reads, built and compiled by Kysely once per database instead of on every call: a
// call only binds new parameters. Called on the database itself they run on its direct
// reader (direct-reads.ts); called on a transaction they run through Kysely on the
// transaction's own connection, so that they see what the transaction has written.
import type { Compilable, CompiledQuery, Kysely } from 'kysely';
import type { Database } from './schema.ts';
import type { DirectReader } from './direct-reads.ts';

const directReaders = new WeakMap<Kysely<Database>, DirectReader>();

/** Makes `db` (a database's root instance, never a transaction) run prepared queries on `reader`. */
export function attachDirectReader(db: Kysely<Database>, reader: DirectReader): void {
  directReaders.set(db, reader);
}

interface Prepared<R> {
  compiled: CompiledQuery<R>;
  /** For each compiled parameter, the index of the call argument it takes, or -1 for a constant. */
  slots: number[];
}

/**
 * `build` receives placeholders in place of the call's arguments; it must use each one as
 * a plain value (a comparison operand), so that it lands in the compiled parameters. The
 * query must name its columns (no selectAll): a prepared statement over `select *` breaks on
 * PostgreSQL when a migration adds a column while instances are running.
 */
export function preparedQuery<A extends unknown[], R>(build: (db: Kysely<Database>, ...args: A) => Compilable<R>) {
  const cache = new WeakMap<Kysely<Database>, Prepared<R>>();
  return async (db: Kysely<Database>, ...args: A): Promise<R | undefined> => {
    let prepared = cache.get(db);
    if (!prepared) {
      const placeholders = args.map((_, i) => `\u0000ugs-parameter-${i}`);
      const compiled = build(db, ...(placeholders as A)).compile();
      prepared = { compiled, slots: compiled.parameters.map((p) => placeholders.indexOf(p as string)) };
      cache.set(db, prepared);
    }
    const { compiled, slots } = prepared;
    const query: CompiledQuery<R> = {
      query: compiled.query,
      queryId: compiled.queryId,
      sql: compiled.sql,
      parameters: slots.map((slot, i) => (slot === -1 ? compiled.parameters[i] : args[slot])),
    };
    const reader = directReaders.get(db);
    if (reader) return reader.first(query);
    return (await db.executeQuery<R>(query)).rows[0];
  };
}
