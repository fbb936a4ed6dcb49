import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { allPanels, formatValue, gnuplotScript, legend, substitute, type Dashboard } from '../../hack/pictures/dashboard-plot.ts';

test('template variables are replaced in both spellings and unknown ones are left as written', (t) => {
  t.is(substitute('rate(x{node=~"$node"}[$__rate_interval]) + ${node}', { node: '.*', __rate_interval: '30s' }), 'rate(x{node=~".*"}[30s]) + .*');
  t.is(substitute('x{a="$other"}', { node: '.*' }), 'x{a="$other"}');
});

test("a legend follows Grafana's {{label}} format, and without one names the labels", (t) => {
  t.is(legend('{{node}} {{phase}}', { node: 'm02', phase: 'Available' }), 'm02 Available');
  t.is(legend(undefined, { __name__: 'x', node: 'm02' }), 'node=m02');
  t.is(legend(undefined, {}), 'value');
});

test('values are shown in their unit', (t) => {
  t.is(formatValue(201326592, 'bytes'), '192 MiB');
  t.is(formatValue(1536, 'bytes'), '1.5 KiB');
  t.is(formatValue(0.125, 's'), '0.13 s');
  t.is(formatValue(3, undefined), '3');
});

test('every panel, rows included, is drawn at its grid position, a stat panel with its last value and a panel without data says so', (t) => {
  const dash: Dashboard = {
    title: 'T',
    panels: [
      { id: 1, type: 'row', title: 'Row', gridPos: { x: 0, y: 0, w: 24, h: 1 }, panels: [] },
      { id: 2, type: 'stat', title: 'Free', gridPos: { x: 0, y: 1, w: 12, h: 4 }, targets: [{ expr: 'a' }], fieldConfig: { defaults: { unit: 'bytes' } } },
      { id: 3, type: 'timeseries', title: 'Lines', gridPos: { x: 12, y: 1, w: 12, h: 4 }, targets: [{ expr: 'b', legendFormat: '{{node}}' }] },
      { id: 4, type: 'timeseries', title: 'Empty', gridPos: { x: 0, y: 5, w: 24, h: 5 }, targets: [{ expr: 'c' }] },
    ],
  };
  t.is(allPanels(dash).length, 4);
  const data = new Map([
    [
      2,
      [
        [
          {
            metric: {},
            values: [
              [100, '1'],
              [110, '2048'],
            ] as [number, string][],
          },
        ],
      ],
    ],
    [3, [[{ metric: { node: 'm02' }, values: [[100, '1']] as [number, string][] }]]],
  ]);
  const script = gnuplotScript(dash, data, { start: 100, end: 400, columnPx: 50, rowPx: 30 });
  // 24 columns of 50 px; 10 grid rows and the title row of 30 px.
  t.regex(script, /set terminal svg size 1200,330 /);
  t.regex(script, /set label 1 "2 KiB"/);
  t.regex(script, /\$D0 using 1:2 with lines lw 2 title "m02"/);
  t.regex(script, /set label 1 "no data"/);
  // The stat panel sits at the left of the second grid row: x 0, its top 1 + 1 rows down, 4 rows high.
  t.regex(script, /set origin 0\.0000,0\.4545\nset size 0\.5000,0\.3636/);
  t.regex(script, /set origin 0\.5000,0\.4545/);
});

test("the README's dashboard picture shows every panel of the dashboard as it is now (npm run pictures:dashboard draws it again)", async (t) => {
  const dash = JSON.parse(await readFile(join(REPO_ROOT, 'kustomize/components/grafana-dashboard/nodedisks-dashboard.json'), 'utf8')) as Dashboard;
  const svg = await readFile(join(REPO_ROOT, 'docs/pictures/dashboard.svg'), 'utf8');
  const drawn = new Set([...svg.matchAll(/<tspan[^>]*>([^<]*)<\/tspan>/g)].map((m) => m[1]));
  const missing = allPanels(dash)
    .map((p) => p.title ?? '')
    .filter((title) => !drawn.has(title.replace(/&/g, '&amp;').replace(/</g, '&lt;')));
  t.deepEqual(missing, [], 'panels missing from docs/pictures/dashboard.svg: run npm run pictures:dashboard');
  t.true((await readFile(join(REPO_ROOT, 'README.md'), 'utf8')).includes('(docs/pictures/dashboard.svg)'));
});
