// Multi-row updates compiled once per shape, as multi-row inserts are (multi-row-insert.ts):
// many rows of one table, each found by its key and given its own values, in one statement
//
//   with v(v_key, v_a, v_b) as (values (…), (…), …)
//   update <table> set a = v.v_a, b = v.v_b, <shared> from v
//   where <table>.<key> = v.v_key and <table>.<key> in (<the keys>) and <condition> returning …
//
// instead of a statement per row: on PostgreSQL each statement is a round trip, and a bulk
// upsert that changed 600 groups one statement at a time spent most of its time waiting for
// them (docs/performance.md, "Why the code is the way it is"). A shape is the set of columns
// set, the row count, and on PostgreSQL each column's type: a VALUES list types its parameters
// as text unless they are cast, so a column given numbers is cast to int8 (which PostgreSQL
// assigns to an integer column), one given texts to text, and one given only nulls is set to a
// bare null. SQLite needs no cast. Both run UPDATE … FROM (SQLite since 3.33).
import type { CompiledQuery, DialectAdapter, Kysely, RawBuilder } from 'kysely';
import { sql } from './kysely.ts';
import { dialectOf } from './database.ts';
import type { Database } from './schema.ts';

/** Distinct shapes remembered per database: a bulk call's chunks are few. */
const SHAPES_KEPT = 64;

export interface KeyedRow {
  /** The row's key (an integer primary key). */
  key: number;
  /** The columns to set and their values; every row of one call sets the same columns. */
  values: Record<string, unknown>;
}

export interface MultiRowUpdate<Result> {
  /**
   * Sets each row's values in one statement; `shared` are the values of the statement's own
   * parameters (what `build` gets as `shared`), the same for every row. Answers what the
   * statement returns.
   */
  run(db: Kysely<Database>, columns: readonly string[], rows: readonly KeyedRow[], shared: readonly unknown[]): Promise<Result[]>;
}

export interface UpdateParts {
  /** `with v(…) as (values …)`: the rows' keys and values. */
  values: RawBuilder<unknown>;
  /** `a = v.v_a, b = v.v_b`: the columns set from each row's values. */
  set: RawBuilder<unknown>;
  /**
   * `<table>.<key> = v.v_key and <table>.<key> in (<every key>)`: the list lets PostgreSQL find
   * each row by the key's index; without statistics it took the join alone for a walk of the
   * table's other conditions' index (a tenant's every row).
   */
  joined: RawBuilder<unknown>;
  /** Placeholders for the shared values, in the order `run` is given them: use each once. */
  shared: readonly unknown[];
}

/**
 * `build` writes the statement from its parts: `${values} update <table> set ${set}, … from v
 * where ${joined} and … returning …`, using `shared` once each, after everything else.
 */
export function multiRowUpdate<Result>(
  table: string,
  key: string,
  sharedCount: number,
  build: (parts: UpdateParts) => RawBuilder<Result>,
): MultiRowUpdate<Result> {
  const compiled = new WeakMap<DialectAdapter, Map<string, Template<Result>>>();
  const compile = (db: Kysely<Database>, columns: readonly string[], casts: readonly Cast[], count: number): Template<Result> => {
    const postgres = dialectOf(db) === 'postgres';
    const placeholders: string[] = [];
    const next = () => {
      const placeholder = `\u0000ugs-value-${placeholders.length}`;
      placeholders.push(placeholder);
      return placeholder;
    };
    const valued = columns.filter((_, c) => casts[c] !== 'null');
    const typed = (value: unknown, cast: Cast) => (postgres ? sql`cast(${value} as ${sql.raw(cast)})` : sql`${value}`);
    const rows = Array.from(
      { length: count },
      () => sql`(${sql.join([typed(next(), 'int8'), ...columns.flatMap((_, c) => (casts[c] === 'null' ? [] : [typed(next(), casts[c])]))])})`,
    );
    const names = [key, ...valued].map((column) => sql.ref(`v_${column}`));
    const parts: UpdateParts = {
      values: sql`with v(${sql.join(names)}) as (values ${sql.join(rows)})`,
      set: sql.join(columns.map((column, c) => (casts[c] === 'null' ? sql`${sql.ref(column)} = null` : sql`${sql.ref(column)} = ${sql.ref(`v.v_${column}`)}`))),
      joined: sql`${sql.ref(`${table}.${key}`)} = ${sql.ref(`v.v_${key}`)} and ${sql.ref(`${table}.${key}`)} in (${sql.join(rows.map(() => sql`${next()}`))})`,
      shared: Array.from({ length: sharedCount }, next),
    };
    const query = build(parts).compile(db);
    // Where each value goes: the statement may name them in another order than they are made.
    const index = new Map(placeholders.map((placeholder, i) => [placeholder, i]));
    const order = query.parameters.map((parameter) => index.get(parameter as string) ?? -1);
    if (order.length !== placeholders.length || order.includes(-1) || new Set(order).size !== order.length) {
      throw new Error(`multi-row update: every value and shared value must be one parameter, used once: ${query.sql.slice(0, 200)}`);
    }
    return { query, order };
  };
  return {
    async run(db, columns, rows, shared) {
      if (rows.length === 0) return [];
      const casts = columns.map((column) => castOf(rows, column));
      const adapter = db.getExecutor().adapter;
      let byShape = compiled.get(adapter);
      if (!byShape) compiled.set(adapter, (byShape = new Map()));
      const shape = `${rows.length} ${columns.map((column, c) => `${column}:${casts[c]}`).join(' ')}`;
      let template = byShape.get(shape);
      if (!template) {
        if (byShape.size >= SHAPES_KEPT) byShape.delete(byShape.keys().next().value as string);
        byShape.set(shape, (template = compile(db, columns, casts, rows.length)));
      }
      const values: unknown[] = [];
      for (const row of rows) {
        values.push(row.key);
        for (let c = 0; c < columns.length; c++) if (casts[c] !== 'null') values.push(row.values[columns[c]] ?? null);
      }
      for (const row of rows) values.push(row.key);
      values.push(...shared);
      const { query, order } = template;
      const parameters = order.map((i) => values[i]);
      const result = await db.executeQuery<Result>({ query: query.query, queryId: query.queryId, sql: query.sql, parameters });
      return result.rows;
    },
  };
}

type Cast = 'int8' | 'text' | 'null';

/** A compiled statement, and for each of its parameters which value (in the order run makes them) it binds. */
interface Template<Result> {
  query: CompiledQuery<Result>;
  order: number[];
}

/** How PostgreSQL is to read a column's values: numbers as int8, anything else as text; none but nulls, as a bare null. */
function castOf(rows: readonly KeyedRow[], column: string): Cast {
  let cast: Cast = 'null';
  for (const row of rows) {
    const value = row.values[column];
    if (value === null || value === undefined) continue;
    if (typeof value !== 'number') return 'text';
    cast = 'int8';
  }
  return cast;
}
