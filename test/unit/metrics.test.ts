// Our Prometheus text exposition (lib/runtime/metrics.ts, docs/adr/0026): the exact text of each kind of
// metric, escaping, cumulative histogram buckets, collect hooks run at scrape time, and the refusals of
// bad definitions. test/unit/metrics-oracle.test.ts checks the same text with Prometheus' own parser and
// against prom-client.
import test from 'ava';
import { CONTENT_TYPE, Counter, Gauge, Histogram, Registry, formatValue } from '../../lib/runtime/metrics.ts';
import { startOpsServer } from '../../lib/runtime/server.ts';

test('content type is the text format 0.0.4', (t) => {
  t.is(new Registry().contentType, 'text/plain; version=0.0.4; charset=utf-8');
  t.is(CONTENT_TYPE, 'text/plain; version=0.0.4; charset=utf-8');
});

test('a counter without labels: HELP and TYPE lines, exposed at 0 before its first use, then counts up', (t) => {
  const registry = new Registry();
  const c = new Counter({ name: 'jobs_total', help: 'Jobs done', registers: [registry] });
  t.is(registry.metrics(), '# HELP jobs_total Jobs done\n# TYPE jobs_total counter\njobs_total 0\n');
  c.inc();
  c.inc(2.5);
  t.is(registry.metrics(), '# HELP jobs_total Jobs done\n# TYPE jobs_total counter\njobs_total 3.5\n');
});

test('a counter with labels: one line per label set in first-use order, labels in declared order', (t) => {
  const registry = new Registry();
  const c = new Counter({ name: 'requests_total', help: 'Requests', labelNames: ['method', 'code'], registers: [registry] });
  t.is(registry.metrics(), '# HELP requests_total Requests\n# TYPE requests_total counter\n', 'no series before the first use');
  c.inc({ code: 200, method: 'GET' });
  c.inc({ method: 'PUT', code: '409' }, 3);
  c.inc({ method: 'GET', code: 200 });
  t.is(registry.metrics(), '# HELP requests_total Requests\n# TYPE requests_total counter\n' + 'requests_total{method="GET",code="200"} 2\n' + 'requests_total{method="PUT",code="409"} 3\n');
});

test('a counter refuses to go down, and labels it was not declared with', (t) => {
  const c = new Counter({ name: 'x_total', help: 'x', labelNames: ['op'] });
  t.throws(() => c.inc(-1), { message: /counter x_total: cannot add -1; a counter only goes up/ });
  t.throws(() => c.inc({ op: 'a' }, NaN), { message: /cannot add NaN/ });
  t.throws(() => c.inc({ kind: 'a' }), { message: /metric x_total: label kind is not one of its label names \["op"\]/ });
});

test('a gauge: set, inc and dec by label set; reset forgets every series', (t) => {
  const registry = new Registry();
  const g = new Gauge({ name: 'disks', help: 'Disks by phase', labelNames: ['phase'], registers: [registry] });
  g.set({ phase: 'Available' }, 5);
  g.inc({ phase: 'Reserved' });
  g.inc({ phase: 'Reserved' }, 2);
  g.dec({ phase: 'Available' });
  g.dec({ phase: 'Available' }, 0.5);
  t.is(registry.metrics(), '# HELP disks Disks by phase\n# TYPE disks gauge\ndisks{phase="Available"} 3.5\ndisks{phase="Reserved"} 3\n');
  g.reset();
  g.set({ phase: 'Reserved' }, 1);
  t.is(registry.metrics(), '# HELP disks Disks by phase\n# TYPE disks gauge\ndisks{phase="Reserved"} 1\n');
  const plain = new Gauge({ name: 'depth', help: 'Depth' });
  plain.set(4);
  plain.reset();
  t.deepEqual(plain.collect()[0]!.samples, [{ name: 'depth', labels: [], value: 0 }], 'a gauge without labels is back at 0 after reset');
});

