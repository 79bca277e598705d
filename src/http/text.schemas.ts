// Text rules every schema shares (docs/api.md, "Requests": which field follows which). Each is
// a pattern, so that validation and the OpenAPI document say the same, and each comes with
// the words a refusal uses (TEXT_RULES, read by validation.ts).
//
// No control characters (U+0000-U+001F, U+007F), and well-formed Unicode: JSON can spell a
// lone surrogate ("\ud800"), which the backends store differently (SQLite keeps it,
// PostgreSQL's driver turns it into U+FFFD), so two ids could name one group on one backend
// and two on the other. Ajv compiles patterns with the `u` flag: a surrogate pair is one code
// point there, and only a lone surrogate is in the class.
import { Type, type TString, type TStringOptions } from 'typebox';
import type { StringFormat } from './formats.ts';

const CONTROLS = '\\u0000-\\u001F\\u007F\\uD800-\\uDFFF';
/**
 * The bidirectional controls: embeddings and overrides (U+202A-U+202E), isolates
 * (U+2066-U+2069) and the marks (U+200E, U+200F, U+061C). In a value shown beside others they
 * reorder what follows ("\u202Etxt.exe" reads "exe.txt").
 */
const BIDI_CONTROLS = '\\u061C\\u200E\\u200F\\u202A-\\u202E\\u2066-\\u2069';
/** At least one character that shows: not white space, not a default-ignorable code point (zero-width space and joiners, U+FEFF, U+2060, variation selectors, Hangul fillers…). */
const SOMETHING_VISIBLE = '(?=[\\s\\S]*[^\\p{White_Space}\\p{Default_Ignorable_Code_Point}])';

export const PLAIN_TEXT = `^[^${CONTROLS}]*$`;
/** PLAIN_TEXT that is not only white space (ids). */
export const NOT_BLANK_PLAIN_TEXT = `^(?=[\\s\\S]*\\S)[^${CONTROLS}]*$`;
/** PLAIN_TEXT without bidirectional controls: a value that is shown or signed as given (a viewer's attribute values). */
export const UNDIRECTED_TEXT = `^[^${CONTROLS}${BIDI_CONTROLS}]*$`;
/** UNDIRECTED_TEXT with something visible in it: a label listed among others (a tag), never a blank row. */
export const LABEL_TEXT = `^${SOMETHING_VISIBLE}[^${CONTROLS}${BIDI_CONTROLS}]*$`;

/** What a value breaking each rule is told (the `invalid_characters` issue of `validation_failed`). */
export const TEXT_RULES: Record<string, string> = {
  [PLAIN_TEXT]: 'must be plain text: no control characters or unpaired surrogates',
  [NOT_BLANK_PLAIN_TEXT]: 'must be plain text: no control characters or unpaired surrogates, and not only white space',
  [UNDIRECTED_TEXT]: 'must be plain text: no control characters, bidirectional controls or unpaired surrogates',
  [LABEL_TEXT]:
    'must be plain text: no control characters, bidirectional controls or unpaired surrogates, and something visible (not only white space or zero-width characters)',
};

/**
 * A request's text: a string schema whose `format`, if it has one, is a name of formats.ts's
 * registry (tsc checks it; the validator knows no other).
 */
export function Text(options: Omit<TStringOptions, 'format'> & { format?: StringFormat } = {}): TString {
  return Type.String(options);
}
