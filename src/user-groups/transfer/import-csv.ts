// The rows of a CSV file for `ugs import` (docs/cli.md, "Import and export"): a header row
// naming the fields, then one item per row. Fields are separated by commas, or by semicolons
// or tabs when the header has no comma but has those (a spreadsheet in a locale whose decimal
// separator is the comma saves ";"). A row's number is the line where it starts, also when a
// quoted cell spans lines. A row that cannot be parsed, or is over MAX_ROW_BYTES (often a quote
// left open, which makes the rest of the file one row), stops the import there, after the rows
// before it and without reading the rest.
import fs from 'node:fs';
import { pipeline } from 'node:stream';
import { parse, type CsvError } from 'csv-parse';
import { MAX_ROW_BYTES, Utf8LineCheck } from './import-lines.ts';
import { ImportFileError, parseJson, rowNotUtf8, type ImportRow } from './import-row.ts';
import type { TSchema } from 'typebox';
import { UpsertItem } from '../user-groups.schemas.ts';

/**
 * How a CSV cell holds a field's value, read from the field's request schema: text where the
 * value may be text (an id given as a number too), JSON text for an object or an array, `true`
 * or `false` for a boolean, a JSON number for a number. An empty cell leaves the field out.
 */
export type CellKind = 'text' | 'json' | 'boolean' | 'number';

function cellKindOf(schema: TSchema): CellKind {
  const { anyOf } = schema as { anyOf?: TSchema[] };
  const types = (anyOf ?? [schema]).map((branch) => (branch as { type?: string }).type).filter((type) => type !== 'null');
  if (types.includes('string')) return 'text';
  if (types.length > 0 && types.every((type) => type === 'boolean')) return 'boolean';
  if (types.length > 0 && types.every((type) => type === 'integer' || type === 'number')) return 'number';
  return 'json';
}

/** The fields a CSV header may name, those of an upsert item (the declaration's request fields and the id), and how each cell is read. */
export const CSV_CELLS: Readonly<Record<string, CellKind>> = Object.fromEntries(
  Object.entries(UpsertItem.properties).map(([field, schema]) => [field, cellKindOf(schema as TSchema)]),
);
export const CSV_FIELDS = Object.keys(CSV_CELLS);
/** The fields whose cells are of `kind`. */
export const csvFieldsOf = (kind: CellKind) => CSV_FIELDS.filter((field) => CSV_CELLS[field] === kind);

const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

export type Delimiter = ',' | ';' | '\t';
const DELIMITER_NAMES: Record<Delimiter, string> = { ',': 'commas (",")', ';': 'semicolons (";")', '\t': 'tabs' };

/** The file's separator: the one of its header line (the file's first 64 KiB at most, up to its first newline). */
function delimiterOf(file: string): Delimiter {
  const start = Buffer.alloc(64 * 1024);
  const fd = fs.openSync(file, 'r');
  let length: number;
  try {
    length = fs.readSync(fd, start, 0, start.length, 0);
  } finally {
    fs.closeSync(fd);
  }
  const newline = start.subarray(0, length).indexOf(0x0a);
  return delimiterOfHeader(start.subarray(0, newline === -1 ? length : newline).toString('utf8'));
}

/** A header line's separator: a comma, unless it has none but has semicolons, or else tabs. */
export function delimiterOfHeader(header: string): Delimiter {
  if (header.includes(',')) return ',';
  if (header.includes(';')) return ';';
  return header.includes('\t') ? '\t' : ',';
}

