// The rows of a file for `ugs import`: NDJSON (one item per line) or CSV (a header row naming
// the fields, then one item per row), streamed, each row with its number and either the item
// (checked later by the bulk upsert's own validator) or why it could not be read.
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { parse } from 'csv-parse';
import secureJson from 'secure-json-parse';
import { findUnrepresentableNumber, numberRefused } from '../http/json-numbers.ts';

export type ImportFormat = 'ndjson' | 'csv';

export interface ImportRow {
  /** The line (NDJSON), or the row counting the header as row 1 (CSV). */
  row: number;
  /** The item as read; for a line that is not JSON, its text. */
  item: unknown;
  /** Why the row could not be read into an item. */
  failure?: { code: string; message: string };
}

/** The fields a CSV header may name: those of an upsert item. */
export const CSV_FIELDS = [
  'user_group_id',
  'name',
  'mapping',
  'properties',
  'is_demo_group',
  'parent_user_group_id',
  'hierarchy_level',
  'group_tags',
  'api_environment_tag',
] as const;
const JSON_FIELDS = new Set(['mapping', 'properties', 'group_tags']);

export class ImportFileError extends Error {}

/** The format the extension says (.ndjson, .jsonl, .csv), unless one is given. */
export function importFormatOf(file: string, given: ImportFormat | undefined): ImportFormat {
  if (given) return given;
  const extension = path.extname(file).toLowerCase();
  if (extension === '.csv') return 'csv';
  if (extension === '.ndjson' || extension === '.jsonl') return 'ndjson';
  throw new ImportFileError(`cannot tell the format of ${file} from its extension: name it .ndjson or .csv, or give --format ndjson|csv`);
}

/** JSON text as the API reads a body: no prototype-poisoning keys, no number a double cannot hold as written. */
function parseJson(text: string, what: string): { value: unknown } | { failure: ImportRow['failure'] } {
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

/**
 * The rows of `file`, in order. `stream` is the file's stream, whose bytesRead the caller may
 * read for progress. A CSV file that cannot be parsed at all (an unclosed quote) throws,
 * naming the line.
 */
export function readImportRows(file: string, format: ImportFormat): { stream: fs.ReadStream; rows: AsyncGenerator<ImportRow> } {
  const stream = fs.createReadStream(file);
  return { stream, rows: format === 'csv' ? csvRows(stream) : ndjsonRows(stream) };
}

async function* ndjsonRows(stream: fs.ReadStream): AsyncGenerator<ImportRow> {
  const lines = readline.createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
  let row = 0;
  for await (const line of lines) {
    row++;
    // A byte order mark before the first line is not part of it.
    const text = row === 1 ? line.replace(/^\uFEFF/, '') : line;
    if (text.trim() === '') continue;
    const parsed = parseJson(text, 'the line');
    yield 'value' in parsed ? { row, item: parsed.value } : { row, item: text, failure: parsed.failure };
  }
}

async function* csvRows(stream: fs.ReadStream): AsyncGenerator<ImportRow> {
  const parser = stream.pipe(parse({ bom: true, skip_empty_lines: true, relax_column_count: true }));
  let header: string[] | undefined;
  let row = 0;
  try {
    for await (const record of parser as AsyncIterable<string[]>) {
      row++;
      if (!header) {
        header = checkedHeader(record);
        continue;
      }
      yield csvItem(header, record, row);
    }
  } catch (err) {
    stream.destroy();
    if (err instanceof ImportFileError) throw err;
    throw new ImportFileError(`the CSV file cannot be read after row ${row}: ${(err as Error).message}`);
  }
  if (!header) throw new ImportFileError('the CSV file is empty: its first row names the fields (user_group_id, name, …)');
}

function checkedHeader(record: string[]): string[] {
  const names = record.map((name) => name.trim());
  const unknown = names.filter((name) => !(CSV_FIELDS as readonly string[]).includes(name));
  if (unknown.length > 0) throw new ImportFileError(`the CSV header names unknown fields: ${unknown.join(', ')} (fields: ${CSV_FIELDS.join(', ')})`);
  if (new Set(names).size !== names.length) throw new ImportFileError('the CSV header names a field twice');
  if (!names.includes('user_group_id')) throw new ImportFileError('the CSV header must name user_group_id');
  return names;
}

/** A CSV row as an item: an empty cell leaves its field out; JSON-valued fields hold JSON text; is_demo_group is true or false. */
function csvItem(header: string[], record: string[], row: number): ImportRow {
  const item: Record<string, unknown> = {};
  for (const [index, field] of header.entries()) {
    const cell = record[index] ?? '';
    if (cell === '') continue;
    if (JSON_FIELDS.has(field)) {
      const parsed = parseJson(cell, field);
      if ('failure' in parsed) return { row, item: Object.fromEntries(header.map((name, i) => [name, record[i] ?? ''])), failure: parsed.failure };
      item[field] = parsed.value;
    } else if (field === 'is_demo_group') {
      const flag = cell.trim().toLowerCase();
      // Anything else stays text, for the validator to name.
      item[field] = flag === 'true' || flag === '1' ? true : flag === 'false' || flag === '0' ? false : cell;
    } else {
      item[field] = cell;
    }
  }
  if (record.length !== header.length) {
    return { row, item, failure: { code: 'validation_failed', message: `the row has ${record.length} cells; the header names ${header.length} fields` } };
  }
  return { row, item };
}
