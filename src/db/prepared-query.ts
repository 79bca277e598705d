// Hot-path queries, built and compiled by Kysely once per database instead of on every
// call: a call only binds new parameters. Together with SQLite's statement cache (see
// database.ts) a lookup costs what the database needs, not what building it costs.
import { CompiledQuery, type Compilable, type Kysely } from 'kysely';
import type { Database } from './schema.ts';

interface Prepared<R> {
  compiled: CompiledQuery<R>;
  /** For each compiled parameter, the index of the call argument it takes, or -1 for a constant. */
  slots: number[];
}

/**
 * `build` receives placeholders in place of the call's arguments; it must use each one as
 * a plain value (a comparison operand), so that it lands in the compiled parameters.
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
    const parameters = slots.map((slot, i) => (slot === -1 ? compiled.parameters[i] : args[slot]));
    const result = await db.executeQuery<R>(CompiledQuery.raw(compiled.sql, parameters) as CompiledQuery<R>);
    return result.rows[0];
  };
}