export async function* csvRows(file: string, stream: fs.ReadStream): AsyncGenerator<ImportRow> {
  const delimiter = delimiterOf(file);
  const utf8 = new Utf8LineCheck();
  // Lines are counted as the parser makes each record, so that an error names the line of the
  // record it met, whatever records were still buffered for this reader (the parser's own
  // count takes the \r and the \n of a line break inside a quoted cell for two). Empty lines
  // come as records of one empty cell, so that they are counted too.
  let nextLine = 1;
  /** The first and last line of each record made and not yet read here, in order. */
  const spans: [number, number][] = [];
  // The first row that cannot be parsed: the rows before it are read (and imported), then the
  // import stops there (docs/cli.md, "Import and export"). A parse error that ended the
  // parser's stream would drop the rows it had made and this reader had not read yet, so the
  // parser skips the row and says so here instead; then it ends after the rows it made before,
  // makes no more, and no more of the file is read.
  let unreadable: { err: CsvError; line: number } | undefined;
  const parser = parse({
    bom: true,
    relax_column_count: true,
    delimiter,
    max_record_size: MAX_ROW_BYTES,
    skip_records_with_error: true,
    on_skip: (err): undefined => {
      if (unreadable || !err) return undefined;
      unreadable = { err, line: nextLine };
      stream.unpipe();
      parser.push(null);
      return undefined;
    },
    on_record: (cells: string[]) => {
      if (unreadable) return null;
      const first = nextLine;
      nextLine += 1 + lineBreaksIn(cells);
      spans.push([first, nextLine - 1]);
      return cells;
    },
  });
  // An error of any other stage ends the parser's iteration with that error.
  pipeline(stream, utf8, parser, () => undefined);
  let header: string[] | undefined;
  try {
    for await (const cells of parser as AsyncIterable<string[]>) {
      const [first, last] = spans.shift()!;
      if (cells.length === 1 && cells[0] === '') continue; // an empty line
      const notUtf8 = utf8.notUtf8Between(first, last);
      if (!header) {
        if (notUtf8) throw new ImportFileError(`the CSV header (line ${first}) is not valid UTF-8: save the file as UTF-8`);
        header = checkedHeader(cells, delimiter);
        continue;
      }
      yield notUtf8 ? { row: first, item: cellsOf(header, cells), failure: rowNotUtf8(`the row at line ${first}`) } : csvItem(header, cells, first);
    }
    if (unreadable) throw readError(unreadable.err, unreadable.line, delimiter);
  } catch (err) {
    if (err instanceof ImportFileError) throw err;
    throw readError(err as Error & { code?: string }, nextLine, delimiter);
  } finally {
    stream.destroy();
  }
  if (!header) throw new ImportFileError('the CSV file is empty: its first row names the fields (user_group_id, name, …)');
}

/** The line breaks inside a record's quoted cells: each makes the record span one more line. */
function lineBreaksIn(record: string[]): number {
  let breaks = 0;
  for (const cell of record) for (let i = cell.indexOf('\n'); i !== -1; i = cell.indexOf('\n', i + 1)) breaks++;
  return breaks;
}

/** `line`: where the record being read starts (or the empty lines before it). */
function readError(err: Error & { code?: string }, line: number, delimiter: Delimiter): ImportFileError {
  if (err.code === 'CSV_MAX_RECORD_SIZE') {
    return new ImportFileError(
      `the row at line ${line} is over the ${MAX_ROW_BYTES / 1024 / 1024} MiB a row may hold (is a quote left open?); nothing from there on was read`,
    );
  }
  // The parser's message names its own line count; the row's line is the one to go to.
  const what = err.message.replace(/ at line \d+/, '');
  return new ImportFileError(
    `the CSV file cannot be read in the row at line ${line}: ${what} (its fields were read as separated by ${DELIMITER_NAMES[delimiter]})`,
  );
}

function checkedHeader(record: string[], delimiter: Delimiter): string[] {
  const names = record.map((name) => name.trim());
  const unknown = names.filter((name) => !Object.hasOwn(CSV_CELLS, name));
  if (unknown.length > 0) {
    throw new ImportFileError(
      `the CSV header names unknown fields: ${unknown.join(', ')} (fields: ${CSV_FIELDS.join(', ')}; the header was read as separated by ${DELIMITER_NAMES[delimiter]}, and a file may use commas, semicolons or tabs)`,
    );
  }
  if (new Set(names).size !== names.length) throw new ImportFileError('the CSV header names a field twice');
  if (!names.includes('user_group_id')) throw new ImportFileError('the CSV header must name user_group_id');
  return names;
}

/** The row's cells by field name, as the errors file shows a row that could not be read. */
function cellsOf(header: string[], record: string[]): Record<string, string> {
  return Object.fromEntries(header.map((name, i) => [name, record[i] ?? '']));
}

/** A CSV row as an item: each cell read as its field's kind says (CSV_CELLS); what cannot be read so stays text, for the validator to name. */
function csvItem(header: string[], record: string[], row: number): ImportRow {
  const item: Record<string, unknown> = {};
  for (const [index, field] of header.entries()) {
    const cell = record[index] ?? '';
    if (cell === '') continue;
    const kind = CSV_CELLS[field];
    // A number is read as JSON is, so that one a double cannot hold is refused as the API refuses it.
    if (kind === 'json' || (kind === 'number' && JSON_NUMBER.test(cell))) {
      const parsed = parseJson(cell, field);
      if ('failure' in parsed) return { row, item: cellsOf(header, record), failure: parsed.failure };
      item[field] = parsed.value;
    } else if (kind === 'boolean') {
      const flag = cell.trim().toLowerCase();
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
