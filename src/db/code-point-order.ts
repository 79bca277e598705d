// Ranges of text in code-point order: the order of both backends' comparisons (SQLite's
// byte order of UTF-8, PostgreSQL's "C" collation; migration 0002), so that a prefix search
// is one index range on either.

/**
 * The least string above every string that starts with `prefix`, in code-point order, or
 * undefined when there is none (all U+10FFFF).
 */
export function prefixEnd(prefix: string): string | undefined {
  const points = [...prefix];
  while (points.length > 0) {
    const last = points.pop()!.codePointAt(0)!;
    if (last === 0x10ffff) continue;
    // The next code point; surrogates are not characters (text here holds none), so skip them.
    return points.join('') + String.fromCodePoint(last === 0xd7ff ? 0xe000 : last + 1);
  }
  return undefined;
}
