// Copies the parts of the install that the chart takes verbatim from kustomize/ into
// charts/node-disks-manager/files/ (`npm run generate`): the CRD (itself generated from api/), the
// admission policies and the RBAC. The chart's templates read them with .Files.Get and add only Helm's
// labels, the keep annotation, the namespace and the disk dir (docs/adr/0031-helm-chart.md). `--check` exits non-zero when a copy
// differs, naming the fix.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../lib/paths.ts';

export const CHART_DIR = 'charts/node-disks-manager';

/** Each copy: its path in the chart, from its source in kustomize/. */
export const CHART_FILES: Record<string, string> = {
  'files/crd.yaml': 'kustomize/crd/bases/localtest.example.com_nodedisks.yaml',
  'files/policies/agent_policy.yaml': 'kustomize/policies/agent_policy.yaml',
  'files/policies/agent_heartbeat_policy.yaml': 'kustomize/policies/agent_heartbeat_policy.yaml',
  'files/policies/controller_policy.yaml': 'kustomize/policies/controller_policy.yaml',
  'files/rbac/service_accounts.yaml': 'kustomize/rbac/service_accounts.yaml',
  'files/rbac/agent_role.yaml': 'kustomize/rbac/agent_role.yaml',
  'files/rbac/controller_role.yaml': 'kustomize/rbac/controller_role.yaml',
  'files/rbac/user_roles.yaml': 'kustomize/rbac/user_roles.yaml',
};

function header(source: string): string {
  return `# Generated from ${source} by npm run generate: do not edit.\n`;
}

if (import.meta.main) {
  const check = process.argv.includes('--check');
  const stale: string[] = [];
  for (const [copy, source] of Object.entries(CHART_FILES)) {
    const want = header(source) + readFileSync(join(REPO_ROOT, source), 'utf8');
    const path = join(REPO_ROOT, CHART_DIR, copy);
    if (check) {
      let have = '';
      try {
        have = readFileSync(path, 'utf8');
      } catch {
        // missing: reported below like any other difference
      }
      if (have !== want) stale.push(`${CHART_DIR}/${copy}`);
    } else {
      writeFileSync(path, want);
    }
  }
  if (stale.length > 0) {
    console.error(`${stale.join(', ')} out of date with kustomize/; run: npm run generate`);
    process.exit(1);
  }
}
