// The Grafana dashboard (kustomize/components/grafana-dashboard/nodedisks-dashboard.json, generated from
// hack/dashboards/nodedisks.ts) judged without Grafana: the file is what its source generates, panel ids
// are unique, every panel has queries with an expression and asks the data source of the `datasource`
// variable, no two panels overlap on the grid, every metric a query reads is one the agent or the
// controller exports, and every query parses as PromQL (by the real promtool, as recording rules). Each
// check is also shown red on a broken copy. Whether each query returns data from a real Prometheus is the
// Prometheus test's job.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { dump } from 'js-yaml';
import { concreteExpr, DASHBOARD_FILE, dashboardJson } from '../../hack/dashboards/nodedisks.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { ensurePromtool, runPromtool } from '../../hack/promtool/promtool.ts';
import { exportedMetricNames, metricNames } from '../harness/promql.ts';

interface GridPos {
  x: number;
  y: number;
  w: number;
  h: number;
}
interface Target {
  refId?: string;
  expr?: string;
  datasource?: { type?: string; uid?: string };
}
interface Panel {
  id?: number;
  type: string;
  title?: string;
  gridPos?: GridPos;
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
  panels?: Panel[];
  collapsed?: boolean;
}
interface Dashboard {
  uid?: string;
  title?: string;
  panels?: Panel[];
  templating?: { list?: { type: string; name: string; query?: unknown }[] };
}

const text = readFileSync(join(REPO_ROOT, DASHBOARD_FILE), 'utf8');
const dashboard = JSON.parse(text) as Dashboard;

