// docs/pictures/bench-*.svg: the benchmark plots of docs/benchmarks.md, drawn by vega-lite (rendered to SVG
// by vega in this process: no browser, no canvas) from the records the benchmarks append to
// bench/results/<bench>.jsonl (bench/lib/results.ts). Each plot says in its subtitle the machine, the load
// and the dates of the runs it draws, and the command that records them; a plot with no runs yet is a
// placeholder naming that command. The seed's figures, which nothing here measures, come from
// bench/reference/seed.json and are labelled as references.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import { type BenchRecord, RESULTS_DIR, readRecordsIn } from '../lib/bench-records.ts';
import type { GeneratedFile } from '../lib/generated-files.ts';
import { REPO_ROOT } from '../lib/paths.ts';

export const SEED_REFERENCE = 'bench/reference/seed.json';

export interface SeedReference {
  source: string;
  /** Where the figures were stated, in a few words. */
  cite: string;
  date: string;
  reservationLatency: { p50Ms: number; disks: number; note: string };
}

type Records = (bench: string) => BenchRecord[];
type Row = Record<string, string | number>;

export interface Plot {
  file: string;
  title: string;
  /** The commands that record its data, for the subtitle, the placeholder and docs/benchmarks.md. */
  commands: string[];
  /** The benchmarks whose records it reads. */
  benches: string[];
  /** The records drawn, the extra subtitle lines and the chart (vega-lite without title), or nothing to draw. */
  draw(records: Records, seed: SeedReference): { drawn: BenchRecord[]; notes?: string[]; chart: Omit<TopLevelSpec, 'title'> } | undefined;
}

const FONT = 'Helvetica, Arial, sans-serif';

/** The newest record for each key (records are oldest first). */
function latestBy(records: BenchRecord[], key: (r: BenchRecord) => string | number): BenchRecord[] {
  const latest = new Map<string | number, BenchRecord>();
  for (const r of records) latest.set(key(r), r);
  return [...latest.values()];
}

const num = (v: unknown): number => (typeof v === 'number' ? v : Number.NaN);
const obj = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});

/** "2 cpus, Intel(R) Xeon(R) …; load 1.2–1.4; 2026-12-01": one line per machine of the records drawn. */
export function provenance(records: BenchRecord[]): string[] {
  const byMachine = new Map<string, BenchRecord[]>();
  for (const r of records) {
    const m = `${r.machine.cpus} cpus, ${r.machine.model.replace(/\s+/g, ' ').trim()}, ${r.machine.memGiB} GiB, Node ${r.machine.node}`;
    byMachine.set(m, [...(byMachine.get(m) ?? []), r]);
  }
  return [...byMachine].map(([machine, rs]) => {
    const loads = rs.flatMap((r) => [r.load.before, r.load.after]);
    const dates = [...new Set(rs.map((r) => r.at.slice(0, 10)))].sort();
    const range = (lo: string, hi: string) => (lo === hi ? lo : `${lo}–${hi}`);
    const load = range(Math.min(...loads).toFixed(1), Math.max(...loads).toFixed(1));
    const commits = [...new Set(rs.map((r) => r.commit))].join(', ');
    return `${machine}; load average ${load}; ${range(dates[0]!, dates.at(-1)!)}; ${rs.length} run${rs.length === 1 ? '' : 's'} (commit ${commits})`;
  });
}

