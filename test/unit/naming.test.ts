// One name for each program, everywhere a cluster or a person sees it (the rule is in docs/design.md, Names):
// cluster-visible names are node-disks-<role>, role `operator` for the controller program (source in
// controller/) and `agent` for the node agent: Deployment/DaemonSet, ServiceAccount, ClusterRole(Binding),
// Role(Binding), Lease, field manager, image, container, component label, bundle.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { loadAll } from 'js-yaml';
import { FIELD_MANAGER } from '../../api/constants.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

interface Obj {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  roleRef?: { name: string };
  subjects?: { kind: string; name: string }[];
  spec?: { template?: { metadata?: { labels?: Record<string, string> }; spec: { serviceAccountName: string; containers: { name: string; image: string }[] } } };
}
const docs = (path: string) => loadAll(readFileSync(join(REPO_ROOT, path), 'utf8')) as Obj[];

const rbac = [...docs('kustomize/rbac/service_accounts.yaml'), ...docs('kustomize/rbac/controller_role.yaml'), ...docs('kustomize/rbac/agent_role.yaml')];
const deployment = docs('kustomize/controller/deployment.yaml').find((o) => o.kind === 'Deployment')!;
const daemonset = docs('kustomize/agent/daemonset.yaml').find((o) => o.kind === 'DaemonSet')!;

for (const [role, workload] of [
  ['operator', deployment],
  ['agent', daemonset],
] as const) {
  const name = `node-disks-${role}`;
  test(`the ${role}: workload, ServiceAccount, container, image and component label are all ${name}`, (t) => {
    t.is(workload.metadata.name, name);
    const pod = workload.spec!.template!;
    t.is(pod.spec.serviceAccountName, name);
    t.is(pod.spec.containers[0]!.name, role);
    t.regex(pod.spec.containers[0]!.image, new RegExp(`^${name}:`));
    t.is(pod.metadata!.labels!['app.kubernetes.io/component'], role);
    const sa = rbac.find((o) => o.kind === 'ServiceAccount' && o.metadata.name === name);
    t.truthy(sa, `ServiceAccount ${name}`);
    t.is(sa!.metadata.labels!['app.kubernetes.io/component'], role);
  });
}

test('every role and binding of a program is named after it and binds its ServiceAccount', (t) => {
  for (const o of rbac.filter((x) => x.kind !== 'ServiceAccount')) {
    t.regex(o.metadata.name, /^node-disks-(operator|agent)(-[a-z-]+)?$/, o.metadata.name);
    const role = /^node-disks-(operator|agent)/.exec(o.metadata.name)![1];
    if (o.roleRef) t.is(o.roleRef.name, o.metadata.name);
    for (const s of o.subjects ?? []) t.deepEqual(s, { kind: 'ServiceAccount', name: `node-disks-${role}`, namespace: 'node-disks-system' } as never);
  }
});

test('the admission policy, the field managers, the Lease and the bundles use the same names', (t) => {
  // The policy's identity is the ServiceAccount its binding selects: the operator's, by its component label.
  t.regex(
    readFileSync(join(REPO_ROOT, 'kustomize/policies/controller_policy.yaml'), 'utf8'),
    /matchLabels:\n\s+app\.kubernetes\.io\/part-of: nodedisks\n\s+app\.kubernetes\.io\/component: operator\n/,
  );
  t.regex(readFileSync(join(REPO_ROOT, 'kustomize/rbac/service_accounts.yaml'), 'utf8'), /name: node-disks-operator\n[\s\S]*?app\.kubernetes\.io\/component: operator\n/);
  t.is(FIELD_MANAGER.controller, 'node-disks-operator');
  t.is(FIELD_MANAGER.agent, 'node-disks-agent');
  t.regex(readFileSync(join(REPO_ROOT, 'controller/config.ts'), 'utf8'), /'leader-election-id'.*default: 'node-disks-operator\.localtest\.example\.com'/);
  const build = readFileSync(join(REPO_ROOT, 'hack/build.ts'), 'utf8');
  t.regex(build, /entry: 'controller\/main\.ts', dir: 'dist\/controller', name: 'node-disks-operator'/);
  t.regex(readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8'), /AS operator\n[\s\S]*node-disks-operator\.mjs/);
});

test('no cluster-visible name says node-disks-controller', (t) => {
  for (const path of [
    'kustomize/rbac/service_accounts.yaml',
    'kustomize/rbac/controller_role.yaml',
    'kustomize/controller/deployment.yaml',
    'kustomize/policies/controller_policy.yaml',
    'Makefile',
    'README.md',
  ]) {
    t.notRegex(readFileSync(join(REPO_ROOT, path), 'utf8'), /node-disks-controller/, path);
  }
});
