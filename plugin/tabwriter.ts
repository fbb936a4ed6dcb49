// kubectl's table layout: Go's text/tabwriter as kubectl configures it (minimum cell width 6, padding 3,
// spaces). Every cell but the last of a line is padded to its column's width, even when it is empty, so a
// line whose last cells are blank keeps its trailing spaces, exactly as kubectl prints it.
const MIN_WIDTH = 6;
const PADDING = 3;

export function tabwrite(rows: string[][]): string {
  if (rows.length === 0) return '';
  const columns = Math.max(...rows.map((r) => r.length));
  const widths: number[] = [];
  for (let c = 0; c < columns - 1; c++) {
    widths.push(Math.max(MIN_WIDTH, ...rows.filter((r) => c < r.length - 1).map((r) => r[c]!.length + PADDING)));
  }
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('') + '\n').join('');
}
