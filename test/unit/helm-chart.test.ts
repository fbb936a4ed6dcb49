// The Helm chart (charts/node-disks-manager) is the Kustomize install in another form: rendered with its
// default values by the real helm (built from the pinned module, hack/helm/helm.ts) it has the same objects
// with the same specs as `kubectl kustomize kustomize/default`, Helm's standard labels aside; it passes
// `helm lint --strict`, renders every values file under ci/, and its schema refuses unknown or mistyped
// keys by name. Installing it on a real API server is test/integration/helm-chart.test.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import test from 'ava';
import { loadAll } from 'js-yaml';
import { ensureBinaries } from '../../hack/controlplane/binaries.ts';
import { runKubectl } from '../../hack/controlplane/controlplane.ts';
import { ensureHelm, helm, runHelm } from '../../hack/helm/helm.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { SEED_IMAGE_SETS } from '../fixtures/helm.ts';

const CHART = join(REPO_ROOT, 'charts/node-disks-manager');
/** The labels Helm charts put on every object; the drift check leaves them out, and nothing else. */
const HELM_LABELS = ['helm.sh/chart', 'app.kubernetes.io/managed-by', 'app.kubernetes.io/instance', 'app.kubernetes.io/version'];

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: { template?: { metadata?: { labels?: Record<string, string> } } } & Record<string, unknown>;
};

let helmBin = '';
let kubectlBin = '';
test.before(async (t) => {
  // Cold, helm (about 2 min) and the control plane's kubectl (about 7 min) are built first, once per machine.
  t.timeout(20 * 60_000, 'building helm and the pinned kubectl took more than 20 minutes');
  [helmBin, kubectlBin] = await Promise.all([ensureHelm(), ensureBinaries().then((b) => b.kubectl)]);
});

const key = (o: Obj) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const parse = (yaml: string) => (loadAll(yaml) as (Obj | null)[]).filter((o): o is Obj => o !== null);

function withoutHelmLabels(o: Obj): Obj {
  const c = structuredClone(o);
  for (const labels of [c.metadata.labels, c.spec?.template?.metadata?.labels]) {
    for (const l of HELM_LABELS) if (labels) delete labels[l];
  }
  return c;
}

/** Every object `helm template` renders, hooks included. */
async function renderAll(args: string[] = []): Promise<Obj[]> {
  return parse(await helm(helmBin, ['template', 'node-disks-manager', CHART, '-n', 'node-disks-system', ...args]));
}

/** The objects the release installs: hooks (the `helm test` Pod) are no part of the install kustomize has. */
async function render(args: string[] = []): Promise<Obj[]> {
  return (await renderAll(args)).filter((o) => !o.metadata.annotations?.['helm.sh/hook']);
}

async function kustomize(dir = 'kustomize/default'): Promise<Map<string, Obj>> {
  return new Map(parse(await runKubectl(kubectlBin, ['kustomize', join(REPO_ROOT, dir)])).map((o) => [key(o), o]));
}

/** What differs between the two installs, object by object: empty when they are the same. */
function drift(chart: Obj[], kust: Map<string, Obj>): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const raw of chart) {
    const k = key(raw);
    seen.add(k);
    const want = kust.get(k);
    if (!want) {
      problems.push(`${k}: in the chart, not in kustomize`);
      continue;
    }
    const got = withoutHelmLabels(raw);
    if (!isDeepStrictEqual(got, want)) problems.push(`${k} differs:\n chart:     ${JSON.stringify(got)}\n kustomize: ${JSON.stringify(want)}`);
  }
  for (const k of kust.keys()) if (!seen.has(k)) problems.push(`${k}: in kustomize, not in the chart`);
  return problems;
}

test('with default values the chart is kustomize/default: same objects, same specs (Helm labels aside; Helm owns the release namespace)', async (t) => {
  const [chart, kust] = await Promise.all([render(), kustomize()]);
  // Helm creates the release namespace (--create-namespace) and keeps the release in it, so the chart
  // cannot also own it: the Namespace is the one object the default render leaves out.
  const ns = kust.get('Namespace//node-disks-system');
  t.truthy(ns);
  kust.delete('Namespace//node-disks-system');
  // The CRDs carry Helm's keep annotation, which kustomize's have no use for.
  const crds = chart.filter((o) => o.kind === 'CustomResourceDefinition');
  t.deepEqual(crds.map((c) => c.metadata.name).sort(), ['nodediskclaims.localtest.example.com', 'nodedisks.localtest.example.com']);
  for (const crd of crds) {
    t.is(crd.metadata.annotations?.['helm.sh/resource-policy'], 'keep');
    delete crd.metadata.annotations;
  }
  t.deepEqual(drift(chart, kust), []);
  t.true(chart.length >= 19, `${chart.length} objects`);
  // Every object carries Helm's labels (so `helm` and its users can find what a release installed).
  for (const o of chart) t.is(o.metadata.labels?.['app.kubernetes.io/instance'], 'node-disks-manager', key(o));
});