/** The reservation's latency, label → marker: our benchmarks' latest runs per disk count, and the seed's figure. */
const reservationPlot: Plot = {
  file: 'docs/pictures/bench-reservation.svg',
  title: "Reservation latency, label → marker file: ours against the seed's Go implementation",
  commands: ['npm run bench:flow', 'npm run bench:reservation-floor'],
  benches: ['flow', 'reservation-floor'],
  draw(records, seed) {
    const flow = latestBy(records('flow'), (r) => num(r.params.disks));
    const floor = latestBy(records('reservation-floor'), (r) => num(r.params.disks));
    if (flow.length + floor.length === 0) return undefined;
    const rows: Row[] = [
      ...flow.map((r) => ({
        who: `ours, kubectl label, ${r.params.disks} disks (flow)`,
        kind: 'measured here',
        p50: num(obj(r.figures.labelToMarkerMs).p50),
        p95: num(obj(r.figures.labelToMarkerMs).p95),
      })),
      ...floor.map((r) => ({ who: `ours, label PATCH, ${r.params.disks} disks (floor)`, kind: 'measured here', p50: num(obj(r.figures.chainMs).p50), p95: num(obj(r.figures.chainMs).p95) })),
      { who: `seed's Go, ${seed.reservationLatency.disks} disks (reference)`, kind: 'reference, not measured here', p50: seed.reservationLatency.p50Ms, p95: Number.NaN },
    ].map((r) => ({ ...r, from: 1, text: `p50 ${fmtMs(r.p50)}${Number.isNaN(r.p95) ? '' : `, p95 ${fmtMs(r.p95)}`}` }));
    const y = { field: 'who', type: 'nominal', sort: null, title: null, axis: { labelLimit: 300 } } as const;
    const x = {
      type: 'quantitative',
      scale: { type: 'log', domain: [1, 100_000] },
      axis: { values: [1, 10, 100, 1000, 10_000, 100_000] },
      title: 'milliseconds (log scale); dot p50, tick p95',
    } as const;
    return {
      drawn: [...flow, ...floor],
      notes: [
        `seed: ${seed.reservationLatency.note}; a reference value from ${SEED_REFERENCE} (${seed.cite}, ${seed.date}), not measured here`,
        "flow: kubectl label → marker file, kubectl's own run included; floor: our client's label PATCH → marker file",
      ],
      chart: {
        width: 520,
        height: { step: 34 },
        data: { values: rows },
        layer: [
          { mark: { type: 'rule', color: '#bbbbbb' }, encoding: { y, x: { ...x, field: 'from' }, x2: { field: 'p50' } } },
          {
            mark: { type: 'point', filled: true, size: 90 },
            encoding: { y, x: { ...x, field: 'p50' }, color: { field: 'kind', type: 'nominal', title: null, legend: { orient: 'bottom', labelLimit: 300 } } },
          },
          { transform: [{ filter: 'isValid(datum.p95) && isFinite(datum.p95)' }], mark: { type: 'tick', thickness: 2, color: '#333333' }, encoding: { y, x: { ...x, field: 'p95' } } },
          { mark: { type: 'text', align: 'left', dx: 8, dy: -10, fontSize: 10 }, encoding: { y, x: { ...x, field: 'p50' }, text: { field: 'text' } } },
        ],
      },
    };
  },
};

