// The lines of an NDJSON file for `ugs import`, read without holding more of any line than a
// row may hold. readline builds each line as one string, which costs a multiple of the line in
// memory and ends the process past V8's longest string (docs/performance.md, "Why the code is
// the way it is"). Here a line is kept as bytes up to MAX_ROW_BYTES; past that only its
// first bytes are kept, to show which line it was, and the rest is counted and dropped. A
// line that is not UTF-8 is reported as such instead of being decoded with U+FFFD in place
// of its bad bytes.
import { isUtf8 } from 'node:buffer';
import { Transform, type TransformCallback } from 'node:stream';

/**
 * The most a row may hold: four times the 256 KiB of a single call's body. Every valid item
 * fits (properties are at most 64 KiB, a mapping at most 100 short entries), with room for
 * JSON's escapes and white space.
 */
export const MAX_ROW_BYTES = 1024 * 1024;
/** How much of a row that cannot be read goes to the errors file, to tell which it was. */
export const SHOWN_BYTES = 200;

export type FileLine = { number: number; text: string } | { number: number; problem: 'too_large' | 'not_utf8'; bytes: number; shown: string };

const NEWLINE = 0x0a;

export async function* boundedLines(chunks: AsyncIterable<Buffer>, maxBytes = MAX_ROW_BYTES): AsyncGenerator<FileLine> {
  let number = 0;
  let pieces: Buffer[] = [];
  let bytes = 0;
  const end = (): FileLine => {
    number++;
    const line = pieces.length === 1 ? pieces[0] : Buffer.concat(pieces);
    const size = bytes;
    pieces = [];
    bytes = 0;
    if (size > maxBytes) return { number, problem: 'too_large', bytes: size, shown: shownText(line, true) };
    const content = line.at(-1) === 0x0d ? line.subarray(0, -1) : line; // CRLF
    if (!isUtf8(content)) return { number, problem: 'not_utf8', bytes: size, shown: shownText(content, content.length > SHOWN_BYTES) };
    return { number, text: content.toString('utf8') };
  };
  const keep = (piece: Buffer) => {
    if (bytes + piece.length <= maxBytes) pieces.push(piece);
    else if (bytes <= maxBytes) {
      // The line just went over the bound: from here on, only its first bytes are kept.
      pieces = [Buffer.from(Buffer.concat([...pieces, piece.subarray(0, SHOWN_BYTES)]).subarray(0, SHOWN_BYTES))];
    }
    bytes += piece.length;
  };
  for await (const chunk of chunks) {
    let start = 0;
    for (let newline = chunk.indexOf(NEWLINE); newline !== -1; newline = chunk.indexOf(NEWLINE, start)) {
      keep(chunk.subarray(start, newline));
      yield end();
      start = newline + 1;
    }
    if (start < chunk.length) keep(chunk.subarray(start));
  }
  if (bytes > 0) yield end();
}

/** The first bytes of a line as text (its bad bytes as U+FFFD), marked when there is more. */
function shownText(line: Buffer, cut: boolean): string {
  const text = line.subarray(0, SHOWN_BYTES).toString('utf8');
  return cut ? `${text}…` : text;
}

/**
 * Passes a file's bytes through unchanged, and notes each line (counted by \n, from 1) that is
 * not valid UTF-8, for a reader downstream that decodes them (the CSV parser would put U+FFFD
 * in place of the bad bytes). The reader asks about the lines of each row as it gets it
 * (notUtf8Between), in order, so the list holds only lines it has not reached yet.
 */
export class Utf8LineCheck extends Transform {
  private line = 1;
  private lineBad = false;
  private decoder = new TextDecoder('utf-8', { fatal: true });
  private readonly badLines: number[] = [];

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let start = 0;
    for (let newline = chunk.indexOf(NEWLINE); newline !== -1; newline = chunk.indexOf(NEWLINE, start)) {
      this.check(chunk.subarray(start, newline), true);
      start = newline + 1;
    }
    if (start < chunk.length) this.check(chunk.subarray(start), false);
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    this.check(Buffer.alloc(0), true);
    done();
  }

  /** Whether a line from `first` to `last` is not UTF-8; forgets the lines before `first`. */
  notUtf8Between(first: number, last: number): boolean {
    while (this.badLines.length > 0 && this.badLines[0] < first) this.badLines.shift();
    return this.badLines.length > 0 && this.badLines[0] <= last;
  }

  /** Decodes a piece of the current line (only to check it); `ends`: the line ends after it. */
  private check(piece: Buffer, ends: boolean): void {
    if (!this.lineBad) {
      try {
        this.decoder.decode(piece, { stream: !ends });
      } catch {
        this.lineBad = true;
        this.decoder = new TextDecoder('utf-8', { fatal: true });
      }
    }
    if (!ends) return;
    if (this.lineBad) this.badLines.push(this.line);
    this.lineBad = false;
    this.line++;
  }
}