test('installed into another release namespace with namespace.name, the chart also owns the Namespace as kustomize has it', async (t) => {
  const [chart, kust] = await Promise.all([render(['-n', 'nd-releases', '--set', 'namespace.name=node-disks-system', '--set', 'crds.keep=false']), kustomize()]);
  t.deepEqual(drift(chart, kust), []);
});

for (const overlay of ['dev', 'local-cluster', 'production', 'prometheus-operator']) {
  test(`with ci/${overlay}-values.yaml the chart is kustomize/overlays/${overlay}`, async (t) => {
    const [chart, kust] = await Promise.all([render(['-f', join(CHART, 'ci', `${overlay}-values.yaml`)]), kustomize(`kustomize/overlays/${overlay}`)]);
    kust.delete('Namespace//node-disks-system');
    for (const o of chart) if (o.kind === 'CustomResourceDefinition') delete o.metadata.annotations;
    t.deepEqual(drift(chart, kust), []);
  });
}

test('the drift check sees a changed spec, a missing object and an extra one', async (t) => {
  const [chart, kust] = await Promise.all([render(['--set', 'agent.hostPathRoot=/srv/nd', '--set', 'controller.podDisruptionBudget.enabled=true', '--set', 'crds.install=false']), kustomize()]);
  kust.delete('Namespace//node-disks-system');
  const problems = drift(chart, kust);
  t.true(problems.some((p) => p.startsWith('DaemonSet/node-disks-system/node-disks-agent differs')));
  t.true(problems.some((p) => p.startsWith('ValidatingAdmissionPolicy//nodedisks-agent.localtest.example.com differs')));
  t.true(problems.some((p) => p === 'PodDisruptionBudget/node-disks-system/node-disks-operator: in the chart, not in kustomize'));
  t.true(problems.some((p) => p === 'CustomResourceDefinition//nodedisks.localtest.example.com: in kustomize, not in the chart'));
});

test("the admission policies are kustomize's in whatever namespace the chart installs into (their bindings name its ServiceAccounts there), the disk dir following agent.hostPathRoot", async (t) => {
  const byKey = (a: Obj, b: Obj) => key(a).localeCompare(key(b));
  // kustomize before v5.7 gives the cluster-scoped policy objects an overlay's namespace, which the API
  // server drops.
  const policiesOf = (objects: Iterable<Obj>) =>
    [...objects]
      .filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy'))
      .map((o) => {
        const c = withoutHelmLabels(o);
        delete c.metadata.namespace;
        return c;
      })
      .sort(byKey);
  for (const [ns, dir] of [
    ['node-disks-system', 'kustomize/policies'],
    ['storage-team', 'test/fixtures/kustomize/other-namespace'],
  ] as const) {
    const kust = policiesOf((await kustomize(dir)).values());
    t.deepEqual(policiesOf(await render(['-n', ns])), kust, ns);
    t.true(JSON.stringify(kust).includes(`"paramRef":{"namespace":"${ns}"`), `${dir} names the ServiceAccounts of ${ns}`);
  }
  const moved = await render(['--set', 'agent.hostPathRoot=/srv/nd/']);
  const policy = moved.find((o) => o.metadata.name === 'nodedisks-agent.localtest.example.com' && o.kind === 'ValidatingAdmissionPolicy')!;
  const variables = (policy.spec as { variables: { name: string; expression: string }[] }).variables;
  t.is(variables.find((v) => v.name === 'diskDir')?.expression, "'/srv/nd/disks'");
  const ds = moved.find((o) => o.kind === 'DaemonSet' && o.metadata.name === 'node-disks-agent')!;
  const pod = (
    ds.spec!.template as {
      spec: { containers: { name: string; args: string[]; volumeMounts: { name: string; mountPath: string }[] }[]; volumes: { name: string; hostPath?: { path: string } }[] };
    }
  ).spec;
  // Both containers of the agent pod, the agent and the CSI driver's node side, find the disk images there.
  t.deepEqual(
    pod.containers.map((c) => [c.name, c.args.includes('--disk-dir=/srv/nd/disks'), c.volumeMounts.find((m) => m.name === 'disks')?.mountPath]),
    [
      ['agent', true, '/srv/nd/disks'],
      ['csi-node', true, '/srv/nd/disks'],
    ],
  );
  t.is(pod.volumes.find((v) => v.name === 'disks')?.hostPath?.path, '/srv/nd/disks');
  t.false(JSON.stringify(pod).includes('/var/lib/node-disks-manager'), 'nothing of the default disk dir is left');
});