/** The chain against its floor (2·W + P), per disk count. */
const floorPlot: Plot = {
  file: 'docs/pictures/bench-reservation-floor.svg',
  title: 'The reservation chain against its floor (p50, bars; p95, ticks)',
  commands: ['npm run bench:reservation-floor', 'DISKS=2000 SAMPLES=30 npm run bench:reservation-floor'],
  benches: ['reservation-floor'],
  draw(records) {
    const drawn = latestBy(records('reservation-floor'), (r) => num(r.params.disks)).sort((a, b) => num(a.params.disks) - num(b.params.disks));
    if (drawn.length === 0) return undefined;
    const rows: Row[] = drawn.flatMap((r) => {
      const f = r.figures;
      const disks = `${r.params.disks} disks`;
      const P = obj(f.patchMs);
      const W = obj(f.watchDeliveryMs);
      const chain = obj(f.chainMs);
      return [
        { disks, what: 'P', p50: num(P.p50), p95: num(P.p95), note: '' },
        { disks, what: 'W', p50: num(W.p50), p95: num(W.p95), note: '' },
        { disks, what: 'floor 2·W + P', p50: num(f.floorMs), p95: Number.NaN, note: '' },
        { disks, what: 'chain', p50: num(chain.p50), p95: num(chain.p95), note: `${num(f.chainOverFloor).toFixed(2)}× floor` },
      ];
    });
    const x = { field: 'what', type: 'nominal', sort: null, title: null, axis: { labelAngle: 0 } } as const;
    const yTitle = 'milliseconds (goal: chain ≤ 2× floor)';
    return {
      drawn,
      notes: [
        "P: a merge PATCH's round trip; W: a PATCH sent → its own watch event (one write, one hop)",
        "chain: our client's label PATCH → the controller's write → the agent's write → the marker file (three writes, two hops)",
      ],
      chart: {
        data: { values: rows },
        facet: { column: { field: 'disks', type: 'nominal', sort: drawn.map((r) => `${r.params.disks} disks`), title: null } },
        spec: {
          width: 260,
          height: 220,
          layer: [
            { mark: 'bar', encoding: { x, y: { field: 'p50', type: 'quantitative', title: yTitle }, color: { field: 'what', type: 'nominal', sort: null, legend: null } } },
            {
              transform: [{ filter: 'isValid(datum.p95) && isFinite(datum.p95)' }],
              mark: { type: 'tick', thickness: 2, color: '#333333' },
              encoding: { x, y: { field: 'p95', type: 'quantitative' } },
            },
            { mark: { type: 'text', dy: -8, fontSize: 10 }, encoding: { x, y: { field: 'p50', type: 'quantitative' }, text: { field: 'note' } } },
          ],
        },
      },
    };
  },
};

const CONTROLLER_METRICS = ['time to reconcile every NodeDisk (s)', 'kube-apiserver CPU during it (s)', 'controller RSS, peak (MiB)', 'controller RSS, idle after (MiB)'] as const;

/** The controller's first start and restarts against the NodeDisk count: time, the API server's CPU, its memory. */
const controllerPlot: Plot = {
  file: 'docs/pictures/bench-controller-scale.svg',
  title: 'Controller first start and restart against NodeDisk count',
  commands: ['SCALE_N=10000 npm run bench:scale:controller', 'SCALE_N=50000 npm run bench:scale:controller'],
  benches: ['scale-controller'],
  draw(records) {
    // This checkout's controller as shipped: no other build, no memory limit, no extra flags.
    const plain = records('scale-controller').filter((r) => r.params.controller === 'this checkout' && !r.params.memoryLimitMiB && !r.params.extraArgs);
    const drawn = latestBy(plain, (r) => num(r.params.nodeDisks));
    if (drawn.length === 0) return undefined;
    const rows: Row[] = drawn.flatMap((r) =>
      (Array.isArray(r.figures.phases) ? r.figures.phases : []).flatMap((p) => {
        const ph = obj(p);
        const base = { nodeDisks: num(r.params.nodeDisks), phase: String(ph.name) };
        return [
          { ...base, metric: CONTROLLER_METRICS[0], value: num(ph.seconds) },
          { ...base, metric: CONTROLLER_METRICS[1], value: num(ph.apiserverCpu) },
          { ...base, metric: CONTROLLER_METRICS[2], value: num(ph.peakMiB) },
          { ...base, metric: CONTROLLER_METRICS[3], value: num(ph.idleMiB) },
        ];
      }),
    );
    return {
      drawn,
      chart: {
        data: { values: rows },
        facet: { field: 'metric', type: 'nominal', sort: CONTROLLER_METRICS, title: null, header: { labelFontSize: 12, labelFontWeight: 'bold' } },
        columns: 2,
        resolve: { scale: { y: 'independent' } },
        spec: {
          width: 300,
          height: 180,
          mark: { type: 'line', point: true },
          encoding: {
            x: { field: 'nodeDisks', type: 'quantitative', title: 'NodeDisks', scale: { zero: true } },
            y: { field: 'value', type: 'quantitative', title: null, scale: { zero: true } },
            color: { field: 'phase', type: 'nominal', sort: null, title: null, legend: { orient: 'bottom', labelLimit: 400 } },
          },
        },
      },
    };
  },
};

