// Multi-row inserts compiled once per row count. Kysely builds an operation tree of every
// value of every row and compiles it to SQL at each call: for a bulk upsert's chunks of
// hundreds of rows that is a sizeable part of the call (docs/performance.md, "Why the code is
// the way it is"). Here the statement for n rows is compiled once, with placeholders, and each
// call binds its values in the same places, as prepared reads do (prepared-read.ts).
import type { Compilable, CompiledQuery, DialectAdapter, Kysely } from 'kysely';
import type { Database } from './schema.ts';

/** Distinct row counts remembered per database: a bulk call's chunks are few sizes. */
const COUNTS_KEPT = 32;

export interface MultiRowInsert<Row, Result> {
  /** Inserts `rows` (at most the chunk size the caller keeps) in one statement; the rows it returns, if it returns any. */
  run(db: Kysely<Database>, rows: readonly Row[]): Promise<Result[]>;
}

/**
 * `build` receives rows whose values are placeholders, each row with `columns` in that order,
 * and must use each value once, as a plain value (`.values(rows)`). A column a row leaves
 * undefined gets its value in `defaults` (the table's default), or null.
 */
export function multiRowInsert<Row extends object, Result = never>(
  columns: readonly (keyof Row & string)[],
  build: (db: Kysely<Database>, rows: Record<string, unknown>[]) => Compilable<Result>,
  defaults: Partial<Row> = {},
): MultiRowInsert<Row, Result> {
  const fallback = columns.map((column) => (defaults as Record<string, unknown>)[column] ?? null);
  const compiled = new WeakMap<DialectAdapter, Map<number, CompiledQuery<Result>>>();
  const compile = (db: Kysely<Database>, count: number): CompiledQuery<Result> => {
    const placeholders: string[] = [];
    const rows = Array.from({ length: count }, () => {
      const row: Record<string, unknown> = {};
      for (const column of columns) {
        const placeholder = `\u0000ugs-value-${placeholders.length}`;
        placeholders.push(placeholder);
        row[column] = placeholder;
      }
      return row;
    });
    const query = build(db, rows).compile();
    if (query.parameters.length !== placeholders.length || query.parameters.some((p, i) => p !== placeholders[i])) {
      throw new Error(`multi-row insert: every value must be one parameter, in row order: ${query.sql.slice(0, 200)}`);
    }
    return query;
  };
  return {
    async run(db, rows) {
      if (rows.length === 0) return [];
      const adapter = db.getExecutor().adapter;
      let byCount = compiled.get(adapter);
      if (!byCount) compiled.set(adapter, (byCount = new Map()));
      let template = byCount.get(rows.length);
      if (!template) {
        if (byCount.size >= COUNTS_KEPT) byCount.delete(byCount.keys().next().value as number);
        byCount.set(rows.length, (template = compile(db, rows.length)));
      }
      const parameters = new Array<unknown>(rows.length * columns.length);
      let at = 0;
      for (const row of rows) {
        for (let c = 0; c < columns.length; c++) {
          const value = (row as Record<string, unknown>)[columns[c]];
          parameters[at++] = value === undefined ? fallback[c] : value;
        }
      }
      const result = await db.executeQuery<Result>({ query: template.query, queryId: template.queryId, sql: template.sql, parameters });
      return result.rows;
    },
  };
}