type Container = {
  name: string;
  image: string;
  imagePullPolicy?: string;
  args: string[];
  env?: { name: string; value?: string }[];
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string; mountPropagation?: string }[];
};
type PodSpec = { containers: Container[]; volumes?: { name: string; hostPath?: { path: string } }[]; imagePullSecrets?: { name: string }[]; hostNetwork?: boolean };
const podOf = (o: Obj) => (o.spec!.template as { spec: PodSpec }).spec;
/** The objects of the CSI driver (kustomize/csi and its rights in kustomize/rbac), the agents' csi-node container aside. */
const CSI_OBJECTS = [
  'CSIDriver//nodedisks.localtest.example.com',
  'StorageClass//nodedisks',
  'Deployment/node-disks-system/node-disks-csi-controller',
  'ClusterRole//node-disks-csi-controller',
  'ClusterRoleBinding//node-disks-csi-controller',
  'Role/node-disks-system/node-disks-csi-controller',
  'RoleBinding/node-disks-system/node-disks-csi-controller',
];

test('the CSI driver is in both installs, object for object: CSIDriver, StorageClass, the CSI controller and its rights, the csi-node container of the agent pod', async (t) => {
  const [chart, kust] = await Promise.all([render(), kustomize()]);
  const byKey = new Map(chart.map((o) => [key(o), withoutHelmLabels(o)]));
  for (const k of CSI_OBJECTS) {
    t.truthy(kust.get(k), `${k} in kustomize/default`);
    t.deepEqual(byKey.get(k), kust.get(k), k);
  }
  for (const ds of [byKey.get('DaemonSet/node-disks-system/node-disks-agent')!, kust.get('DaemonSet/node-disks-system/node-disks-agent')!]) {
    t.deepEqual(
      podOf(ds).containers.map((c) => c.name),
      ['agent', 'csi-node'],
    );
  }
  const deploy = byKey.get('Deployment/node-disks-system/node-disks-csi-controller')!;
  t.deepEqual(
    podOf(deploy).containers.map((c) => `${c.name} ${c.image}`),
    ['csi-controller node-disks-csi:latest', 'csi-provisioner registry.k8s.io/sig-storage/csi-provisioner:v6.4.0'],
  );
});

test('csi.enabled=false leaves the driver out, and the agent pod as it was before the driver; the ServiceAccount and the policies that name it stay', async (t) => {
  const [chart, kust] = await Promise.all([render(['--set', 'csi.enabled=false']), kustomize()]);
  const keys = new Set(chart.map(key));
  for (const k of CSI_OBJECTS) t.false(keys.has(k), k);
  t.true(keys.has('ServiceAccount/node-disks-system/node-disks-csi-controller'), 'the policies name it: without it they refuse every NodeDisk write');
  for (const policy of ['nodedisks-csi-controller', 'nodedisks-csi-controller-leases', 'nodedisks-pv']) {
    t.true(keys.has(`ValidatingAdmissionPolicy//${policy}.localtest.example.com`), policy);
    t.true(keys.has(`ValidatingAdmissionPolicyBinding//${policy}.localtest.example.com`), policy);
  }
  // kustomize's DaemonSet without its csi-node container and the host mounts only that container has.
  const want = structuredClone(kust.get('DaemonSet/node-disks-system/node-disks-agent')!);
  const wantPod = podOf(want);
  wantPod.containers = wantPod.containers.filter((c) => c.name !== 'csi-node');
  wantPod.volumes = wantPod.volumes!.filter((v) => v.name !== 'kubelet-dir' && v.name !== 'dev');
  const ds = withoutHelmLabels(chart.find((o) => key(o) === 'DaemonSet/node-disks-system/node-disks-agent')!);
  t.deepEqual(ds, want);
  t.deepEqual(
    podOf(ds)
      .volumes!.filter((v) => v.hostPath)
      .map((v) => v.hostPath!.path),
    ['/var/lib/node-disks-manager/disks'],
  );
});

