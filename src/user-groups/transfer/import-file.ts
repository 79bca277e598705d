// The rows of a file for `ugs import`: NDJSON (one item per line) or CSV (import-csv.ts),
// streamed, each row with its line and either the item or why it could not be read
// (import-row.ts).
import fs from 'node:fs';
import path from 'node:path';
import { csvRows } from './import-csv.ts';
import { boundedLines } from './import-lines.ts';
import { ImportFileError, parseJson, rowNotUtf8, rowTooLarge, type ImportRow } from './import-row.ts';

export type ImportFormat = 'ndjson' | 'csv';

/** The format the extension says (.ndjson, .jsonl, .csv), unless one is given. */
export function importFormatOf(file: string, given: ImportFormat | undefined): ImportFormat {
  if (given) return given;
  const extension = path.extname(file).toLowerCase();
  if (extension === '.csv') return 'csv';
  if (extension === '.ndjson' || extension === '.jsonl') return 'ndjson';
  throw new ImportFileError(`cannot tell the format of ${file} from its extension: name it .ndjson or .csv, or give --format ndjson|csv`);
}

/**
 * The rows of `file`, in order. `stream` is the file's stream, whose bytesRead the caller may
 * read for progress. A CSV file that cannot be parsed on (an unclosed quote) throws, naming
 * the line, once every row before that line has been given.
 */
export function readImportRows(file: string, format: ImportFormat): { stream: fs.ReadStream; rows: AsyncGenerator<ImportRow> } {
  const stream = fs.createReadStream(file);
  return { stream, rows: format === 'csv' ? csvRows(file, stream) : ndjsonRows(stream) };
}

async function* ndjsonRows(stream: fs.ReadStream): AsyncGenerator<ImportRow> {
  for await (const line of boundedLines(stream)) {
    const row = line.number;
    if ('problem' in line) {
      const failure = line.problem === 'too_large' ? rowTooLarge(`line ${row}`, line.bytes) : rowNotUtf8(`line ${row}`);
      yield { row, item: line.shown, failure };
      continue;
    }
    // A byte order mark before the first line is not part of it.
    const text = row === 1 ? line.text.replace(/^\uFEFF/, '') : line.text;
    if (text.trim() === '') continue;
    const parsed = parseJson(text, 'the line');
    yield 'value' in parsed ? { row, item: parsed.value } : { row, item: text, failure: parsed.failure };
  }
}