const PLUGIN_METRICS = ['wall time (ms)', 'CPU time, user + sys (ms)', 'peak RSS (MiB)'] as const;

/** `kubectl nodedisks list` against `kubectl get nodedisks` by size: wall time, CPU, peak RSS. */
const pluginPlot: Plot = {
  file: 'docs/pictures/bench-plugin-scale.svg',
  title: 'kubectl nodedisks list against kubectl get nodedisks, by NodeDisk count (median of the runs)',
  commands: ['SCALE_N=10000,50000 RUNS=3 npm run bench:scale:plugin'],
  benches: ['scale-plugin'],
  draw(records) {
    // For each size, the newest run that measured it.
    const bySize = new Map<number, { record: BenchRecord; row: Record<string, unknown> }>();
    for (const record of records('scale-plugin')) {
      for (const row of Array.isArray(record.figures.sizes) ? record.figures.sizes : []) bySize.set(num(obj(row).nodeDisks), { record, row: obj(row) });
    }
    if (bySize.size === 0) return undefined;
    const rows: Row[] = [...bySize.entries()]
      .sort(([a], [b]) => a - b)
      .flatMap(([nodeDisks, { row }]) => {
        const commands: [string, Record<string, unknown>][] = [
          ['kubectl get nodedisks', obj(row.kubectlGet)],
          ...Object.entries(obj(row.plugins)).map(([name, s]): [string, Record<string, unknown>] => [`kubectl nodedisks list (${name})`, obj(s)]),
        ];
        return commands.flatMap(([command, s]) => [
          { nodeDisks, command, metric: PLUGIN_METRICS[0], value: num(s.wallMs) },
          { nodeDisks, command, metric: PLUGIN_METRICS[1], value: num(s.cpuMs) },
          { nodeDisks, command, metric: PLUGIN_METRICS[2], value: num(s.rssMiB) },
        ]);
      });
    return {
      drawn: [...new Set([...bySize.values()].map((v) => v.record))],
      notes: ["both through the control plane's kubectl, output to /dev/null; CPU and RSS (GNU time) of kubectl and, for the plugin, of what it execs"],
      chart: {
        data: { values: rows },
        facet: { column: { field: 'metric', type: 'nominal', sort: PLUGIN_METRICS, title: null, header: { labelFontSize: 12, labelFontWeight: 'bold' } } },
        resolve: { scale: { y: 'independent' } },
        spec: {
          width: 240,
          height: 200,
          mark: { type: 'line', point: true },
          encoding: {
            x: { field: 'nodeDisks', type: 'quantitative', title: 'NodeDisks (log scale)', scale: { type: 'log' }, axis: { values: [1, 10, 100, 1000, 10_000, 100_000] } },
            y: { field: 'value', type: 'quantitative', title: null, scale: { type: 'log' }, axis: { tickCount: 4 } },
            color: { field: 'command', type: 'nominal', sort: null, title: null, legend: { orient: 'bottom', labelLimit: 400 } },
          },
        },
      },
    };
  },
};

const MEMORY_KINDS = ['bare node, same flags', 'node + https, http server, fs/promises', 'as shipped'] as const;

