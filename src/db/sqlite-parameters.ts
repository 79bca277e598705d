// Every statement sent to SQLite has its parameters written `+?` instead of `?`, so that it is
// prepared once and never again at each run.
//
// Why: when SQLite's planner looks at a bound value (a parameter compared with `=` in a
// statement that joins or sorts, a LIMIT in a compound select, …) it marks the statement to be
// prepared again whenever that value may change. better-sqlite3 clears a statement's bindings
// after every run, and clearing them expires any statement so marked: it was prepared again at
// its next run, which costs far more than the run itself (docs/performance.md, "Why the code
// is the way it is"; SQLite 3.54 marks more statements than 3.53 did). `+?` is SQLite's unary
// plus, which returns its operand unchanged (type, value, no affinity, as a bare `?`), and the
// planner never looks through it to the bound value; index ranges on `column = +?` are used as
// before (test/query-plans.test.ts holds every statement to its index).

/** The SQL with each `?` placeholder outside a quoted string or name written `+?`. */
export function withUnaryPlusParameters(sql: string): string {
  let out = '';
  let quote: string | null = null;
  for (const char of sql) {
    if (quote !== null) {
      // A doubled quote ('it''s') closes and reopens: the same state in the end.
      if (char === quote) quote = null;
    } else if (char === "'" || char === '"' || char === '`') {
      quote = char;
    } else if (char === '?') {
      out += '+';
    }
    out += char;
  }
  return out;
}
