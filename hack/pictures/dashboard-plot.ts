// The Grafana dashboard drawn by gnuplot from real query results, for the README's picture: Grafana
// itself is AGPL and not used (docs/adr/0033-grafana-dashboard.md). Each panel is placed where its gridPos
// puts it in Grafana's 24-column grid; a stat panel shows its last value, a time series panel its lines.

/** The parts of a dashboard panel this drawing reads. */
export interface Panel {
  id?: number;
  type: string;
  title?: string;
  gridPos?: { x: number; y: number; w: number; h: number };
  targets?: { expr?: string; legendFormat?: string }[];
  fieldConfig?: { defaults?: { unit?: string } };
  panels?: Panel[];
}

export interface Dashboard {
  title?: string;
  panels: Panel[];
}

/** One series of a query_range answer: its labels and its [unix seconds, value] points. */
export interface Series {
  metric: Record<string, string>;
  values: [number, string][];
}

/** Every panel, the ones inside collapsed rows too, in dashboard order. */
export function allPanels(dash: Dashboard): Panel[] {
  return dash.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** The query as Prometheus gets it: the dashboard's template variables replaced. */
export function substitute(expr: string, vars: Record<string, string>): string {
  return expr.replace(/\$(?:\{(\w+)\}|(\w+))/g, (whole, braced: string | undefined, bare: string | undefined) => vars[(braced ?? bare) as string] ?? whole);
}

/** A legend as Grafana writes it: `{{label}}` replaced by the series' label value. */
export function legend(format: string | undefined, metric: Record<string, string>): string {
  if (format) return format.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, name: string) => metric[name] ?? '');
  const pairs = Object.entries(metric).filter(([k]) => k !== '__name__');
  return pairs.length ? pairs.map(([k, v]) => `${k}=${v}`).join(' ') : 'value';
}

const quote = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

/** 1536 → "1.5 KiB" for a bytes unit; plain numbers keep up to two decimals. */
export function formatValue(v: number, unit: string | undefined): string {
  if (unit === 'bytes') {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let x = v;
    while (Math.abs(x) >= 1024 && i < units.length - 1) {
      x /= 1024;
      i++;
    }
    return `${Number.isInteger(x) ? x : x.toFixed(1)} ${units[i]}`;
  }
  if (unit === 's') return `${Number.isInteger(v) ? v : v.toFixed(2)} s`;
  return Number.isInteger(v) ? String(v) : v.toFixed(2);
}

export interface PlotOptions {
  /** Pixels of one grid column and of one grid row (Grafana's row is 30 px). */
  columnPx?: number;
  rowPx?: number;
  /** The time range the queries covered, unix seconds. */
  start: number;
  end: number;
}

/**
 * A gnuplot script drawing the dashboard as SVG (written to stdout): `data` has, per panel id, one
 * query_range answer per target. Panels with no answer are drawn with "no data".
 */
export function gnuplotScript(dash: Dashboard, data: Map<number, Series[][]>, o: PlotOptions): string {
  const colPx = o.columnPx ?? 50;
  const rowPx = o.rowPx ?? 30;
  const panels = allPanels(dash).filter((p) => p.gridPos);
  const rows = Math.max(...panels.map((p) => (p.gridPos?.y ?? 0) + (p.gridPos?.h ?? 0)));
  const titleRows = 1;
  const width = 24 * colPx;
  const height = (rows + titleRows) * rowPx;
  const out: string[] = [`set terminal svg size ${width},${height} font "sans,11" background "#ffffff"`, 'set encoding utf8', 'set datafile separator "\\t"'];
  const blocks: string[] = [];
  const frame = (p: Panel) => {
    const g = p.gridPos as NonNullable<Panel['gridPos']>;
    // gnuplot's origin is the bottom-left corner of the canvas.
    const x = (g.x * colPx) / width;
    const y = 1 - ((g.y + titleRows + g.h) * rowPx) / height;
    return `set origin ${x.toFixed(4)},${y.toFixed(4)}\nset size ${((g.w * colPx) / width).toFixed(4)},${((g.h * rowPx) / height).toFixed(4)}`;
  };
  out.push(`set multiplot title ${quote(dash.title ?? '')} font "sans,16"`);
  for (const p of panels) {
    const answers = data.get(p.id ?? -1) ?? [];
    const unit = p.fieldConfig?.defaults?.unit;
    out.push('reset', frame(p), `set title ${quote(p.title ?? '')} font "sans,12"`);
    if (p.type === 'row') {
      out.push('unset border', 'unset tics', 'unset key', 'set title offset 0,-1', 'set yrange [0:1]', 'set xrange [0:1]', 'plot 2 notitle');
      continue;
    }
    if (p.type === 'stat') {
      const last = answers.flat().map((s) => Number(s.values.at(-1)?.[1]));
      const shown =
        last.length && last.every((v) => Number.isFinite(v))
          ? formatValue(
              last.reduce((a, b) => a + b, 0),
              unit,
            )
          : 'no data';
      out.push('unset border', 'unset tics', 'unset key', 'set yrange [0:1]', 'set xrange [0:1]', `set label 1 ${quote(shown)} at 0.5,0.45 center font "sans,26"`, 'plot 2 notitle');
      continue;
    }
    // A time series panel: one line per series of every target.
    const plots: string[] = [];
    answers.forEach((series, ti) => {
      for (const s of series) {
        const name = `$D${blocks.length}`;
        blocks.push(`${name} << EOD\n${s.values.map(([t, v]) => `${t}\t${v}`).join('\n')}\nEOD`);
        const title = legend(p.targets?.[ti]?.legendFormat, s.metric).trim() || legend(undefined, s.metric);
        plots.push(`${name} using 1:2 with lines lw 2 title ${quote(title)}`);
      }
    });
    out.push(
      'set xdata time',
      'set timefmt "%s"',
      'set format x "%H:%M"',
      `set xrange [${o.start}:${o.end}]`,
      `set xtics ${Math.max(60, Math.round((o.end - o.start) / 4 / 60) * 60)}`,
      'set yrange [0:*]',
      'set key outside right top vertical font "sans,9" spacing 0.9',
      'set grid ytics lc rgb "#dddddd"',
      'set border 3',
      'set xtics nomirror font "sans,9"',
      'set ytics nomirror font "sans,9"',
      unit === 'bytes' ? 'set format y "%.0b %BB"' : 'set format y "%g"',
    );
    if (plots.length === 0) out.push('unset key', 'set yrange [0:1]', `set label 1 "no data" at graph 0.5,0.5 center`, 'plot 2 notitle');
    else out.push(`plot ${plots.join(', \\\n  ')}`);
  }
  out.push('unset multiplot');
  return `${blocks.join('\n')}\n${out.join('\n')}\n`;
}
