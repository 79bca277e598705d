// What `ugs import` reads from a file, whatever its format: rows, each with its line and
// either the item (checked later by the bulk upsert's own validator) or why it could not be
// read.
import secureJson from 'secure-json-parse';
import { findUnrepresentableNumber, numberRefused } from '../../http/json-numbers.ts';
import { MAX_ROW_BYTES } from './import-lines.ts';

export interface ImportRow {
  /** The line of the file where the row starts (the header is line 1 of a CSV file). */
  row: number;
  /** The item as read; for a line that is not JSON, its text (only its start, for one too large to read). */
  item: unknown;
  /** Why the row could not be read into an item. */
  failure?: { code: string; message: string };
}

/** The file cannot be read on from here: the import stops, naming where. */
export class ImportFileError extends Error {}

/** JSON text as the API reads a body: no prototype-poisoning keys, no number a double cannot hold as written. */
export function parseJson(text: string, what: string): { value: unknown } | { failure: ImportRow['failure'] } {
  let value: unknown;
  try {
    value = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    const poisoned = /prototype/i.test((err as Error).message);
    return {
      failure: { code: 'invalid_json', message: `${what} ${poisoned ? 'holds a forbidden key (__proto__ or constructor.prototype)' : 'is not valid JSON'}` },
    };
  }
  const number = findUnrepresentableNumber(text);
  if (number) {
    // Named as the API names it in an item (POST /api/users/upsert), with the same message.
    const field = what === 'the line' ? number.field : `${what}${number.field === 'body' ? '' : `.${number.field}`}`;
    const { code, message } = numberRefused({ ...number, field });
    return { failure: { code, message } };
  }
  return { value };
}

/** A row over MAX_ROW_BYTES: refused without being read, as the API refuses a body over its limit. */
export function rowTooLarge(what: string, bytes: number): NonNullable<ImportRow['failure']> {
  return {
    code: 'payload_too_large',
    message: `${what} is ${bytes.toLocaleString('en-US')} bytes, over the ${MAX_ROW_BYTES / 1024 / 1024} MiB a row may hold; it was not read (its start is in "item")`,
  };
}

/** A row with bytes that are not UTF-8 (a file saved in another encoding), refused rather than read with U+FFFD in their place. */
export function rowNotUtf8(what: string): NonNullable<ImportRow['failure']> {
  return {
    code: 'validation_failed',
    message: `${what} is not valid UTF-8 (its bad bytes show as U+FFFD in "item"): save the file as UTF-8, or convert it (iconv -f <its encoding> -t UTF-8)`,
  };
}