test('the StorageClass from values: name, default class, reclaimPolicy, fsType, mountOptions; storageClass.create=false leaves it out', async (t) => {
  type StorageClass = Obj & { provisioner: string; reclaimPolicy: string; volumeBindingMode: string; parameters: Record<string, string>; mountOptions?: string[] };
  const sc = (await render(['-f', join(CHART, 'ci', 'everything-values.yaml')])).find((o) => o.kind === 'StorageClass') as StorageClass;
  t.is(sc.metadata.name, 'nodedisks-fast');
  t.is(sc.metadata.annotations?.['storageclass.kubernetes.io/is-default-class'], 'true');
  t.is(sc.metadata.annotations?.['example.com/contact'], 'platform@example.com');
  t.is(sc.provisioner, 'nodedisks.localtest.example.com');
  t.is(sc.reclaimPolicy, 'Retain');
  t.is(sc.volumeBindingMode, 'WaitForFirstConsumer');
  t.deepEqual(sc.parameters, { 'csi.storage.k8s.io/fstype': 'xfs' });
  t.deepEqual(sc.mountOptions, ['noatime', 'nodiratime']);
  const without = await render(['--set', 'storageClass.create=false']);
  t.deepEqual(
    without.filter((o) => o.kind === 'StorageClass'),
    [],
  );
  t.true(
    without.some((o) => o.kind === 'CSIDriver'),
    'the driver stays, for classes of your own',
  );
});

test('the CSI images, pull secrets, ports and scheduling from values, on the CSI controller and on the csi-node container', async (t) => {
  const objs = await render(['-f', join(CHART, 'ci', 'everything-values.yaml')]);
  const deploy = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'node-disks-csi-controller')!;
  t.is(deploy.metadata.namespace, 'nd-everything');
  t.is((deploy.spec as { replicas: number }).replicas, 3);
  const pod = podOf(deploy) as PodSpec & { nodeSelector?: Record<string, string>; priorityClassName?: string };
  t.true(pod.hostNetwork);
  t.deepEqual(pod.imagePullSecrets, [{ name: 'registry-all' }, { name: 'registry-csi' }]);
  t.deepEqual(pod.nodeSelector, { 'kubernetes.io/os': 'linux' });
  t.is(pod.priorityClassName, 'system-cluster-critical');
  const [ours, provisioner] = pod.containers;
  t.is(ours!.image, 'registry.example.com/nodedisks/node-disks-csi:0.1.0');
  t.is(ours!.imagePullPolicy, 'IfNotPresent');
  t.true(ours!.args.includes('--http-address=:8092'));
  t.is(provisioner!.image, `registry.example.com/sig-storage/csi-provisioner@sha256:${'1'.repeat(64)}`);
  for (const c of [ours!, provisioner!])
    t.true(
      c.env!.some((e) => e.name === 'KUBERNETES_SERVICE_HOST' && e.value === '10.0.0.1'),
      c.name,
    );
  const agentPod = podOf(objs.find((o) => o.kind === 'DaemonSet' && o.metadata.name === 'node-disks-agent')!);
  t.deepEqual(agentPod.imagePullSecrets, [{ name: 'registry-all' }, { name: 'registry-csi' }], "the csi-node image's secrets on the agent pod");
  const node = agentPod.containers.find((c) => c.name === 'csi-node')!;
  t.is(node.image, 'registry.example.com/nodedisks/node-disks-csi:0.1.0');
  t.true(node.args.includes('--http-address=:8093'));
  t.true(node.args.includes('--disk-dir=/srv/nd/disks'));
});

