// The benches read the CSI driver's call histogram from the text its /metrics serves (written here by the
// driver's own registry): per call and answer, a round's calls as the difference of two scrapes summed
// over pods, and quantiles estimated within the buckets as histogram_quantile does.
import test from 'ava';
import { combine, parseCallHistograms, parseHistograms, quantileOf, slowerThan } from '../../bench/lib/call-histogram.ts';
import { csiMetrics } from '../../csi/metrics.ts';
import { Histogram, Registry } from '../../lib/runtime/prom-client.ts';

async function scrape(observe: (m: ReturnType<typeof csiMetrics>) => void, m = csiMetrics()) {
  observe(m);
  return { m, text: await m.registry.metrics() };
}

const stage = { method_name: '/csi.v1.Node/NodeStageVolume', grpc_status_code: 'OK' };

test("a pod's calls by short method and answer, with their buckets, count and sum", async (t) => {
  const { text } = await scrape(({ calls }) => {
    for (const s of [0.3, 0.4, 3, 12]) calls.observe(stage, s);
    calls.observe({ method_name: '/csi.v1.Node/NodeStageVolume', grpc_status_code: 'Aborted' }, 0.01);
  });
  const h = parseCallHistograms(text);
  t.deepEqual([...h.keys()].sort(), ['NodeStageVolume Aborted', 'NodeStageVolume OK']);
  const ok = h.get('NodeStageVolume OK')!;
  t.is(ok.count, 4);
  t.is(Math.round(ok.sum * 10), 157);
  t.deepEqual(ok.buckets.at(-1), [Number.POSITIVE_INFINITY, 4]);
  t.deepEqual(
    ok.buckets.find(([le]) => le === 0.5),
    [0.5, 2],
  );
});

test("a round's calls: the second scrape less the first, summed over the pods; a call with none in the round is left out", async (t) => {
  const a = csiMetrics();
  const b = csiMetrics();
  const beforeA = parseCallHistograms((await scrape(({ calls }) => calls.observe(stage, 1), a)).text);
  const beforeB = parseCallHistograms((await scrape(() => {}, b)).text);
  const afterA = parseCallHistograms((await scrape(({ calls }) => calls.observe(stage, 2), a)).text);
  const afterB = parseCallHistograms(
    (
      await scrape(({ calls }) => {
        calls.observe(stage, 4);
        calls.observe(stage, 20);
      }, b)
    ).text,
  );
  const round = combine([
    { after: afterA, before: beforeA },
    { after: afterB, before: beforeB },
  ]);
  t.is(round.get('NodeStageVolume OK')?.count, 3);
  t.is(round.get('NodeStageVolume OK')?.sum, 26);
  const idle = combine([{ after: beforeA, before: beforeA }]);
  t.is(idle.size, 0);
});

test('quantiles are interpolated within the bucket the rank falls in, and a rank in +Inf is the highest finite bound', (t) => {
  const h = {
    buckets: [
      [1, 2],
      [5, 6],
      [10, 10],
      [Number.POSITIVE_INFINITY, 10],
    ] as Array<[number, number]>,
    count: 10,
    sum: 40,
  };
  // Rank 5 of 10: the (1, 5] bucket holds ranks 3..6, so 1 + 4 × (5 − 2) / 4.
  t.is(quantileOf(h, 0.5), 4);
  // Rank 9.5: (5, 10] holds 7..10: 5 + 5 × 3.5 / 4.
  t.is(quantileOf(h, 0.95), 9.375);
  t.is(quantileOf({ ...h, buckets: [...h.buckets.slice(0, 3), [Number.POSITIVE_INFINITY, 20]] }, 0.95), 10);
  t.is(quantileOf({ buckets: [[Number.POSITIVE_INFINITY, 0]], count: 0, sum: 0 }, 0.5), undefined);
});

test("the API server's queue wait by priority level: its flow schemas' series add up, and the waits past a bound are counted from the buckets", async (t) => {
  const registry = new Registry();
  const wait = new Histogram({
    name: 'apiserver_flowcontrol_request_wait_duration_seconds',
    help: 'as the API server names it',
    labelNames: ['priority_level', 'flow_schema', 'execute'],
    buckets: [0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30],
    registers: [registry],
  });
  wait.observe({ priority_level: 'workload-low', flow_schema: 'service-accounts', execute: 'true' }, 0.001);
  wait.observe({ priority_level: 'workload-low', flow_schema: 'service-accounts', execute: 'true' }, 12);
  wait.observe({ priority_level: 'workload-low', flow_schema: 'kube-system-service-accounts', execute: 'true' }, 25);
  wait.observe({ priority_level: 'workload-low', flow_schema: 'service-accounts', execute: 'false' }, 30);
  wait.observe({ priority_level: 'system', flow_schema: 'system-nodes', execute: 'true' }, 0);
  const h = parseHistograms(await registry.metrics(), 'apiserver_flowcontrol_request_wait_duration_seconds', (l) =>
    l.get('execute') === 'true' ? (l.get('priority_level') ?? '') : `${l.get('priority_level')} (rejected)`,
  );
  t.deepEqual([...h.keys()].sort(), ['system', 'workload-low', 'workload-low (rejected)']);
  t.is(h.get('workload-low')?.count, 3);
  t.is(slowerThan(h.get('workload-low')!, 10), 2);
  t.is(slowerThan(h.get('system')!, 10), 0);
  t.true(Number.isNaN(slowerThan(h.get('system')!, 7)));
});
