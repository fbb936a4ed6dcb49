// kubectl's table layout: Go's text/tabwriter as kubectl configures it (minimum cell width 6, padding 3,
// spaces, and kubectl's RememberWidths: a column never narrows after a flush, so the rows a watch prints
// later line up under the first table). Every cell but the last of a line is padded to its column's
// width, even when it is empty, so a line whose last cells are blank keeps its trailing spaces, exactly
// as kubectl prints it.
const MIN_WIDTH = 6;
const PADDING = 3;

export class TabWriter {
  private readonly widths: number[] = [];
  /** Rows added since the last flush: only their cells' text, so a long list keeps no objects. */
  private pending: string[][] = [];

  /** Adds rows to the current flush, widening the columns as they need. */
  add(rows: string[][]): void {
    for (const r of rows) {
      for (let c = 0; c < r.length - 1; c++) this.widths[c] = Math.max(this.widths[c] ?? MIN_WIDTH, r[c]!.length + PADDING);
      this.pending.push(r);
    }
  }

  /** Lays out the rows added since the last flush, `chunk` lines at a time, with the widths of all rows so far. */
  *flush(chunk = 1000): Generator<string> {
    const rows = this.pending;
    this.pending = [];
    for (let i = 0; i < rows.length; i += chunk) {
      yield rows
        .slice(i, i + chunk)
        .map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(this.widths[c]!))).join('') + '\n')
        .join('');
    }
  }

  /** Lays out one flush worth of rows, with the widths of earlier flushes as minimums. */
  format(rows: string[][]): string {
    this.add(rows);
    return [...this.flush()].join('');
  }
}

export const tabwrite = (rows: string[][]): string => new TabWriter().format(rows);
