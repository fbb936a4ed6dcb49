// The admission policies of kustomize/policies match what the rest of the install configures (ADR 28):
// the identities exactly, by their ServiceAccounts in the install's namespace, and the agent's disk dir as
// the DaemonSet mounts it. The API server's behaviour is shown in test/integration/policies*.test.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { loadAll } from 'js-yaml';
import { DEFAULT_BY_ID_DIR, DEFAULT_DISK_DIR } from '../../api/constants.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

interface Policy {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: {
    paramKind?: { apiVersion: string; kind: string };
    matchConstraints: { resourceRules: { resources: string[] }[] };
    matchConditions?: { name: string; expression: string }[];
    variables?: { name: string; expression: string }[];
  };
}
interface Binding {
  kind: string;
  spec: {
    policyName: string;
    paramRef?: { namespace?: string; selector?: { matchLabels?: Record<string, string> }; parameterNotFoundAction?: string };
    matchResources?: { namespaceSelector?: { matchLabels?: Record<string, string> } };
  };
}
interface DaemonSet {
  kind: string;
  spec: {
    template: {
      spec: {
        containers: { name: string; args: string[]; volumeMounts: { name: string; mountPath: string }[] }[];
        volumes: { name: string; hostPath?: { path: string } }[];
      };
    };
  };
}
const docs = <T>(path: string) => loadAll(readFileSync(join(REPO_ROOT, path), 'utf8')) as T[];
const policyFiles = readdirSync(join(REPO_ROOT, 'kustomize/policies')).filter((f) => f.endsWith('_policy.yaml'));
const policies = policyFiles.flatMap((f) => docs<Policy>(`kustomize/policies/${f}`)).filter((o) => o.kind === 'ValidatingAdmissionPolicy');
const bindings = policyFiles.flatMap((f) => docs<Binding>(`kustomize/policies/${f}`)).filter((o) => o.kind === 'ValidatingAdmissionPolicyBinding');
const serviceAccounts = docs<{ metadata: { name: string; namespace: string; labels: Record<string, string> } }>('kustomize/rbac/service_accounts.yaml');