/** The agent's and the controller's RSS as shipped, against bare Node, a client-shaped Node and issue 24's goals. */
const memoryPlot: Plot = {
  file: 'docs/pictures/bench-memory.svg',
  title: "Agent (300 disks) and controller (idle) memory against the runtime's floor (RSS, MiB)",
  commands: ['npm run bench:memory'],
  benches: ['memory-floor'],
  draw(records) {
    // The newest run that measured the builds as shipped (other runs compare variants).
    const drawn = records('memory-floor')
      .filter((r) => 'agent:shipped' in r.figures && 'controller:shipped' in r.figures)
      .slice(-1);
    const r = drawn[0];
    if (!r) return undefined;
    const goals = obj(r.figures.goals);
    const programs: [string, Record<string, unknown>, number][] = [
      [`agent, ${r.params.disks} disks`, obj(r.figures['agent:shipped']), num(goals.agentMiB)],
      [`controller, ${r.params.controllerDisks} NodeDisks, idle`, obj(r.figures['controller:shipped']), num(goals.controllerMiB)],
    ];
    const rows: Row[] = programs.flatMap(([program, f, goal]) =>
      [num(f.bare), num(f.clientFloor), num(f.rss)].map((mib, k) => ({ program, kind: MEMORY_KINDS[k]!, mib, goal, text: k === 2 ? `goal ${goal} MiB` : '' })),
    );
    const y = { field: 'program', type: 'nominal', sort: null, title: null, axis: { labelLimit: 300 } } as const;
    return {
      drawn,
      notes: [`median of ${r.params.runs} fresh processes each, ${r.params.settleS} s after ready, against a real control plane; the goal is issue 24's`],
      chart: {
        width: 520,
        height: 150,
        data: { values: rows },
        layer: [
          {
            mark: 'bar',
            encoding: {
              y,
              yOffset: { field: 'kind', type: 'nominal', sort: [...MEMORY_KINDS] },
              x: { field: 'mib', type: 'quantitative', title: 'MiB (VmRSS)', scale: { zero: true } },
              color: { field: 'kind', type: 'nominal', sort: [...MEMORY_KINDS], title: null, legend: { orient: 'bottom', labelLimit: 400 } },
            },
          },
          { mark: { type: 'tick', thickness: 3, color: '#c0392b' }, encoding: { y, x: { field: 'goal', type: 'quantitative' } } },
          {
            transform: [{ filter: "datum.text !== ''" }],
            mark: { type: 'text', align: 'left', dx: 6, dy: -14, fontSize: 10, color: '#c0392b' },
            encoding: { y, x: { field: 'goal', type: 'quantitative' }, text: { field: 'text' } },
          },
        ],
      },
    };
  },
};

export const PLOTS: Plot[] = [reservationPlot, floorPlot, controllerPlot, pluginPlot, memoryPlot];

function fmtMs(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
}

/** The SVG of a vega-lite spec. */
export async function renderVegaLite(spec: TopLevelSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return `${svg}\n`;
}

/** The plot as a vega-lite spec: its chart with the title and subtitle, or a placeholder when nothing is recorded. */
export function plotSpec(plot: Plot, records: Records, seed: SeedReference): TopLevelSpec {
  const drawn = plot.draw(records, seed);
  const recordedBy = `recorded by: ${plot.commands.join('; ')}`;
  const config = { font: FONT, title: { anchor: 'start', subtitleColor: '#555555', subtitleFontSize: 11 }, view: { stroke: '#dddddd' } } as const;
  if (!drawn) {
    return {
      title: { text: plot.title, subtitle: ['No runs recorded yet.', recordedBy] },
      width: 520,
      height: 60,
      config: { ...config, view: { stroke: null } },
      data: { values: [{ text: `no runs recorded in bench/results/ (${plot.benches.map((b) => `${b}.jsonl`).join(', ')})` }] },
      mark: { type: 'text', fontSize: 13, color: '#999999' },
      encoding: { text: { field: 'text' } },
    };
  }
  const subtitle = [...provenance(drawn.drawn).map((l) => `measured on ${l}`), ...(drawn.notes ?? []), recordedBy];
  return { ...drawn.chart, title: { text: plot.title, subtitle }, config } as TopLevelSpec;
}

export function readSeedReference(): SeedReference {
  return JSON.parse(readFileSync(join(REPO_ROOT, SEED_REFERENCE), 'utf8')) as SeedReference;
}

/** Every plot's file, from the records in `dir` (the committed bench/results by default). */
export async function plotFiles(dir = join(REPO_ROOT, RESULTS_DIR), seed = readSeedReference()): Promise<GeneratedFile[]> {
  const records: Records = (bench) => readRecordsIn(dir, bench);
  return Promise.all(PLOTS.map(async (p) => ({ path: p.file, content: await renderVegaLite(plotSpec(p, records, seed)) })));
}
