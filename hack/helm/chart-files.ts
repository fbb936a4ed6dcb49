// Copies the parts of the install that the chart takes verbatim from kustomize/ into
// charts/node-disks-manager/files/ (`npm run generate`): the two CRDs (themselves generated from api/), the
// admission policies, the RBAC, the CSIDriver, the alerts (a PrometheusRule) and the Grafana dashboard
// (itself generated from hack/dashboards/). The chart's templates read them with .Files.Get and add only Helm's labels, the
// keep annotation, the namespace and the disk dir (docs/adr/0031-helm-chart.md). `--check` exits non-zero
// when a copy differs, naming the fix.
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { staleFiles, writeFiles } from '../lib/generated-files.ts';
import { REPO_ROOT } from '../lib/paths.ts';

export const CHART_DIR = 'charts/node-disks-manager';

/** The resources a kustomization.yaml lists, in its order. */
function resources(dir: string): string[] {
  const k = load(readFileSync(join(REPO_ROOT, dir, 'kustomization.yaml'), 'utf8')) as { resources?: string[] };
  return k.resources ?? [];
}

/**
 * Each copy: its path in the chart, from its source in kustomize/. The policies and the RBAC are whatever
 * their kustomization.yaml lists, so a file added there reaches the chart (and the drift test) by itself.
 */
export const CHART_FILES: Record<string, string> = {
  'files/crd.yaml': 'kustomize/crd/bases/localtest.example.com_nodedisks.yaml',
  'files/crd-claims.yaml': 'kustomize/crd/bases/localtest.example.com_nodediskclaims.yaml',
  // The CSIDriver is the same in every install (its name is the driver's); the StorageClass and the
  // Deployment are templates, since values change them.
  'files/csi/csidriver.yaml': 'kustomize/csi/csidriver.yaml',
  ...Object.fromEntries(resources('kustomize/policies').map((f) => [`files/policies/${f}`, `kustomize/policies/${f}`])),
  ...Object.fromEntries(resources('kustomize/rbac').map((f) => [`files/rbac/${f}`, `kustomize/rbac/${f}`])),
  'files/monitoring/prometheusrule.yaml': 'kustomize/components/prometheus-operator/prometheusrule.yaml',
  'files/dashboards/nodedisks-dashboard.json': 'kustomize/components/grafana-dashboard/nodedisks-dashboard.json',
};

/** The "do not edit" line of a YAML copy; JSON has no comments (the dashboard's description says it instead). */
function header(source: string): string {
  return source.endsWith('.json') ? '' : `# Generated from ${source} by npm run generate: do not edit.\n`;
}

if (import.meta.main) {
  const check = process.argv.includes('--check');
  const copies = Object.entries(CHART_FILES).map(([copy, source]) => ({ path: `${CHART_DIR}/${copy}`, content: header(source) + readFileSync(join(REPO_ROOT, source), 'utf8') }));
  const stale = check ? staleFiles(copies) : [];
  if (!check) writeFiles(copies);
  // A copy whose source is gone from kustomize/ would still be installed by the chart.
  for (const dir of ['files/policies', 'files/rbac']) {
    for (const f of readdirSync(join(REPO_ROOT, CHART_DIR, dir))) {
      if (`${dir}/${f}` in CHART_FILES) continue;
      if (check) stale.push(`${CHART_DIR}/${dir}/${f}`);
      else rmSync(join(REPO_ROOT, CHART_DIR, dir, f));
    }
  }
  if (stale.length > 0) {
    console.error(`${stale.join(', ')} out of date with kustomize/; run: npm run generate`);
    process.exit(1);
  }
}
