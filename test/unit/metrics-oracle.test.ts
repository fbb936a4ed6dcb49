// The agent's and the controller's /metrics judged by Prometheus' own text parser and promlint
// (hack/promtext, Go, built on first use and cached): the whole text parses and our metric definitions
// break none of its naming rules; the process metrics are those of prom-client's default metrics, without
// what those keep running between scrapes (docs/adr/0026).
import test from 'ava';
import * as promClient from 'prom-client';
import { agentMetrics } from '../../agent/metrics.ts';
import { controllerMetrics } from '../../controller/metrics.ts';
import { registerProcessMetrics } from '../../lib/runtime/process-metrics.ts';
import { ensurePromtext, goFloat, parseExposition, type Parsed, type ParsedFamily } from '../../hack/promtext/promtext.ts';

let bin = '';
const parse = (text: string): Promise<Parsed> => parseExposition(bin, text);

test.before(async (t) => {
  // A cold build of the parser takes minutes; after that it is a cached binary.
  t.timeout(20 * 60_000, 'building hack/promtext took more than 20 minutes');
  bin = await ensurePromtext();
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
  // Every gauge computed at scrape gets something to count, so promlint judges its samples too.
  const controller = controllerMetrics(
    () => true,
    () => [
      {
        apiVersion: 'localtest.example.com/v1alpha1',
        kind: 'NodeDisk',
        metadata: { name: 'node-disk-n1-d1' },
        spec: { nodeName: 'n1', diskID: 'd1', path: '/d/d1.img', desired: { state: 'Reserved', owner: 'auto' } },
        status: { node: { phase: 'Reserved', capacityBytes: 2 ** 30 } },
      },
    ],
    () => [{ node: 'n1', ageSeconds: 2.5 }],
  );
  controller.reconciles.inc({ result: 'success' });
  controller.apiErrors.inc({ verb: 'PATCH', code: '409' });
  for (const registry of [agent.registry, controller.registry]) {
    const parsed = await parse(await registry.metrics());
    t.is(parsed.error, undefined);
    t.deepEqual(parsed.problems, []);
    // A family with no sample yet (a labelled counter never incremented) is only HELP and TYPE lines,
    // which the parser drops; every other one is read back.
    const withSamples = (await registry.getMetricsAsJSON()).filter((f) => f.values.length > 0).map((f) => f.name);
    t.deepEqual(
      parsed.families.map((f) => f.name),
      withSamples.sort(),
    );
    t.true(withSamples.length >= 20, withSamples.join(' '));
  }
});

test("process and runtime metrics: the names, types, help and labels of prom-client's default metrics, the fd counts equal", async (t) => {
  const mineRegistry = new promClient.Registry();
  registerProcessMetrics(mineRegistry);
  const theirRegistry = new promClient.Registry();
  promClient.collectDefaultMetrics({ register: theirRegistry });
  // Scraped back to back, with no file opened in between (no await: prom-client runs the collect hooks
  // when metrics() is called, and other tests of this file open pipes meanwhile): the fd counts must agree exactly.
  const [mineText, theirText] = await Promise.all([mineRegistry.metrics(), theirRegistry.metrics()]);
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
