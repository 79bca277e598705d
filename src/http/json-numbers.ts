// JSON numbers that a double cannot hold as written (docs/api.md, "Requests"): JSON.parse
// turns 1e400 into Infinity (stored as null), 1e-400 into 0 and 9007199254740993 into
// 9007199254740992, silently. Such a number is refused, naming where it is, instead of being
// stored as something the caller did not send.
//
// Only a body that could hold one is scanned: an exponent or a run of 16 digits. The scan
// walks the text once, with its own stack (a body may nest deeper than a call stack should).
import { AppError } from '../foundations/errors.ts';

export interface UnrepresentableNumber {
  /** Where it is, as validation details name fields: `properties.big`, `mapping.40`, `list.3`. */
  field: string;
  /** The same, key by key (array indexes as numbers). */
  path: (string | number)[];
  issue: 'number_too_large' | 'number_too_small' | 'integer_out_of_range';
  literal: string;
}

const SUSPECT = /\d[eE]|\d{16}/;
const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const STRING = /"(?:[^"\\]|\\.)*"/y;

/** The first number of `text` (valid JSON) that a double cannot hold as written, if any. */
export function findUnrepresentableNumber(text: string): UnrepresentableNumber | undefined {
  return findUnrepresentableNumbers(text, 1)[0];
}

/** The numbers of `text` (valid JSON) that a double cannot hold as written, in order, at most `limit`. */
export function findUnrepresentableNumbers(text: string, limit = Number.POSITIVE_INFINITY): UnrepresentableNumber[] {
  const found: UnrepresentableNumber[] = [];
  if (!SUSPECT.test(text)) return found;
  const path: (string | number)[] = [];
  /** For each open container: an object waiting for its next key, or not. */
  const expectingKey: boolean[] = [];
  for (let i = 0; i < text.length && found.length < limit; ) {
    const c = text[i];
    const depth = expectingKey.length - 1;
    if (c === '{' || c === '[') {
      expectingKey.push(c === '{');
      path.push(c === '{' ? '' : 0);
      i++;
    } else if (c === '}' || c === ']') {
      expectingKey.pop();
      path.pop();
      i++;
    } else if (c === ',') {
      if (expectingKey[depth] === false && typeof path[depth] === 'number') path[depth] = (path[depth] as number) + 1;
      else expectingKey[depth] = true;
      i++;
    } else if (c === '"') {
      STRING.lastIndex = i;
      const literal = STRING.exec(text)![0];
      if (expectingKey[depth]) {
        path[depth] = JSON.parse(literal) as string;
        expectingKey[depth] = false;
      }
      i += literal.length;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      NUMBER.lastIndex = i;
      const literal = NUMBER.exec(text)![0];
      const issue = numberIssue(literal);
      if (issue) found.push({ field: path.join('.') || 'body', path: [...path], issue, literal });
      i += literal.length;
    } else {
      i++; // white space, ':', and the letters of true, false, null
    }
  }
  return found;
}

const NUMBER_RULES: Record<UnrepresentableNumber['issue'], string> = {
  number_too_large: 'is a number too large for a double (it would become Infinity)',
  number_too_small: 'is a non-zero number too small for a double (it would become 0)',
  integer_out_of_range: 'is an integer outside ±(2^53−1), which a double cannot hold exactly',
};

/** The refusal of such a number: 400 validation_failed naming where it is. */
export function numberRefused({ field, issue, literal }: Pick<UnrepresentableNumber, 'field' | 'issue' | 'literal'>): AppError {
  const shown = literal.length > 40 ? `${literal.slice(0, 20)}…(${literal.length} characters)` : literal;
  return new AppError('validation_failed', `${field} ${NUMBER_RULES[issue]}: ${shown}; send it as a string to keep it exactly`, {
    details: [{ field, issue }],
  });
}

function numberIssue(literal: string): UnrepresentableNumber['issue'] | undefined {
  const value = Number(literal);
  if (!Number.isFinite(value)) return 'number_too_large';
  const mantissa = literal.split(/[eE]/)[0];
  if (value === 0 && /[1-9]/.test(mantissa)) return 'number_too_small';
  if (/^-?\d+$/.test(literal) && !Number.isSafeInteger(value)) return 'integer_out_of_range';
  return undefined;
}
