// Our exposition judged by others (docs/adr/0026): Prometheus' own text parser and promlint
// (hack/promtext, Go, built on first use and cached) read our text, and the same operations driven on
// prom-client, the library we replaced, must parse to the same families and samples.
import test from 'ava';
import * as promClient from 'prom-client';
import { agentMetrics } from '../../agent/metrics.ts';
import { controllerMetrics } from '../../controller/metrics.ts';
import * as ours from '../../lib/runtime/metrics.ts';
import { registerProcessMetrics } from '../../lib/runtime/process-metrics.ts';
import { ensurePromtext, goFloat, parseExposition, type Parsed, type ParsedFamily } from '../../hack/promtext/promtext.ts';

let bin = '';
const parse = (text: string): Promise<Parsed> => parseExposition(bin, text);

test.before(async (t) => {
  // A cold build of the parser takes minutes; after that it is a cached binary.
  t.timeout(20 * 60_000, 'building hack/promtext took more than 20 minutes');
  bin = await ensurePromtext();
});

/** What both libraries offer, as the programs use it. */
interface Lib {
  Registry: new () => { metrics(): string | Promise<string> };
  Counter: new (o: ours.MetricOptions<ours.Counter>) => ours.Counter;
  Gauge: new (o: ours.MetricOptions<ours.Gauge>) => ours.Gauge;
  Histogram: new (o: ours.HistogramOptions) => ours.Histogram;
}

/** The same operations on either library: every kind, labels, escaping, odd values, reset, a collect hook. */
async function drive(lib: Lib): Promise<string> {
  const registry = new lib.Registry();
  const registers = [registry as ours.Registry];
  const ops = new lib.Counter({ name: 'ops_total', help: 'Operations by "op" \\ result,\nsecond line', labelNames: ['op', 'result'], registers });
  ops.inc({ op: 'create', result: 'ok' });
  ops.inc({ op: 'create', result: 'ok' }, 2);
  ops.inc({ result: 'failed', op: 'say "hi" \\ bye\nnext' }, 0.5);
  new lib.Counter({ name: 'unused_total', help: 'Never incremented', registers });
  const plain = new lib.Counter({ name: 'plain_total', help: 'No labels', registers });
  plain.inc(41);
  plain.inc();
  const temp = new lib.Gauge({ name: 'temperature_celsius', help: 'Temperatures', labelNames: ['where'], registers });
  temp.set({ where: 'in' }, 21.5);
  temp.inc({ where: 'in' });
  temp.dec({ where: 'out' }, 3);
  temp.set({ where: 'unknown' }, NaN);
  temp.set({ where: 'hot' }, Infinity);
  temp.set({ where: 'cold' }, -Infinity);
  temp.set({ where: 'big' }, 1e21);
  temp.set({ where: 'tiny' }, 1e-7);
  const phases = new lib.Gauge({ name: 'disks', help: 'Disks by phase', labelNames: ['phase'], registers });
  phases.set({ phase: 'Available' }, 4);
  phases.reset();
  phases.set({ phase: 'Reserved' }, 2);
  let state = 0;
  new lib.Gauge({
    name: 'hooked',
    help: 'Set by its collect hook',
    registers,
    collect() {
      this.set(state);
    },
  });
  state = 7;
  const latency = new lib.Histogram({ name: 'latency_seconds', help: 'Latency', labelNames: ['op'], buckets: [0.01, 0.1, 1], registers });
  for (const v of [0.005, 0.01, 0.05, 0.1, 0.5, 3]) latency.observe({ op: 'get' }, v);
  latency.observe({ op: 'put' }, 2);
  new lib.Histogram({ name: 'empty_seconds', help: 'No observation', buckets: [1, 2], registers });
  new lib.Histogram({ name: 'defaults_seconds', help: 'Default buckets', registers }).observe(0.3);
  return await registry.metrics();
}

/** Families with their metrics in a fixed order: the order of series carries no meaning. */
const normalized = (p: Parsed): ParsedFamily[] => p.families.map((f) => ({ ...f, metrics: [...f.metrics].sort((a, b) => JSON.stringify(a.labels).localeCompare(JSON.stringify(b.labels))) }));

