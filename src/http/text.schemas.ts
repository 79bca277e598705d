// Text rules every schema shares. No control characters (U+0000-U+001F, U+007F), and
// well-formed Unicode: JSON can spell a lone surrogate ("\ud800"), which the backends store
// differently (SQLite keeps it, PostgreSQL's driver turns it into U+FFFD), so two ids could
// name one group on one backend and two on the other. Ajv compiles patterns with the `u`
// flag: a surrogate pair is one code point there, and only a lone surrogate is in the class.
export const PLAIN_TEXT = '^[^\\u0000-\\u001F\\u007F\\uD800-\\uDFFF]*$';
/** PLAIN_TEXT that is not only white space (ids). */
export const NOT_BLANK_PLAIN_TEXT = '^(?=[\\s\\S]*\\S)[^\\u0000-\\u001F\\u007F\\uD800-\\uDFFF]*$';
