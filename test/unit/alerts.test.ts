// The alerts (kustomize/components/prometheus-operator/prometheusrule.yaml, one source with the chart's
// prometheusRule) judged by the real promtool (Debian's prometheus package, hack/promtool): the rules are
// valid, each alert fires and stays quiet where test/fixtures/alerts.test.yaml says, each has a summary,
// a description, a severity that pages or tickets, a real `for:` and a runbook section in
// docs/runbooks.md, and each metric its expression reads is one the agent or the controller exports.
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { dump, load } from 'js-yaml';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { ensurePromtool, runPromtool } from '../../hack/promtool/promtool.ts';
import { exportedMetricNames, metricNames } from '../harness/promql.ts';

const RULE_FILE = 'kustomize/components/prometheus-operator/prometheusrule.yaml';
const FIXTURE = join(REPO_ROOT, 'test/fixtures/alerts.test.yaml');

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
const groups = (load(readFileSync(join(REPO_ROOT, RULE_FILE), 'utf8')) as { spec: { groups: { name: string; rules: Rule[] }[] } }).spec.groups;
const alerts = groups.flatMap((g) => g.rules).filter((r): r is Rule & { alert: string } => r.alert !== undefined);

let promtool = '';
let dir = '';
test.before(async () => {
  promtool = await ensurePromtool();
  dir = await mkdtemp(join(tmpdir(), 'nodedisks-alerts-'));
  // promtool reads plain rule files: the PrometheusRule's spec is one.
  await writeFile(join(dir, 'rules.yaml'), dump({ groups }));
  await copyFile(FIXTURE, join(dir, 'alerts.test.yaml'));
});
test.after.always(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('promtool check rules finds the rule file valid, every alert in it', async (t) => {
  const r = await runPromtool(promtool, ['check', 'rules', 'rules.yaml'], dir);
  t.is(r.code, 0, r.stderr + r.stdout);
  t.regex(r.stdout, new RegExp(`SUCCESS: ${alerts.length} rules found`));
  // The judge can tell us we're wrong: a typo'd function and a missing `for` unit are refused.
  await writeFile(join(dir, 'broken.yaml'), dump({ groups: [{ name: 'x', rules: [{ alert: 'X', expr: 'rte(up[5m]) > 0', for: '5' }] }] }));
  const broken = await runPromtool(promtool, ['check', 'rules', 'broken.yaml'], dir);
  t.not(broken.code, 0);
  t.regex(broken.stderr + broken.stdout, /rte|unknown function|not a valid duration/);
});

test('promtool test rules: every alert fires where the fixture says and stays quiet where it says', async (t) => {
  const r = await runPromtool(promtool, ['test', 'rules', 'alerts.test.yaml'], dir);
  t.is(r.code, 0, r.stdout + r.stderr);
  t.regex(r.stdout, /SUCCESS/);
  // Both ways for each alert: at least one check expects it firing, and at least one expects none.
  const fixture = load(readFileSync(FIXTURE, 'utf8')) as { tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[] };
  const checks = fixture.tests.flatMap((x) => x.alert_rule_test ?? []);
  for (const a of alerts) {
    t.true(
      checks.some((c) => c.alertname === a.alert && c.exp_alerts.length > 0),
      `${a.alert}: no test expects it to fire`,
    );
    t.true(
      checks.some((c) => c.alertname === a.alert && c.exp_alerts.length === 0),
      `${a.alert}: no test expects it quiet`,
    );
  }
  t.deepEqual([...new Set(checks.map((c) => c.alertname))].sort(), alerts.map((a) => a.alert).sort(), 'the fixture tests an alert that is not in the rule file');
});

/** GitHub's anchor of a Markdown heading. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
const runbook = readFileSync(join(REPO_ROOT, 'docs/runbooks.md'), 'utf8');
const runbookAnchors = new Set([...runbook.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchor(m[1]!)));
const DURATION = /^(\d+(ms|s|m|h|d|w|y))+$/;
const minutes = (d: string) =>
  [...d.matchAll(/(\d+)(ms|s|m|h|d|w|y)/g)].reduce(
    (sum, [, n, u]) => sum + Number(n) * ({ ms: 1 / 60000, s: 1 / 60, m: 1, h: 60, d: 1440, w: 10080, y: 525600 } as Record<string, number>)[u!]!,
    0,
  );

test('every alert has a summary, a description, a severity (critical pages, warning tickets), a real for: and a runbook section', (t) => {
  t.true(alerts.length >= 10);
  for (const a of alerts) {
    t.truthy(a.annotations?.summary?.trim(), `${a.alert}: no summary`);
    t.truthy(a.annotations?.description?.trim(), `${a.alert}: no description`);
    t.true(['critical', 'warning'].includes(a.labels?.severity ?? ''), `${a.alert}: severity ${a.labels?.severity}`);
    t.regex(a.for ?? '', DURATION, `${a.alert}: no for:`);
    t.true(minutes(a.for ?? '0m') >= 5, `${a.alert}: for: ${a.for} would page on a blip`);
    const url = a.annotations?.runbook_url ?? '';
    const m = /^https:\/\/\S+\/docs\/runbooks\.md#([a-z0-9-]+)$/.exec(url);
    t.truthy(m, `${a.alert}: runbook_url ${url}`);
    t.is(m?.[1], a.alert.toLowerCase(), `${a.alert}: its runbook anchor is not its own name`);
    t.true(runbookAnchors.has(m?.[1] ?? ''), `${a.alert}: docs/runbooks.md has no section #${m?.[1]}`);
  }
  // One section per alert, and no section for an alert that is gone.
  const sections = [...runbook.matchAll(/^## (NodeDisks\w+)$/gm)].map((x) => x[1]);
  t.deepEqual(sections.sort(), alerts.map((a) => a.alert).sort());
});

test('every metric an alert expression reads is one the agent or the controller exports', async (t) => {
  const names = await exportedMetricNames();
  // The reader finds a typo'd name and skips functions, keywords, label names and values.
  t.deepEqual(metricNames('sum by (node, pod) (rate(nodedisks_agent_typo_total{op="up"}[5m])) > 0 or vector(0) and on (x) up'), ['nodedisks_agent_typo_total', 'up']);
  t.false(names.has('nodedisks_agent_typo_total'));
  for (const a of alerts) {
    const used = metricNames(a.expr);
    t.true(used.length > 0, `${a.alert}: reads no metric`);
    for (const n of used) t.true(names.has(n), `${a.alert} reads ${n}, which neither the agent nor the controller exports`);
  }
});
