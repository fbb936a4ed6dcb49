// Counters, gauges and histograms, served in the Prometheus text exposition format 0.0.4. Our own
// instead of prom-client, whose registry, default collectors and dependencies cost the node agent
// memory (ADR 26). The options and methods are the ones the programs used with
// prom-client (`registers`, `labelNames`, `collect`, `inc`, `set`, `observe`, `startTimer`, `reset`),
// so a metric definition reads the same. Not here: summaries, exemplars, OpenMetrics, timestamps.

export const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export type Labels = Readonly<Record<string, string | number>>;

/** One line of the exposition: `name{labels} value`. */
export interface Sample {
  name: string;
  labels: readonly (readonly [string, string])[];
  value: number;
}

export interface MetricFamily {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  samples: Sample[];
}

/** What a registry asks for its families at each scrape. */
export interface Collector {
  /** The family names it produces, known up front so that a clash is found when registering. */
  readonly names: readonly string[];
  collect(): MetricFamily[];
}

export class Registry {
  readonly contentType = CONTENT_TYPE;
  readonly #collectors: Collector[] = [];
  readonly #names = new Set<string>();

  register(c: Collector): void {
    for (const name of c.names) {
      if (this.#names.has(name)) throw new Error(`metric ${name} is registered twice in one registry; give the second one another name`);
    }
    for (const name of c.names) this.#names.add(name);
    this.#collectors.push(c);
  }

  /** Every collector's families, asked now (collect hooks run here, once per scrape). */
  collect(): MetricFamily[] {
    return this.#collectors.flatMap((c) => c.collect());
  }

  /** The exposition text of one scrape. */
  metrics(): string {
    return this.collect().map(formatFamily).join('');
  }
}

// The format: https://prometheus.io/docs/instrumenting/exposition_formats/ (text format 0.0.4).

/** HELP text escapes only backslash and line feed. */
export function escapeHelp(s: string): string {
  return s.replace(/[\\\n]/g, (c) => (c === '\n' ? '\\n' : '\\\\'));
}

/** A label value escapes backslash, double quote and line feed. */
export function escapeLabelValue(s: string): string {
  return s.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`));
}

/**
 * A sample value as Prometheus reads it (Go's ParseFloat): NaN, +Inf, -Inf, and integers written out
 * in full. JavaScript writes 1e21 and above with an exponent; a double that large is still an integer,
 * and BigInt writes its exact digits.
 */
export function formatValue(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return '+Inf';
  if (n === -Infinity) return '-Inf';
  if (Number.isInteger(n) && Math.abs(n) >= 1e21) return BigInt(n).toString();
  return String(n);
}

export function formatFamily(f: MetricFamily): string {
  let text = `# HELP ${f.name} ${escapeHelp(f.help)}\n# TYPE ${f.name} ${f.type}\n`;
  for (const s of f.samples) {
    const labels = s.labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(',');
    text += `${s.name}${labels ? `{${labels}}` : ''} ${formatValue(s.value)}\n`;
  }
  return text;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export interface MetricOptions<M> {
  name: string;
  help: string;
  labelNames?: readonly string[];
  registers?: readonly Registry[];
  /** Called at each scrape before the values are read, e.g. to set a gauge from current state. */
  collect?: (this: M) => void;
}

type Pairs = (readonly [string, string])[];

/** What the three kinds share: options checked once, one series per set of label values. */
abstract class Metric<V> implements Collector {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly #type: MetricFamily['type'];
  readonly #collect: ((this: unknown) => void) | undefined;
  readonly #series = new Map<string, { labels: Pairs; value: V }>();

  protected constructor(o: MetricOptions<never>, type: MetricFamily['type'], reserved: readonly string[] = []) {
    if (!METRIC_NAME.test(o.name)) throw new Error(`metric name ${JSON.stringify(o.name)} is not valid: use letters, digits, _ and :, not starting with a digit`);
    if (!o.help) throw new Error(`metric ${o.name} has no help text: say what it counts`);
    const labelNames = o.labelNames ?? [];
    for (const l of labelNames) {
      if (!LABEL_NAME.test(l) || l.startsWith('__')) throw new Error(`metric ${o.name}: label name ${JSON.stringify(l)} is not valid: use letters, digits and _, not starting with a digit or __`);
      if (reserved.includes(l)) throw new Error(`metric ${o.name}: label name ${l} is reserved for the ${type} itself; choose another`);
    }
    if (new Set(labelNames).size !== labelNames.length) throw new Error(`metric ${o.name}: a label name is given twice in ${JSON.stringify(labelNames)}`);
    this.name = o.name;
    this.help = o.help;
    this.labelNames = labelNames;
    this.#type = type;
    this.#collect = o.collect as ((this: unknown) => void) | undefined;
    for (const r of o.registers ?? []) r.register(this);
  }

  get names(): readonly string[] {
    return [this.name];
  }

  /** Forgets every series; a metric without labels starts again at zero. */
  reset(): void {
    this.#series.clear();
  }

  protected abstract zero(): V;
  protected abstract samples(labels: Pairs, value: V): Sample[];

  /** The series of these label values, created at zero on first use. Undeclared label names throw. */
  protected series(labels: Labels | undefined): { labels: Pairs; value: V } {
    const pairs: Pairs = [];
    if (labels) {
      for (const k of Object.keys(labels)) {
        if (!this.labelNames.includes(k)) throw new Error(`metric ${this.name}: label ${k} is not one of its label names ${JSON.stringify(this.labelNames)}`);
      }
      for (const k of this.labelNames) if (labels[k] !== undefined) pairs.push([k, String(labels[k])]);
    }
    const key = JSON.stringify(pairs);
    let s = this.#series.get(key);
    if (!s) {
      s = { labels: pairs, value: this.zero() };
      this.#series.set(key, s);
    }
    return s;
  }

  collect(): MetricFamily[] {
    this.#collect?.call(this);
    // A metric without labels is exposed at zero before its first use, as prom-client and client_golang do.
    if (this.labelNames.length === 0) this.series(undefined);
    const samples: Sample[] = [];
    for (const s of this.#series.values()) samples.push(...this.samples(s.labels, s.value));
    return [{ name: this.name, help: this.help, type: this.#type, samples }];
  }
}

/** (labels, value) or (value) or (labels) or (): the argument forms prom-client takes. */
function args(a: Labels | number | undefined, b: number | undefined, otherwise: number): [Labels | undefined, number] {
  return typeof a === 'number' ? [undefined, a] : [a, b ?? otherwise];
}

/** A value that only goes up (restarts at zero with the process). */
export class Counter extends Metric<{ n: number }> {
  constructor(o: MetricOptions<Counter>) {
    super(o as MetricOptions<never>, 'counter');
  }

  inc(value?: number): void;
  inc(labels: Labels, value?: number): void;
  inc(a?: Labels | number, b?: number): void {
    const [labels, value] = args(a, b, 1);
    if (!Number.isFinite(value) || value < 0) throw new Error(`counter ${this.name}: cannot add ${value}; a counter only goes up by a finite amount`);
    this.series(labels).value.n += value;
  }

  protected zero() {
    return { n: 0 };
  }

  protected samples(labels: Pairs, v: { n: number }): Sample[] {
    return [{ name: this.name, labels, value: v.n }];
  }
}

/** A value that goes up and down. */
export class Gauge extends Metric<{ n: number }> {
  constructor(o: MetricOptions<Gauge>) {
    super(o as MetricOptions<never>, 'gauge');
  }

  set(value: number): void;
  set(labels: Labels, value: number): void;
  set(a: Labels | number, b?: number): void {
    if (typeof a !== 'number' && typeof b !== 'number') throw new Error(`gauge ${this.name}: set(labels) without a value; give a number`);
    const [labels, value] = args(a, b, NaN);
    this.series(labels).value.n = value;
  }

  inc(value?: number): void;
  inc(labels: Labels, value?: number): void;
  inc(a?: Labels | number, b?: number): void {
    const [labels, value] = args(a, b, 1);
    if (!Number.isFinite(value)) throw new Error(`gauge ${this.name}: cannot add ${value}; give a finite number`);
    this.series(labels).value.n += value;
  }

  dec(value?: number): void;
  dec(labels: Labels, value?: number): void;
  dec(a?: Labels | number, b?: number): void {
    const [labels, value] = args(a, b, 1);
    if (!Number.isFinite(value)) throw new Error(`gauge ${this.name}: cannot subtract ${value}; give a finite number`);
    this.series(labels).value.n -= value;
  }

  protected zero() {
    return { n: 0 };
  }

  protected samples(labels: Pairs, v: { n: number }): Sample[] {
    return [{ name: this.name, labels, value: v.n }];
  }
}

/** prom-client's and client_golang's default buckets (seconds of a network request or so). */
export const DEFAULT_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface HistogramValue {
  /** Observations per bucket, not cumulative (made cumulative when exposed); the last is above every bound. */
  counts: number[];
  sum: number;
  count: number;
}

export interface HistogramOptions extends MetricOptions<Histogram> {
  /** Upper bounds, increasing; +Inf is always added. */
  buckets?: readonly number[];
}

/** Observations counted into buckets by upper bound (`le`), with their sum and count. */
export class Histogram extends Metric<HistogramValue> {
  readonly buckets: readonly number[];

  constructor(o: HistogramOptions) {
    // Checked before super() registers the histogram: a refused one is in no registry.
    const buckets = (o.buckets ?? DEFAULT_BUCKETS).filter((b) => b !== Infinity);
    if (buckets.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= buckets[i - 1]!))) {
      throw new Error(`histogram ${o.name}: buckets ${JSON.stringify(o.buckets)} must be finite numbers in increasing order`);
    }
    super(o as MetricOptions<never>, 'histogram', ['le']);
    this.buckets = buckets;
  }

  observe(value: number): void;
  observe(labels: Labels, value: number): void;
  observe(a: Labels | number, b?: number): void {
    const [labels, value] = args(a, b, NaN);
    if (Number.isNaN(value)) throw new Error(`histogram ${this.name}: cannot observe NaN; give a number`);
    const v = this.series(labels).value;
    let i = 0;
    while (i < this.buckets.length && value > this.buckets[i]!) i++;
    v.counts[i]!++;
    v.sum += value;
    v.count++;
  }

  /** Starts a clock; the returned function observes the seconds since (labels of both merged) and returns them. */
  startTimer(labels?: Labels): (endLabels?: Labels) => number {
    const start = process.hrtime.bigint();
    return (endLabels) => {
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      this.observe({ ...labels, ...endLabels }, seconds);
      return seconds;
    };
  }

  protected zero(): HistogramValue {
    return { counts: new Array<number>(this.buckets.length + 1).fill(0), sum: 0, count: 0 };
  }

  protected samples(labels: Pairs, v: HistogramValue): Sample[] {
    const out: Sample[] = [];
    let cumulative = 0;
    const bounds = [...this.buckets, Infinity];
    bounds.forEach((le, i) => {
      cumulative += v.counts[i]!;
      out.push({ name: `${this.name}_bucket`, labels: [...labels, ['le', formatValue(le)]], value: cumulative });
    });
    out.push({ name: `${this.name}_sum`, labels, value: v.sum }, { name: `${this.name}_count`, labels, value: v.count });
    return out;
  }
}