test("every policy names its ServiceAccount exactly: the binding's parameter, that account of the install's namespace", (t) => {
  t.is(policies.length, 9);
  // The wipe policy holds every identity alike (ADR 38): it names none.
  t.deepEqual(
    policies.filter((p) => !p.spec.matchConditions).map((p) => p.metadata.name),
    ['nodedisks-wipe.localtest.example.com'],
  );
  const exact = "'system:serviceaccount:' + params.metadata.namespace + ':' + params.metadata.name";
  for (const p of policies.filter((p) => p.spec.matchConditions)) {
    t.deepEqual(p.spec.paramKind, { apiVersion: 'v1', kind: 'ServiceAccount' }, p.metadata.name);
    const exprs = (p.spec.matchConditions ?? []).map((c) => c.expression);
    t.is(exprs.length, 1, p.metadata.name);
    t.true(exprs[0] === `request.userInfo.username == ${exact}` || exprs[0] === `request.userInfo.username != ${exact}`, `${p.metadata.name}: ${exprs[0]}`);
    t.notRegex(JSON.stringify(p), /username\.matches/, `${p.metadata.name} matches no identity by a pattern`);
    const binding = bindings.find((b) => b.spec.policyName === p.metadata.name);
    const ref = binding?.spec.paramRef;
    t.is(ref?.parameterNotFoundAction, 'Deny', `${p.metadata.name}: no ServiceAccount found refuses (fails closed)`);
    t.is(ref?.namespace, serviceAccounts[0]!.metadata.namespace, p.metadata.name);
    const selected = serviceAccounts.filter((sa) => Object.entries(ref?.selector?.matchLabels ?? {}).every(([k, v]) => sa.metadata.labels[k] === v));
    const governed = p.metadata.name.startsWith('nodedisks-agent')
      ? 'node-disks-agent'
      : p.metadata.name.startsWith('nodedisks-csi-controller') || p.metadata.name.startsWith('nodedisks-pv.')
        ? 'node-disks-csi-controller'
        : 'node-disks-operator';
    t.deepEqual(
      selected.map((sa) => sa.metadata.name),
      [governed],
      `${p.metadata.name} selects one ServiceAccount of kustomize/rbac`,
    );
    // A Lease policy's binding that found no parameter would refuse every Lease write it matches.
    const leases = p.spec.matchConstraints.resourceRules.some((r) => r.resources.includes('leases'));
    t.is(binding?.spec.matchResources?.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'], leases ? ref?.namespace : undefined, p.metadata.name);
  }
  // kustomize's `namespace:` rewrites the namespace fields, of this directory's overlays too.
  const config = readFileSync(join(REPO_ROOT, 'kustomize/policies/kustomizeconfig.yaml'), 'utf8');
  t.regex(config, /path: spec\/paramRef\/namespace/);
  t.regex(config, /path: spec\/matchResources\/namespaceSelector\/matchLabels\/kubernetes\.io\\\/metadata\.name/);
});

test("the agent policy's disk dir is the one the DaemonSet mounts and the agent writes into spec.path", (t) => {
  const agent = policies.find((p) => p.metadata.name === 'nodedisks-agent.localtest.example.com')!;
  const diskDir = agent.spec.variables?.find((v) => v.name === 'diskDir')?.expression;
  t.is(diskDir, `'${DEFAULT_DISK_DIR}'`);
  const ds = docs<DaemonSet>('kustomize/agent/daemonset.yaml').find((o) => o.kind === 'DaemonSet')!;
  const pod = ds.spec.template.spec;
  const container = pod.containers.find((c) => c.name === 'agent')!;
  t.true(container.args.includes(`--disk-dir=${DEFAULT_DISK_DIR}`));
  t.false(
    container.args.some((a) => a.startsWith('--host-disk-dir')),
    'spec.path is the --disk-dir: the host dir is mounted at the same path',
  );
  t.is(container.volumeMounts.find((v) => v.name === 'disks')?.mountPath, DEFAULT_DISK_DIR);
  // The CSI driver's node side opens the same images (spec.diskID names them), in the same dir.
  const csiNode = pod.containers.find((c) => c.name === 'csi-node')!;
  t.true(csiNode.args.includes(`--disk-dir=${DEFAULT_DISK_DIR}`));
  t.is(csiNode.volumeMounts.find((v) => v.name === 'disks')?.mountPath, DEFAULT_DISK_DIR);
  t.is(pod.volumes.find((v) => v.name === 'disks')?.hostPath?.path, DEFAULT_DISK_DIR);
  // No overlay of this repository moves the disk dir (it would have to set the policy's diskDir too).
  for (const overlay of readdirSync(join(REPO_ROOT, 'kustomize/overlays'))) {
    const text = readFileSync(join(REPO_ROOT, 'kustomize/overlays', overlay, 'kustomization.yaml'), 'utf8');
    t.notRegex(text, /disk-dir|node-disks-manager\/disks|name: disks/, overlay);
    // A by-id dir an overlay moves is moved in the agent's policy too (the local cluster's per-node dirs).
    const byId = /--by-id-dir=(\S+)/.exec(text)?.[1];
    if (byId !== undefined) t.regex(text, new RegExp(`path: /spec/variables/1/expression\\s+value: "'${byId}'"`), overlay);
  }
});

test("the agent policy's by-id dir is the one the drives component mounts, read-only, and the agent reads by default", (t) => {
  const agent = policies.find((p) => p.metadata.name === 'nodedisks-agent.localtest.example.com')!;
  t.is(agent.spec.variables?.find((v) => v.name === 'byIdDir')?.expression, `'${DEFAULT_BY_ID_DIR}'`);
  const component = readFileSync(join(REPO_ROOT, 'kustomize/components/nvme-drives/kustomization.yaml'), 'utf8');
  t.regex(component, new RegExp(`\\{name: by-id, mountPath: ${DEFAULT_BY_ID_DIR}, readOnly: true\\}`));
  t.regex(component, new RegExp(`hostPath: \\{path: ${DEFAULT_BY_ID_DIR}, type: Directory\\}`));
  t.notRegex(component, /--by-id-dir/, 'the agent reads the default dir, mounted at the same path');
});