test('a collect hook runs at each scrape, before the values are read, and not otherwise', (t) => {
  const registry = new Registry();
  let leading = false;
  let calls = 0;
  new Gauge({
    name: 'leader',
    help: '1 while leading',
    registers: [registry],
    collect() {
      calls++;
      this.set(leading ? 1 : 0);
    },
  });
  t.is(calls, 0, 'not called when defined');
  t.regex(registry.metrics(), /^leader 0$/m);
  leading = true;
  t.is(calls, 1, 'not called between scrapes');
  t.regex(registry.metrics(), /^leader 1$/m, 'the value of the moment of the scrape');
  t.is(calls, 2);
});

test('histogram: buckets are cumulative, a value on a bound counts in that bucket, +Inf holds all, then _sum and _count', (t) => {
  const registry = new Registry();
  const h = new Histogram({ name: 'scan_seconds', help: 'Scan time', buckets: [0.1, 1, 5], registers: [registry] });
  t.is(
    registry.metrics(),
    '# HELP scan_seconds Scan time\n# TYPE scan_seconds histogram\n' +
      'scan_seconds_bucket{le="0.1"} 0\nscan_seconds_bucket{le="1"} 0\nscan_seconds_bucket{le="5"} 0\nscan_seconds_bucket{le="+Inf"} 0\n' +
      'scan_seconds_sum 0\nscan_seconds_count 0\n',
    'a histogram without labels is exposed empty before its first observation',
  );
  for (const v of [0.05, 0.1, 0.5, 1, 7, 100]) h.observe(v);
  t.is(
    registry.metrics(),
    '# HELP scan_seconds Scan time\n# TYPE scan_seconds histogram\n' +
      'scan_seconds_bucket{le="0.1"} 2\nscan_seconds_bucket{le="1"} 4\nscan_seconds_bucket{le="5"} 4\nscan_seconds_bucket{le="+Inf"} 6\n' +
      'scan_seconds_sum 108.65\nscan_seconds_count 6\n',
  );
});

test("histogram with labels: le comes after the metric's own labels; series apart per label set", (t) => {
  const registry = new Registry();
  const h = new Histogram({ name: 'op_seconds', help: 'Op time', labelNames: ['op'], buckets: [1], registers: [registry] });
  h.observe({ op: 'a' }, 0.5);
  h.observe({ op: 'b' }, 2);
  t.is(
    registry.metrics(),
    '# HELP op_seconds Op time\n# TYPE op_seconds histogram\n' +
      'op_seconds_bucket{op="a",le="1"} 1\nop_seconds_bucket{op="a",le="+Inf"} 1\nop_seconds_sum{op="a"} 0.5\nop_seconds_count{op="a"} 1\n' +
      'op_seconds_bucket{op="b",le="1"} 0\nop_seconds_bucket{op="b",le="+Inf"} 1\nop_seconds_sum{op="b"} 2\nop_seconds_count{op="b"} 1\n',
  );
});

test('histogram startTimer observes the seconds elapsed, with the labels of start and end merged', (t) => {
  const h = new Histogram({ name: 'work_seconds', help: 'Work', labelNames: ['kind', 'result'], buckets: [0.001, 10] });
  const end = h.startTimer({ kind: 'scan' });
  const until = Date.now() + 20;
  while (Date.now() < until);
  const seconds = end({ result: 'ok' });
  t.true(seconds >= 0.019 && seconds < 10, `${seconds} s`);
  const samples = h.collect()[0]!.samples;
  t.deepEqual(
    samples.map((s) => [s.name, Object.fromEntries(s.labels), s.value]),
    [
      ['work_seconds_bucket', { kind: 'scan', result: 'ok', le: '0.001' }, 0],
      ['work_seconds_bucket', { kind: 'scan', result: 'ok', le: '10' }, 1],
      ['work_seconds_bucket', { kind: 'scan', result: 'ok', le: '+Inf' }, 1],
      ['work_seconds_sum', { kind: 'scan', result: 'ok' }, seconds],
      ['work_seconds_count', { kind: 'scan', result: 'ok' }, 1],
    ],
  );
});

test('help text escapes backslash and line feed; label values also escape the double quote', (t) => {
  const registry = new Registry();
  const g = new Gauge({ name: 'odd', help: 'a \\ backslash, a "quote"\nand a second line', labelNames: ['path'], registers: [registry] });
  g.set({ path: 'C:\\disks\\"one"\nline2' }, 1);
  t.is(registry.metrics(), '# HELP odd a \\\\ backslash, a "quote"\\nand a second line\n# TYPE odd gauge\nodd{path="C:\\\\disks\\\\\\"one\\"\\nline2"} 1\n');
});