test('helm lint --strict passes, with the default values and with every values file under ci/', async (t) => {
  const files = readdirSync(join(CHART, 'ci')).filter((f) => f.endsWith('.yaml'));
  t.true(files.length >= 2, files.join(', '));
  for (const args of [[], ...files.map((f) => ['-f', join(CHART, 'ci', f)])]) {
    const r = await runHelm(helmBin, ['lint', '--strict', CHART, ...args]);
    t.is(r.code, 0, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
    t.regex(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  }
});

for (const file of readdirSync(join(REPO_ROOT, 'charts/node-disks-manager/ci')).filter((f) => f.endsWith('.yaml'))) {
  test(`helm template renders ci/${file}, which the API server's schemas then check in the integration test`, async (t) => {
    const objs = await render(['-f', join(CHART, 'ci', file)]);
    t.true(objs.some((o) => o.kind === 'DaemonSet' && o.metadata.name === 'node-disks-agent'));
  });
}

test("the seed's helm-install command line renders: its images by repository and tag", async (t) => {
  const objs = await render(SEED_IMAGE_SETS);
  const image = (name: string) =>
    (objs.find((o) => o.metadata.name === name && (o.kind === 'Deployment' || o.kind === 'DaemonSet'))!.spec!.template as { spec: { containers: { image: string }[] } }).spec.containers[0]!.image;
  t.is(image('node-disks-operator'), 'node-disks-operator:dev');
  t.is(image('node-disks-agent'), 'node-disks-agent:dev');
});

test('an image by digest, pull policy and secrets, scheduling, extra labels and annotations, the PDB and the seeder', async (t) => {
  const digest = `sha256:${'a'.repeat(64)}`;
  const objs = await render(['-f', join(CHART, 'ci', 'everything-values.yaml'), '--set', `controller.image.digest=${digest}`]);
  const deploy = objs.find((o) => o.kind === 'Deployment')!;
  const pod = deploy.spec!.template as {
    metadata: { labels: Record<string, string>; annotations?: Record<string, string> };
    spec: Record<string, unknown> & { containers: { image: string; imagePullPolicy?: string }[] };
  };
  t.is(pod.spec.containers[0]!.image, `registry.example.com/nodedisks/node-disks-operator@${digest}`);
  t.is(pod.spec.containers[0]!.imagePullPolicy, 'IfNotPresent');
  t.deepEqual(pod.spec.imagePullSecrets, [{ name: 'registry-all' }, { name: 'registry-controller' }]);
  t.deepEqual(pod.spec.nodeSelector, { 'kubernetes.io/os': 'linux' });
  t.is(pod.spec.priorityClassName, 'system-cluster-critical');
  t.truthy(pod.spec.affinity);
  t.is(pod.metadata.labels.team, 'storage');
  t.is(pod.metadata.annotations?.['example.com/scrape'], 'true');
  for (const o of objs) {
    t.is(o.metadata.labels?.['example.com/owner'], 'platform', key(o));
    t.is(o.metadata.annotations?.['example.com/contact'], 'platform@example.com', key(o));
  }
  t.truthy(objs.find((o) => o.kind === 'PodDisruptionBudget'));
  const seeder = objs.find((o) => o.metadata.name === 'node-disks-seeder')!;
  const script = (seeder.spec!.template as { spec: { containers: { command: string[] }[] } }).spec.containers[0]!.command.join(' ');
  t.regex(script, /for i in 1 2 3 4 5; do/);
  t.regex(script, /truncate -s 32M/);
  t.regex(script, /cd \/srv\/nd\/disks/);
});

test("monitoring: none by default; the PrometheusRule is the kustomize component's, with its labels and runbook_url under runbookBaseURL; the PodMonitors scrape the agent, csi-node and the CSI controller as kustomize's do", async (t) => {
  t.deepEqual(
    (await render()).filter((o) => o.apiVersion.startsWith('monitoring.coreos.com/')),
    [],
  );
  const source = parse(readFileSync(join(REPO_ROOT, 'kustomize/components/prometheus-operator/prometheusrule.yaml'), 'utf8'))[0]!;
  type Groups = { groups: { rules: { alert: string; annotations: Record<string, string> }[] }[] };
  const rule = (await render(['-f', join(CHART, 'ci', 'everything-values.yaml')])).find((o) => o.kind === 'PrometheusRule')!;
  t.is(rule.metadata.labels?.release, 'prometheus');
  const want = structuredClone(source.spec as unknown as Groups);
  for (const r of want.groups.flatMap((g) => g.rules)) {
    r.annotations.runbook_url = `https://docs.example.com/nodedisks/runbooks.md#${r.alert.toLowerCase()}`;
  }
  t.deepEqual(rule.spec, want as unknown as Obj['spec']);
  const podMonitor = (await render(['--set', 'podMonitor.enabled=true'])).find((o) => o.kind === 'PodMonitor')!;
  t.deepEqual((podMonitor.spec as { selector: unknown }).selector, { matchLabels: { 'app.kubernetes.io/name': 'node-disks-agent' } });
  // The agent's and csi-node's endpoints, as kustomize's PodMonitor has them; without the CSI driver, the agent's only.
  const kustomizeMonitor = parse(readFileSync(join(REPO_ROOT, 'kustomize/components/prometheus-operator/podmonitor.yaml'), 'utf8'))[0]!;
  type Endpoints = { podMetricsEndpoints: { port: string }[] };
  t.deepEqual((podMonitor.spec as Endpoints).podMetricsEndpoints, (kustomizeMonitor.spec as Endpoints).podMetricsEndpoints);
  t.deepEqual(
    (kustomizeMonitor.spec as Endpoints).podMetricsEndpoints.map((e) => e.port),
    ['http-metrics', 'csi-node-http'],
  );
  const withoutCsi = (await render(['--set', 'podMonitor.enabled=true', '--set', 'csi.enabled=false'])).filter((o) => o.kind === 'PodMonitor');
  t.deepEqual(
    withoutCsi.map((m) => [m.metadata.name, (m.spec as Endpoints).podMetricsEndpoints.map((e) => e.port)]),
    [['node-disks-agent', ['http-metrics']]],
  );
  // The CSI controller's pods, on the port kustomize's PodMonitor names, which is the one the Deployment serves /metrics on.
  const csiMonitor = (await render(['--set', 'podMonitor.enabled=true'])).find((o) => o.kind === 'PodMonitor' && o.metadata.name === 'node-disks-csi-controller');
  const kustomizeCsiMonitor = parse(readFileSync(join(REPO_ROOT, 'kustomize/components/prometheus-operator/podmonitor-csi-controller.yaml'), 'utf8'))[0]!;
  t.deepEqual(csiMonitor?.spec, kustomizeCsiMonitor.spec);
  const csiPorts = (
    (await render()).find((o) => o.kind === 'Deployment' && o.metadata.name === 'node-disks-csi-controller')!.spec as {
      template: { spec: { containers: { name: string; ports?: { name: string }[] }[] } };
    }
  ).template.spec.containers
    .find((c) => c.name === 'csi-controller')!
    .ports!.map((p) => p.name);
  t.deepEqual(
    csiPorts,
    (kustomizeCsiMonitor.spec as Endpoints).podMetricsEndpoints.map((e) => e.port),
  );
});

test("dashboards: none by default; the ConfigMap carries kustomize's dashboard JSON as it is, with the sidecar's label, the annotations and its own namespace", async (t) => {
  t.deepEqual(
    (await render()).filter((o) => o.kind === 'ConfigMap'),
    [],
  );
  const json = readFileSync(join(REPO_ROOT, 'kustomize/components/grafana-dashboard/nodedisks-dashboard.json'), 'utf8');
  type ConfigMap = Obj & { data: Record<string, string> };
  const defaults = (await render(['--set', 'dashboards.enabled=true'])).find((o) => o.kind === 'ConfigMap') as ConfigMap;
  t.is(key(defaults), 'ConfigMap/node-disks-system/node-disks-dashboard');
  t.is(defaults.metadata.labels?.grafana_dashboard, '1');
  t.deepEqual(Object.keys(defaults.data), ['nodedisks-dashboard.json']);
  t.is(defaults.data['nodedisks-dashboard.json'], json);
  const cm = (await render(['-f', join(CHART, 'ci', 'everything-values.yaml')])).find((o) => o.kind === 'ConfigMap') as ConfigMap;
  t.is(key(cm), 'ConfigMap/monitoring/node-disks-dashboard');
  t.like(cm.metadata.labels, { grafana_dashboard: '1', release: 'prometheus', 'app.kubernetes.io/name': 'node-disks-dashboard', 'example.com/owner': 'platform' });
  t.deepEqual(cm.metadata.annotations, { grafana_folder: 'NodeDisks', 'example.com/contact': 'platform@example.com' });
  t.is(cm.data['nodedisks-dashboard.json'], json);
  // A sidecar configured with a label of its own: the default one removed (null), another one set.
  const other = (await render(['--set', 'dashboards.enabled=true', '--set', 'dashboards.labels.grafana_dashboard=null', '--set', 'dashboards.labels.team-dashboards=nodedisks'])).find(
    (o) => o.kind === 'ConfigMap',
  )!;
  t.is(other.metadata.labels?.['team-dashboards'], 'nodedisks');
  t.is(other.metadata.labels?.grafana_dashboard, undefined);
});

test('controller.replicas above 1 without leader election is refused with the reason', async (t) => {
  const r = await runHelm(helmBin, ['template', 'x', CHART, '--set', 'controller.leaderElection=false']);
  t.not(r.code, 0);
  t.regex(r.stderr, /controller\.replicas > 1 needs controller\.leaderElection: true/);
  await t.notThrowsAsync(render(['--set', 'controller.leaderElection=false', '--set', 'controller.replicas=1']));
});

// A person who may set only values must not gain what the install's identities hold (ADR 31).
const escalations: [string, string[], RegExp][] = [
  [
    "a commonLabel that aggregates every ClusterRole of the chart (the controller's and the agent's too) into view",
    ['--set-string', 'commonLabels.rbac\\.authorization\\.k8s\\.io/aggregate-to-view=true'],
    /commonLabels may not set rbac\.authorization\.k8s\.io\/aggregate-to-view: it would aggregate the controller's and the agent's ClusterRoles into the built-in roles/,
  ],
  [
    'a commonLabel over a label the objects set themselves',
    ['--set-string', 'commonLabels.app\\.kubernetes\\.io/part-of=other'],
    /commonLabels may not set app\.kubernetes\.io\/part-of: the chart's objects set it themselves/,
  ],
  [
    'the default namespace for the objects',
    ['--set', 'namespace.name=default'],
    /namespace\.name "default" is shared: whoever may create Pods or ServiceAccount tokens there holds the controller's and the agent's rights/,
  ],
  ['kube-system for the objects', ['--set', 'namespace.name=kube-system'], /namespace\.name "kube-system" is shared/],
  [
    "another namespace the chart does not create (a team's, say)",
    ['--set', 'namespace.name=team-a', '--set', 'namespace.create=false'],
    /namespace\.name "team-a" is not the release namespace, so the chart must create it \(namespace\.create: true\)/,
  ],
];
for (const [what, args, message] of escalations) {
  test(`the chart refuses ${what}, saying why`, async (t) => {
    const r = await runHelm(helmBin, ['template', 'x', CHART, ...args]);
    t.not(r.code, 0, r.stdout.slice(0, 200));
    t.regex(r.stderr, message);
  });
}

test("commonLabels reach every object without changing the labels it sets itself (the editor role's aggregate-to-edit stays true)", async (t) => {
  const objects = await render(['--set-string', 'commonLabels.team=storage']);
  t.true(objects.every((o) => o.metadata.labels?.team === 'storage'));
  const editor = objects.find((o) => o.kind === 'ClusterRole' && o.metadata.name === 'nodedisks-editor');
  t.is(editor?.metadata.labels?.['rbac.authorization.k8s.io/aggregate-to-edit'], 'true');
  t.is(objects.find((o) => o.kind === 'ClusterRole' && o.metadata.name === 'node-disks-operator')?.metadata.labels?.['app.kubernetes.io/part-of'], 'nodedisks');
});

const refusals: [string, string[], RegExp][] = [
  ['an unknown top-level key', ['--set', 'controler.replicas=1'], /additional properties 'controler' not allowed/],
  ['an unknown nested key', ['--set', 'agent.image.tga=dev'], /at '\/agent\/image': additional properties 'tga' not allowed/],
  ['a wrong type', ['--set', 'controller.replicas=two'], /at '\/controller\/replicas': got string, want integer/],
  ['a boolean as a string', ['--set-string', 'crds.keep=yes'], /at '\/crds\/keep': got string, want boolean/],
  ['a digest that is not one', ['--set', 'agent.image.digest=latest'], /at '\/agent\/image\/digest'/],
  ['a relative host path', ['--set', 'agent.hostPathRoot=var/lib/nd'], /at '\/agent\/hostPathRoot'/],
  ["a host path that would end the policy's CEL string", ['--set', "agent.hostPathRoot=/x' || true || '"], /at '\/agent\/hostPathRoot'/],
  ['an unknown pull policy', ['--set', 'controller.image.pullPolicy=Sometimes'], /at '\/controller\/image\/pullPolicy'/],
  ['an unknown PodMonitor key', ['--set', 'podMonitor.enable=true'], /at '\/podMonitor': additional properties 'enable' not allowed/],
  ['a runbook base that is not a URL', ['--set', 'prometheusRule.runbookBaseURL=docs/runbooks.md'], /at '\/prometheusRule\/runbookBaseURL'/],
  ['an unknown dashboards key', ['--set', 'dashboards.enable=true'], /at '\/dashboards': additional properties 'enable' not allowed/],
  ['a dashboard label value that is not a string', ['--set', 'dashboards.labels.grafana_dashboard=1'], /at '\/dashboards\/labels\/grafana_dashboard': got number, want string/],
  ['a dashboard namespace that is not a name', ['--set', 'dashboards.namespace=Monitoring'], /at '\/dashboards\/namespace'/],
  ['another CSI driver name (the program answers to one)', ['--set', 'csi.driverName=disks.example.com'], /at '\/csi\/driverName'/],
  ['an unknown CSI key', ['--set', 'csi.provisioner.tag=v6.4.0'], /at '\/csi\/provisioner': additional properties 'tag' not allowed/],
  ['a reclaim policy a StorageClass cannot have', ['--set', 'storageClass.reclaimPolicy=Recycle'], /at '\/storageClass\/reclaimPolicy'/],
  ['a filesystem the node side does not make', ['--set', 'storageClass.fsType=btrfs'], /at '\/storageClass\/fsType'/],
  ['two mount options in one item', ['--set-json', 'storageClass.mountOptions=["noatime,sync"]'], /at '\/storageClass\/mountOptions\/0'/],
];
for (const [what, args, message] of refusals) {
  test(`values.schema.json refuses ${what}, naming the key`, async (t) => {
    const r = await runHelm(helmBin, ['template', 'x', CHART, ...args]);
    t.not(r.code, 0);
    t.regex(r.stderr, message);
  });
}

test('the chart asks the cluster nothing and draws nothing at random: two renders are the same bytes', async (t) => {
  const a = await helm(helmBin, ['template', 'node-disks-manager', CHART, '-f', join(CHART, 'ci', 'everything-values.yaml')]);
  const b = await helm(helmBin, ['template', 'node-disks-manager', CHART, '-f', join(CHART, 'ci', 'everything-values.yaml')]);
  t.is(a, b);
  const templates = readdirSync(join(CHART, 'templates'), { recursive: true, encoding: 'utf8' }).filter((f) => /\.(yaml|tpl|txt)$/.test(f));
  t.true(templates.includes(join('tests', 'ready.yaml')), templates.join(', '));
  for (const f of templates) {
    const text = readFileSync(join(CHART, 'templates', f), 'utf8');
    t.notRegex(text, /\b(lookup|randAlphaNum|randAlpha|randNumeric|randAscii|uuidv4|genCA|genPrivateKey|genSelfSignedCert|now)\b/, f);
  }
});

test("helm test's hook: a Pod on the controller's image, ServiceAccount and network that waits until every NodeDisk is Ready; tests.enabled=false leaves it out", async (t) => {
  const hooks = (await renderAll(['-f', join(CHART, 'ci', 'local-cluster-values.yaml'), '--set', 'tests.minNodeDisks=9'])).filter((o) => o.metadata.annotations?.['helm.sh/hook']);
  t.deepEqual(
    hooks.map((o) => [key(o), o.metadata.annotations!['helm.sh/hook']]),
    [['Pod/node-disks-system/node-disks-manager-test-ready', 'test']],
  );
  const pod = hooks[0]!.spec as unknown as {
    serviceAccountName: string;
    hostNetwork?: boolean;
    restartPolicy: string;
    containers: { image: string; imagePullPolicy?: string; command: string[]; args: string[]; env: { name: string; value: string }[] }[];
  };
  t.is(pod.serviceAccountName, 'node-disks-operator');
  t.is(pod.restartPolicy, 'Never');
  t.true(pod.hostNetwork);
  const c = pod.containers[0]!;
  t.is(c.image, 'node-disks-operator:dev');
  t.is(c.imagePullPolicy, 'Never');
  t.deepEqual(c.command, ['/nodejs/bin/node', '-e']);
  t.regex(c.args[0]!, /\/apis\/localtest\.example\.com\/v1alpha1\/nodedisks/);
  t.deepEqual(
    c.env.map((e) => `${e.name}=${e.value}`),
    ['MIN_NODEDISKS=9', 'KUBERNETES_SERVICE_HOST=10.213.0.1', 'KUBERNETES_SERVICE_PORT=6443'],
  );
  t.deepEqual(
    (await renderAll(['--set', 'tests.enabled=false'])).filter((o) => o.metadata.annotations?.['helm.sh/hook']),
    [],
  );
});