test("Prometheus' parser reads the same families and samples from our text as from prom-client's, for the same operations", async (t) => {
  const [mine, theirs] = await Promise.all([parse(await drive(ours)), parse(await drive(promClient as unknown as Lib))]);
  t.is(mine.error, undefined);
  t.is(theirs.error, undefined);
  t.deepEqual(normalized(mine), normalized(theirs));
  // The escaped strings came back as they were given.
  const ops = mine.families.find((f) => f.name === 'ops_total')!;
  t.is(ops.help, 'Operations by "op" \\ result,\nsecond line');
  t.true(ops.metrics.some((m) => m.labels.op === 'say "hi" \\ bye\nnext'));
  t.is(mine.families.find((f) => f.name === 'hooked')!.metrics[0]!.value, '7');
  t.deepEqual(
    mine.families.map((f) => f.name),
    ['defaults_seconds', 'disks', 'empty_seconds', 'hooked', 'latency_seconds', 'ops_total', 'plain_total', 'temperature_celsius', 'unused_total'],
  );
});

test("the parser used as the judge refuses a malformed text (it can tell us we're wrong)", async (t) => {
  t.regex((await parse('# TYPE x counter\nx{a="b} 1\n')).error ?? '', /text format parsing error/);
  t.regex((await parse('# TYPE x counter\nx{a="b\\q"} 1\n')).error ?? '', /invalid escape sequence/);
});

test("the agent's and the controller's whole /metrics text parse, and promlint finds no problem in them", async (t) => {
  const agent = agentMetrics();
  agent.disks.set({ phase: 'Available' }, 2);
  agent.scanSeconds.observe(0.02);
  agent.heartbeats.inc({ result: 'renewed' });
  const controller = controllerMetrics(() => true);
  controller.reconciles.inc({ result: 'success' });
  for (const registry of [agent.registry, controller.registry]) {
    const families = registry.collect();
    const parsed = await parse(families.map(ours.formatFamily).join(''));
    t.is(parsed.error, undefined);
    t.deepEqual(parsed.problems, []);
    // A family with no sample yet (a labelled counter never incremented) is only HELP and TYPE lines,
    // which the parser drops; every other one is read back.
    const withSamples = families.filter((f) => f.samples.length > 0).map((f) => f.name);
    t.deepEqual(
      parsed.families.map((f) => f.name),
      withSamples.sort(),
    );
    t.true(withSamples.length >= 20, withSamples.join(' '));
  }
});

test("process and runtime metrics: the names, types, help and labels of prom-client's default metrics, the fd counts equal", async (t) => {
  const mineRegistry = new ours.Registry();
  registerProcessMetrics(mineRegistry);
  const theirRegistry = new promClient.Registry();
  promClient.collectDefaultMetrics({ register: theirRegistry });
  // Scraped back to back, with no file opened in between: the fd counts must agree exactly.
  const mineText = mineRegistry.metrics();
  const theirText = await theirRegistry.metrics();
  const [mine, theirs] = await Promise.all([parse(mineText), parse(theirText)]);
  t.is(mine.error, undefined);
  t.deepEqual(mine.problems, []);
  const shape = (f: ParsedFamily) => ({ name: f.name, type: f.type, help: f.help, labelNames: [...new Set(f.metrics.map((m) => Object.keys(m.labels).sort().join(',')))].sort() });
  for (const f of mine.families) {
    const theirs_ = theirs.families.find((x) => x.name === f.name);
    t.truthy(theirs_, `prom-client has ${f.name}`);
    if (theirs_) t.deepEqual(shape(f), shape(theirs_));
  }
  const value = (p: Parsed, name: string) => goFloat(p.families.find((f) => f.name === name)?.metrics[0]?.value);
  t.is(value(mine, 'process_open_fds'), value(theirs, 'process_open_fds'));
  t.is(value(mine, 'process_max_fds'), value(theirs, 'process_max_fds'));
  t.true(Math.abs(value(mine, 'process_start_time_seconds') - value(theirs, 'process_start_time_seconds')) <= 1);
  const labelsOf = (p: Parsed, name: string) => p.families.find((f) => f.name === name)!.metrics.map((m) => m.labels);
  t.deepEqual(labelsOf(mine, 'nodejs_version_info'), labelsOf(theirs, 'nodejs_version_info'));
  t.deepEqual(labelsOf(mine, 'nodejs_heap_space_size_used_bytes'), labelsOf(theirs, 'nodejs_heap_space_size_used_bytes'));
});
