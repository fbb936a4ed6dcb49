// kubectl's table layout: Go's text/tabwriter as kubectl configures it (minimum cell width 6, padding 3,
// spaces, and kubectl's RememberWidths: a column never narrows after a flush, so the rows a watch prints
// later line up under the first table). Every cell but the last of a line is padded to its column's
// width, even when it is empty, so a line whose last cells are blank keeps its trailing spaces, exactly
// as kubectl prints it.
// The one table writer of the plugin: `status`'s own view uses it too, without kubectl's minimum width and
// with the blanks at the ends of lines trimmed (table below).
const MIN_WIDTH = 6;
const PADDING = 3;

export interface TabLayout {
  /** The narrowest a column is (kubectl: 6). */
  minWidth?: number;
  /** Trim the spaces at the end of each line (kubectl keeps them). */
  trimEnd?: boolean;
}

export class TabWriter {
  private readonly widths: number[] = [];
  private readonly minWidth: number;
  private readonly trimEnd: boolean;
  /** Rows added since the last flush: only their cells' text, so a long list keeps no objects. */
  private pending: string[][] = [];

  constructor(layout: TabLayout = {}) {
    this.minWidth = layout.minWidth ?? MIN_WIDTH;
    this.trimEnd = layout.trimEnd ?? false;
  }

  /** Adds rows to the current flush, widening the columns as they need. */
  add(rows: string[][]): void {
    for (const r of rows) {
      for (let c = 0; c < r.length - 1; c++) this.widths[c] = Math.max(this.widths[c] ?? this.minWidth, r[c]!.length + PADDING);
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
        .map((r) => {
          const line = r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(this.widths[c]!))).join('');
          return `${this.trimEnd ? line.trimEnd() : line}\n`;
        })
        .join('');
    }
  }

  /** Lays out one flush worth of rows, with the widths of earlier flushes as minimums. */
  format(rows: string[][]): string {
    this.add(rows);
    return [...this.flush()].join('');
  }
}

/** The plugin's own tables (`status`): columns three spaces apart, no minimum width, no blanks at the ends of lines. */
export const table = (header: string[] | undefined, rows: string[][]): string => new TabWriter({ minWidth: 0, trimEnd: true }).format(header ? [header, ...rows] : rows);
