// Our ServiceMonitor, PodMonitor and PrometheusRule against the Prometheus Operator's real CRD schemas
// (its pinned Go module, hack/promop) on a real API server: what kustomize/overlays/prometheus-operator
// builds and what the chart renders with ci/everything-values.yaml pass a server-side dry run, and the
// schemas do refuse a malformed object (so passing means something).
import { join } from 'node:path';
import test from 'ava';
import { loadAll } from 'js-yaml';
import { ensureHelm, helm } from '../../hack/helm/helm.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { prometheusOperatorCRDs } from '../../hack/promop/crds.ts';
import { useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const KINDS = ['servicemonitors', 'podmonitors', 'prometheusrules'];

type Obj = { kind: string; apiVersion: string; metadata: { name: string; namespace?: string } } & Record<string, unknown>;
const monitoring = (yaml: string) => (loadAll(yaml) as (Obj | null)[]).filter((o): o is Obj => o?.apiVersion.startsWith('monitoring.coreos.com/') === true);

async function kubectl(args: string[], stdin?: string): Promise<string> {
  const cp = controlPlane();
  return await cp.kubectl(cp.admin(), args, stdin);
}
const dryRun = (o: Obj) => kubectl(['apply', '--server-side', '--dry-run=server', '--field-manager=nodedisks-test', '-f', '-'], JSON.stringify(o));

let helmBin = '';
test.serial.before(async (t) => {
  t.timeout(20 * 60_000, 'fetching the CRDs and building helm took more than 20 minutes');
  const [crds, bin] = await Promise.all([prometheusOperatorCRDs(KINDS), ensureHelm()]);
  helmBin = bin;
  await kubectl(['apply', '--server-side', ...crds.flatMap((f) => ['-f', f])]);
  await kubectl(['wait', '--for=condition=Established', '--timeout=60s', ...KINDS.map((k) => `crd/${k}.monitoring.coreos.com`)]);
});

/** The Prometheus Operator's objects of an install: PodMonitors for the agent pods (agent and csi-node) and the CSI controller's pods, the alerts, the controller's Service. */
const MONITORING_KINDS = ['PodMonitor', 'PodMonitor', 'PrometheusRule', 'ServiceMonitor'];

test.serial("kustomize/overlays/prometheus-operator: its ServiceMonitor, PodMonitors and PrometheusRule pass the CRDs' schemas (server-side dry run)", async (t) => {
  const objs = monitoring(await kubectl(['kustomize', join(REPO_ROOT, 'kustomize/overlays/prometheus-operator')]));
  t.deepEqual(objs.map((o) => o.kind).sort(), MONITORING_KINDS);
  for (const o of objs) t.regex(await dryRun(o), /serverside-applied \(server dry run\)/, `${o.kind}/${o.metadata.name}`);
});

test.serial("the chart with ci/everything-values.yaml: its ServiceMonitor, PodMonitors and PrometheusRule pass the CRDs' schemas", async (t) => {
  const rendered = await helm(helmBin, [
    'template',
    'node-disks-manager',
    join(REPO_ROOT, 'charts/node-disks-manager'),
    '-n',
    'node-disks-system',
    '-f',
    join(REPO_ROOT, 'charts/node-disks-manager/ci/everything-values.yaml'),
  ]);
  const objs = monitoring(rendered);
  t.deepEqual(objs.map((o) => o.kind).sort(), MONITORING_KINDS);
  // Those values install into a namespace of their own.
  for (const ns of new Set(objs.map((o) => o.metadata.namespace!))) {
    await kubectl(['create', 'namespace', ns, '--dry-run=client', '-o', 'yaml']).then((y) => kubectl(['apply', '-f', '-'], y));
  }
  for (const o of objs) t.regex(await dryRun(o), /serverside-applied \(server dry run\)/, `${o.kind}/${o.metadata.name}`);
});

test.serial('the CRDs refuse a malformed PodMonitor and PrometheusRule, naming the field', async (t) => {
  const objs = monitoring(await kubectl(['kustomize', join(REPO_ROOT, 'kustomize/overlays/prometheus-operator')]));
  const podMonitor = structuredClone(objs.find((o) => o.kind === 'PodMonitor')!) as Obj & { spec: { podMetricsEndpoints: Record<string, unknown>[] } };
  podMonitor.spec.podMetricsEndpoints[0]!.port = 8080; // a port name is a string
  const e1 = await t.throwsAsync(dryRun(podMonitor));
  t.regex(e1!.message, /spec\.podMetricsEndpoints\[0\]\.port/);
  const rule = structuredClone(objs.find((o) => o.kind === 'PrometheusRule')!) as Obj & { spec: { groups: { rules: Record<string, unknown>[] }[] } };
  rule.spec.groups[0]!.rules[0]!.for = '5 minutes';
  const e2 = await t.throwsAsync(dryRun(rule));
  t.regex(e2!.message, /spec\.groups\[0\]\.rules\[0\]\.for/);
});