/** Every panel, those inside a collapsed row included. */
const allPanels = (d: Dashboard): Panel[] => (d.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
/** The panels that show data (rows only group them). */
const dataPanels = (d: Dashboard): Panel[] => allPanels(d).filter((p) => p.type !== 'row');
const name = (p: Panel) => `panel ${p.id} (${p.title})`;
const copy = (): Dashboard => structuredClone(dashboard);

function idProblems(d: Dashboard): string[] {
  const seen = new Set<number>();
  const problems: string[] = [];
  for (const p of allPanels(d)) {
    if (typeof p.id !== 'number') problems.push(`${name(p)}: no id`);
    else if (seen.has(p.id)) problems.push(`${name(p)}: id ${p.id} used twice`);
    else seen.add(p.id);
  }
  return problems;
}

const DATASOURCE_UID = '${datasource}';
function targetProblems(d: Dashboard): string[] {
  const problems: string[] = [];
  const variable = d.templating?.list?.find((v) => v.name === 'datasource');
  if (variable?.type !== 'datasource' || variable.query !== 'prometheus') problems.push('no `datasource` variable of Prometheus data sources');
  for (const p of dataPanels(d)) {
    if (p.datasource?.uid !== DATASOURCE_UID) problems.push(`${name(p)}: data source ${JSON.stringify(p.datasource)}, not the variable`);
    if (!p.targets?.length) problems.push(`${name(p)}: no targets`);
    const refIds = new Set<string>();
    for (const q of p.targets ?? []) {
      if (!q.expr?.trim()) problems.push(`${name(p)}: a target without expr`);
      if (q.datasource?.uid !== DATASOURCE_UID) problems.push(`${name(p)}: target ${q.refId} data source ${JSON.stringify(q.datasource)}, not the variable`);
      if (!q.refId || refIds.has(q.refId)) problems.push(`${name(p)}: refId ${q.refId} missing or used twice`);
      refIds.add(q.refId ?? '');
    }
  }
  return problems;
}

function gridProblems(d: Dashboard): string[] {
  const problems: string[] = [];
  // A collapsed row's panels are laid out when it opens: only the panels on the grid now can overlap.
  const placed = d.panels ?? [];
  for (const p of placed) {
    const g = p.gridPos;
    if (!g) problems.push(`${name(p)}: no gridPos`);
    else if (g.x < 0 || g.y < 0 || g.w <= 0 || g.h <= 0 || g.x + g.w > 24) problems.push(`${name(p)}: gridPos ${JSON.stringify(g)} off the 24-column grid`);
  }
  for (const [i, a] of placed.entries()) {
    for (const b of placed.slice(i + 1)) {
      const [g, h] = [a.gridPos, b.gridPos];
      if (g && h && g.x < h.x + h.w && h.x < g.x + g.w && g.y < h.y + h.h && h.y < g.y + g.h) problems.push(`${name(a)} and ${name(b)} overlap`);
    }
  }
  return problems;
}

async function metricProblems(d: Dashboard): Promise<string[]> {
  const exported = await exportedMetricNames();
  const problems: string[] = [];
  for (const p of dataPanels(d)) {
    for (const q of p.targets ?? []) {
      const used = metricNames(concreteExpr(q.expr ?? ''));
      if (used.length === 0) problems.push(`${name(p)} ${q.refId}: reads no metric`);
      for (const m of used) if (!exported.has(m)) problems.push(`${name(p)} ${q.refId} reads ${m}, which none of the agent, the controller and the CSI driver exports`);
    }
  }
  return problems;
}

let promtool = '';
let dir = '';
test.before(async () => {
  promtool = await ensurePromtool();
  dir = await mkdtemp(join(tmpdir(), 'nodedisks-dashboard-'));
});
test.after.always(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** promtool's verdict on every query of `d`, each written as a recording rule named for its panel and refId. */
async function promtoolCheck(d: Dashboard, file: string): Promise<{ code: number; output: string; rules: number }> {
  const rules = dataPanels(d).flatMap((p) => (p.targets ?? []).map((q) => ({ record: `dashboard:panel_${p.id}_${q.refId}`, expr: concreteExpr(q.expr ?? '') })));
  await writeFile(join(dir, file), dump({ groups: [{ name: 'dashboard', rules }] }));
  const r = await runPromtool(promtool, ['check', 'rules', file], dir);
  return { code: r.code, output: r.stdout + r.stderr, rules: rules.length };
}

test('the committed JSON is what hack/dashboards/nodedisks.ts generates (npm run generate writes it, npm test checks it)', (t) => {
  t.is(text, dashboardJson());
});

test('the dashboard has the panels the issue asks for', (t) => {
  const titles = dataPanels(dashboard).map((p) => p.title);
  for (const want of [
    'Disks by phase per node',
    'Reservations by kind of owner',
    'Free and reserved capacity per node',
    'Agent heartbeat age',
    'Work queue depth',
    'Reconcile latency',
    'Controller API errors',
    'Agent API errors',
  ]) {
    t.true(titles.includes(want), want);
  }
  t.is(dashboard.uid, 'nodedisks');
});

test('panel ids are unique; a missing or repeated id is found', (t) => {
  t.deepEqual(idProblems(dashboard), []);
  const d = copy();
  d.panels![3]!.id = d.panels![2]!.id!;
  delete d.panels![4]!.id;
  t.deepEqual(idProblems(d), [`panel 3 (${d.panels![3]!.title}): id 3 used twice`, `panel undefined (${d.panels![4]!.title}): no id`]);
});

test('every panel has targets with an expression, all asking the `datasource` variable; a fixed data source or an empty target is found', (t) => {
  t.deepEqual(targetProblems(dashboard), []);
  t.true(dataPanels(dashboard).length >= 10);
  const d = copy();
  const [a, b, c] = dataPanels(d);
  a!.datasource = { type: 'prometheus', uid: 'P1809F7CD0C75ACF3' };
  b!.targets = [];
  c!.targets![0]!.expr = ' ';
  const problems = targetProblems(d);
  t.true(problems.some((p) => p.startsWith(`${name(a!)}: data source {"type":"prometheus","uid":"P1809F7CD0C75ACF3"}`)));
  t.true(problems.includes(`${name(b!)}: no targets`));
  t.true(problems.includes(`${name(c!)}: a target without expr`));
  d.templating!.list = d.templating!.list!.filter((v) => v.name !== 'datasource');
  t.true(targetProblems(d).includes('no `datasource` variable of Prometheus data sources'));
});

test('no two panels overlap on the 24-column grid; an overlap or a panel off the grid is found', (t) => {
  t.deepEqual(gridProblems(dashboard), []);
  const d = copy();
  const [a, b] = dataPanels(d);
  b!.gridPos = { ...a!.gridPos!, x: a!.gridPos!.x + 1 };
  t.true(gridProblems(d).includes(`${name(a!)} and ${name(b!)} overlap`));
  const e = copy();
  dataPanels(e)[0]!.gridPos!.x = 22;
  t.true(gridProblems(e).some((p) => p.endsWith('off the 24-column grid')));
});

test('every metric a query reads is one the agent, the controller or the CSI driver exports; a typo is found', async (t) => {
  t.deepEqual(await metricProblems(dashboard), []);
  const d = copy();
  const p = dataPanels(d)[0]!;
  p.targets![0]!.expr = p.targets![0]!.expr!.replace('nodedisks_controller_nodedisks', 'nodedisks_controller_nodedisk');
  t.deepEqual(await metricProblems(d), [`${name(p)} A reads nodedisks_controller_nodedisk, which none of the agent, the controller and the CSI driver exports`]);
});

test('template variables are replaced in a plain PromQL query; anything else with a $ is left for promtool to refuse', (t) => {
  t.is(concreteExpr('rate(x{node=~"$node"}[$__rate_interval])'), 'rate(x{node=~".*"}[5m])');
  t.is(concreteExpr('x{node=~"${node}"}'), 'x{node=~".*"}');
  t.is(concreteExpr('x[$unknown]'), 'x[$unknown]');
});

test('every query parses as PromQL: promtool check rules takes them all as recording rules, and refuses a broken one naming it', async (t) => {
  const ok = await promtoolCheck(dashboard, 'dashboard.yaml');
  t.is(ok.code, 0, ok.output);
  t.regex(ok.output, new RegExp(`SUCCESS: ${ok.rules} rules found`));
  t.true(ok.rules >= 12);
  const d = copy();
  const p = dataPanels(d)[1]!;
  p.targets![0]!.expr = 'sum by (node) (rate(nodedisks_agent_api_errors_total[$__rate_interval])';
  const broken = await promtoolCheck(d, 'broken.yaml');
  t.not(broken.code, 0);
  t.regex(broken.output, new RegExp(`"dashboard:panel_${p.id}_A": could not parse expression: .*unclosed left parenthesis`));
});
