// What the reference page (/docs) says instead of each regular expression of the OpenAPI
// document. The patterns stay in /openapi.json, where validators and generated clients read
// them; a person reads the rule in words, after the field's description, unless the
// description says it already (it holds `saidBy`). The page replaces each pattern it finds
// here (static/docs/docs.js); test/docs-page.browser.test.ts fails when the document holds a
// pattern this table does not put in words.
import { LABEL_TEXT, NOT_BLANK_PLAIN_TEXT, PLAIN_TEXT, TEXT_RULES, UNDIRECTED_TEXT } from '../http/text.schemas.ts';

export interface PatternInWords {
  words: string;
  /** Words that a description stating the rule already holds. */
  saidBy: string;
}

/** A refusal's words as a sentence: "must be plain text: no …" → "Plain text: no …." */
const sentence = (refusal: string) => {
  const rule = refusal.replace(/^must be /, '');
  return `${rule[0].toUpperCase()}${rule.slice(1)}.`;
};

/** What a description that states each text rule already says. */
const TEXT_RULE_SAID_BY: Record<string, string> = {
  [PLAIN_TEXT]: 'control characters',
  [NOT_BLANK_PLAIN_TEXT]: 'not only white space',
  [UNDIRECTED_TEXT]: 'bidirectional control',
  [LABEL_TEXT]: 'bidirectional control',
};

export const PATTERN_WORDS: Readonly<Record<string, PatternInWords>> = {
  // The text rules (http/text.schemas.ts), in the words of their refusal (`400 validation_failed`, issue `invalid_characters`).
  ...Object.fromEntries(
    Object.entries(TEXT_RULES).map(([pattern, refusal]) => [pattern, { words: sentence(refusal), saidBy: TEXT_RULE_SAID_BY[pattern] ?? refusal }]),
  ),
  // Idempotency-Key (http/openapi.ts).
  '^[\\x20-\\x7e]+$': { words: 'Printable ASCII only: letters, digits, punctuation and spaces.', saidBy: 'printable ASCII' },
  // An event id, as `after` and Last-Event-ID take it (events/).
  '^(0|[1-9][0-9]{0,15})$': { words: 'Decimal digits, at most 16, without a leading zero.', saidBy: 'decimal digits' },
  // The `types` filter of the feed and the stream (events/).
  '^[a-z_.]+(,[a-z_.]+)*$': { words: 'No spaces around the commas.', saidBy: 'no spaces' },
  // The `alg` filter of the key set (embed/embed.schemas.ts).
  '^(ES256|RS256|EdDSA)(,(ES256|RS256|EdDSA))*$': {
    words: 'ES256, RS256 or EdDSA, comma-separated, without spaces.',
    saidBy: 'comma-separated',
  },
};