test('values: NaN, +Inf and -Inf spelled as Prometheus reads them; integers written out in full, never with an exponent', (t) => {
  t.is(formatValue(NaN), 'NaN');
  t.is(formatValue(Infinity), '+Inf');
  t.is(formatValue(-Infinity), '-Inf');
  t.is(formatValue(0), '0');
  t.is(formatValue(-0), '0');
  t.is(formatValue(42), '42');
  t.is(formatValue(-3), '-3');
  t.is(formatValue(0.25), '0.25');
  t.is(formatValue(1e-7), '1e-7');
  t.is(formatValue(2 ** 53), '9007199254740992');
  t.is(formatValue(1e21), '1000000000000000000000');
  t.is(formatValue(-1.5e22), '-15000000000000000000000');
  const g = new Gauge({ name: 'g', help: 'g' });
  g.set(NaN);
  t.is(g.collect()[0]!.samples[0]!.value, NaN, 'a gauge may be set to NaN');
});

test('bad definitions are refused with what to fix', (t) => {
  const registry = new Registry();
  new Counter({ name: 'once_total', help: 'x', registers: [registry] });
  t.throws(() => new Gauge({ name: 'once_total', help: 'x', registers: [registry] }), { message: /metric once_total is registered twice in one registry/ });
  t.throws(() => new Counter({ name: '1st_total', help: 'x' }), { message: /metric name "1st_total" is not valid/ });
  t.throws(() => new Counter({ name: 'dash-ed', help: 'x' }), { message: /metric name "dash-ed" is not valid/ });
  t.throws(() => new Counter({ name: 'nohelp_total', help: '' }), { message: /metric nohelp_total has no help text/ });
  t.throws(() => new Counter({ name: 'l_total', help: 'x', labelNames: ['a-b'] }), { message: /label name "a-b" is not valid/ });
  t.throws(() => new Counter({ name: 'l_total', help: 'x', labelNames: ['__name'] }), { message: /label name "__name" is not valid/ });
  t.throws(() => new Counter({ name: 'l_total', help: 'x', labelNames: ['op', 'op'] }), { message: /a label name is given twice/ });
  t.throws(() => new Histogram({ name: 'h', help: 'x', labelNames: ['le'] }), { message: /label name le is reserved for the histogram/ });
  t.throws(() => new Histogram({ name: 'h', help: 'x', buckets: [1, 0.5] }), { message: /buckets \[1,0.5\] must be finite numbers in increasing order/ });
  t.throws(() => new Histogram({ name: 'h2', help: 'x', buckets: [1, 1], registers: [registry] }), { message: /increasing order/ });
  t.notRegex(registry.metrics(), /h2/, 'a refused histogram is not left in the registry');
  t.throws(() => new Histogram({ name: 'h', help: 'x' }).observe(NaN), { message: /histogram h: cannot observe NaN/ });
  const g = new Gauge({ name: 'g', help: 'x', labelNames: ['phase'] });
  t.throws(() => Reflect.apply(g.set, g, [{ phase: 'A' }]), { message: /gauge g: set\(labels\) without a value; give a number/ });
});

test("/metrics of the ops server: the registry text with the format's content type; a failing collect hook is a 500 with its message", async (t) => {
  const registry = new Registry();
  let fail = false;
  new Gauge({
    name: 'up_now',
    help: 'x',
    registers: [registry],
    collect() {
      if (fail) throw new Error('cannot read the state');
      this.set(1);
    },
  });
  const ops = await startOpsServer({ address: '127.0.0.1:0', registry, healthz: () => undefined, readyz: () => undefined });
  t.teardown(() => ops.close());
  const ok = await fetch(`http://127.0.0.1:${ops.port}/metrics`);
  t.is(ok.status, 200);
  t.is(ok.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  t.is(await ok.text(), '# HELP up_now x\n# TYPE up_now gauge\nup_now 1\n');
  fail = true;
  const bad = await fetch(`http://127.0.0.1:${ops.port}/metrics`);
  t.is(bad.status, 500);
  t.is(await bad.text(), 'cannot read the state\n');
});
