// kubectl's table layout: Go's text/tabwriter as kubectl configures it (minimum cell width 6, padding 3,
// spaces, and kubectl's RememberWidths: a column never narrows after a flush, so the rows a watch prints
// later line up under the first table). Every cell but the last of a line is padded to its column's
// width, even when it is empty, so a line whose last cells are blank keeps its trailing spaces, exactly
// as kubectl prints it.
const MIN_WIDTH = 6;
const PADDING = 3;

export class TabWriter {
  private readonly widths: number[] = [];

  /** Lays out one flush worth of rows, with the widths of earlier flushes as minimums. */
  format(rows: string[][]): string {
    if (rows.length === 0) return '';
    const columns = Math.max(...rows.map((r) => r.length));
    for (let c = 0; c < columns - 1; c++) {
      const own = Math.max(MIN_WIDTH, ...rows.filter((r) => c < r.length - 1).map((r) => r[c]!.length + PADDING));
      this.widths[c] = Math.max(this.widths[c] ?? 0, own);
    }
    return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(this.widths[c]!))).join('') + '\n').join('');
  }
}

export const tabwrite = (rows: string[][]): string => new TabWriter().format(rows);
