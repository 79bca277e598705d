// How far `ugs import` is, on standard error: a bar redrawn in place on a terminal, a plain
// line per batch otherwise (a log, a pipe, CI), so that standard output holds the summary only.
type Counts = { created: number; updated: number; unchanged: number; failed: number };

const BAR_WIDTH = 30;
/** A terminal is redrawn at most this often. */
const REDRAW_MS = 100;

export class ImportProgress {
  private readonly terminal = process.stderr.isTTY === true;
  private lastDraw = 0;

  constructor(
    /** The file's size: progress is the share of its bytes read. */
    private readonly totalBytes: number,
    private readonly dryRun: boolean,
  ) {}

  update(rows: number, bytesRead: number, counts: Counts): void {
    const share = this.totalBytes === 0 ? 1 : Math.min(1, bytesRead / this.totalBytes);
    if (!this.terminal) {
      process.stderr.write(`${this.describe(rows, counts)} (${Math.floor(share * 100)}% of the file read)\n`);
      return;
    }
    const now = Date.now();
    if (now - this.lastDraw < REDRAW_MS) return;
    this.lastDraw = now;
    const filled = Math.round(share * BAR_WIDTH);
    const bar = `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${String(Math.floor(share * 100)).padStart(3)}%`;
    process.stderr.write(`\r\u001B[2K${bar} ${this.describe(rows, counts)}`);
  }

  /** Ends the bar's line on a terminal (the summary follows on standard output). */
  done(rows: number, counts: Counts): void {
    if (this.terminal && this.lastDraw > 0) {
      this.lastDraw = 0;
      this.update(rows, this.totalBytes, counts);
      process.stderr.write('\n');
    }
  }

  private describe(rows: number, counts: Counts): string {
    const n = (value: number) => value.toLocaleString('en-US');
    return this.dryRun
      ? `${n(rows)} rows checked, ${n(counts.failed)} would fail`
      : `${n(rows)} rows: ${n(counts.created)} created, ${n(counts.updated)} updated, ${n(counts.unchanged)} unchanged, ${n(counts.failed)} failed`;
  }
}
