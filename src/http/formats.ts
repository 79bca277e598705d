// The string formats request schemas may name (`format: 'email'`, `format: 'iana-time-zone'`),
// checked by the body validator (validation.ts) and described in the OpenAPI document by the
// same keyword. Each comes with the words a refusal uses (docs/api.md, "Requests"). A request
// schema names one through `Text` (text.schemas.ts), whose `format` tsc holds to this
// registry's names; a name it does not hold, in a schema written otherwise, stops the start:
// the validator refuses to compile it (validation.ts) rather than take every string.

/**
 * An address as senders write it: a local part of the characters RFC 5322 allows unquoted,
 * dot-separated, `@`, and a domain of dot-separated labels (letters, digits, inner hyphens)
 * with at least one dot. Quoted local parts and address literals are refused: no mail
 * system a dashboard talks to needs them, and they are where parsers disagree.
 */
const EMAIL =
  /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

/** A name as the IANA database writes one (`Europe/Paris`, `UTC`, `Etc/GMT+5`): never a bare offset such as `+01:00`. */
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+\-/]*$/;

/** The names known valid: Intl's canonical names, then the aliases requests used (bounded: a request cannot grow it without end). */
const knownZones = new Set<string>(Intl.supportedValuesOf('timeZone'));
const MAX_KNOWN_ZONES = knownZones.size + 1_000;

/**
 * A time zone of the IANA database, spelled as the database spells it: what Intl (and so
 * every browser) knows, aliases such as `UTC` and `US/Pacific` included. A name Intl accepts
 * only in another case (`europe/paris`) is refused: other languages' time zone libraries
 * read names case-sensitively.
 */
export function isIanaTimeZone(name: string): boolean {
  if (knownZones.has(name)) return true;
  if (!ZONE_NAME.test(name)) return false;
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return false;
  }
  if (resolved !== name && resolved.toLowerCase() === name.toLowerCase()) return false;
  if (knownZones.size < MAX_KNOWN_ZONES) knownZones.add(name);
  return true;
}

/**
 * Each format: its check, the words a refusal uses, and valid values of every shape the check
 * takes (the tests' random groups draw from them: test/helpers/declared-groups.ts).
 */
export const STRING_FORMATS = {
  email: {
    validate: (value: string) => EMAIL.test(value),
    described: 'email address (name@example.com)',
    examples: ['ada@example.com', "o'brien+dash.boards@mail.example.co.uk", 'X_9@a-b.io'],
  },
  'iana-time-zone': {
    validate: isIanaTimeZone,
    described: 'IANA time zone name, spelled as the database spells it (Europe/Paris, America/New_York, UTC)',
    examples: ['Europe/Paris', 'UTC', 'America/Argentina/Buenos_Aires', 'Etc/GMT+5', 'US/Pacific'],
  },
} as const satisfies Record<string, { validate: (value: string) => boolean; described: string; examples: readonly string[] }>;

export type StringFormat = keyof typeof STRING_FORMATS;
