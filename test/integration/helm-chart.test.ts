// The Helm chart on a real API server, with the real helm (hack/helm/helm.ts): the seed's
// `make helm-install` command line installs it, every object it renders is created, the admission
// policies it installs are in force for the ServiceAccounts it creates, `helm upgrade` with changed values
// changes the install and keeps the NodeDisks, and `helm uninstall` keeps the CRD and every NodeDisk.
// No pods run on this control plane (no kubelet): the workloads are objects only here.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { loadAll } from 'js-yaml';
import { API_VERSION, FIELD_MANAGER, KIND, PV_OWNER_PREFIX } from '../../api/constants.ts';
import { ensureHelm, helm, runHelm } from '../../hack/helm/helm.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { SEED_INSTALL } from '../fixtures/helm.ts';
import { denied, nodeDisksFor, useControlPlane } from './_controlplane.ts';

// The chart installs everything itself; the harness installs nothing.
const controlPlane = useControlPlane(test, { install: false });
const CHART = join(REPO_ROOT, 'charts/node-disks-manager');
const NS = 'node-disks-system';

type Obj = { kind: string; apiVersion: string; metadata: { name: string; namespace?: string; annotations?: Record<string, string> }; spec?: Record<string, unknown> };

let helmBin = '';
let home = '';
test.before(async (t) => {
  t.timeout(20 * 60_000, 'building helm took more than 20 minutes');
  helmBin = await ensureHelm();
  home = await mkdtemp(join(tmpdir(), 'nd-helm-'));
});
test.after.always(async () => {
  if (home) await rm(home, { recursive: true, force: true });
});

/** The environment of helm against this control plane as its admin, with its own config, cache and data dirs. */
const helmEnv = () => ({ KUBECONFIG: controlPlane().admin().kubeconfig, HELM_CONFIG_HOME: join(home, 'config'), HELM_CACHE_HOME: join(home, 'cache'), HELM_DATA_HOME: join(home, 'data') });

/** helm against this control plane, from the repository root. */
function run(args: string[]): Promise<string> {
  return helm(helmBin, args, { env: helmEnv(), cwd: REPO_ROOT });
}

/** A target of the Makefile, with this helm binary; its output. */
function make(target: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('make', ['--no-print-directory', target, `HELM=${helmBin}`], { cwd: REPO_ROOT, env: { ...process.env, ...helmEnv() }, timeout: 300_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`make ${target}: ${stderr || err.message}`)) : resolve(stdout),
    );
  });
}

async function kubectl(args: string[], stdin?: string): Promise<string> {
  const cp = controlPlane();
  return await cp.kubectl(cp.admin(), args, stdin);
}

async function getJson<T>(args: string[]): Promise<T> {
  return JSON.parse(await kubectl(['get', ...args, '-o', 'json'])) as T;
}

const manifest = async (release: string, ns: string) => (loadAll(await run(['get', 'manifest', release, '-n', ns])) as (Obj | null)[]).filter((o): o is Obj => o !== null);

test.serial("the seed's helm-install command line installs every object; the chart's policies hold for its ServiceAccounts", async (t) => {
  const started = Date.now();
  const out = await run(SEED_INSTALL);
  const took = Date.now() - started;
  t.log(`helm upgrade --install: ${took} ms`);
  t.regex(out, /STATUS: deployed/);
  const objs = await manifest('node-disks-manager', NS);
  t.true(objs.length >= 19, `${objs.length} objects`);
  for (const o of objs) {
    const resource = o.apiVersion.includes('/') ? `${o.kind}.${o.apiVersion.split('/')[0]}` : o.kind;
    const got = await getJson<{ metadata: { labels: Record<string, string>; annotations: Record<string, string> } }>([
      resource,
      o.metadata.name,
      ...(o.metadata.namespace ? ['-n', o.metadata.namespace] : []),
    ]);
    t.is(got.metadata.labels['app.kubernetes.io/managed-by'], 'Helm', `${o.kind}/${o.metadata.name}`);
    t.is(got.metadata.annotations['meta.helm.sh/release-name'], 'node-disks-manager');
  }
  const deploy = await getJson<{ spec: { replicas: number; template: { spec: { containers: { image: string }[] } } } }>(['deployment', 'node-disks-operator', '-n', NS]);
  t.is(deploy.spec.template.spec.containers[0]!.image, 'node-disks-operator:dev');
  const ds = await getJson<{ spec: { template: { spec: { containers: { image: string }[] } } } }>(['daemonset', 'node-disks-agent', '-n', NS]);
  t.is(ds.spec.template.spec.containers[0]!.image, 'node-disks-agent:dev');

  // The agent's ServiceAccount the chart created has the RBAC to report its node's disk, and the agent
  // policy the chart installed refuses it another node's (once the API server has loaded the policy).
  await kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/nodedisks.localtest.example.com']);
  const cp = controlPlane();
  const agentA = nodeDisksFor(await cp.agent('helm-node-a'));
  const err = await eventually(
    'the agent policy in force',
    async () =>
      // Refused by admission before storage: a create let through before the policy loaded does not hide it.
      agentA.create(newNodeDisk('helm-node-b', 'disk1'), { fieldManager: FIELD_MANAGER.agent }).then(
        (): Error | false => false,
        (e: Error) => (/nodedisks-agent\.localtest\.example\.com/.test(e.message) ? e : false),
      ),
    30_000,
  );
  t.regex(err.message, /the agent of node helm-node-a may not write NodeDisks of node helm-node-b/);
  await eventually("the agent can create its own node's NodeDisk", async () =>
    agentA.create(newNodeDisk('helm-node-a', 'disk1'), { fieldManager: FIELD_MANAGER.agent }).then(
      () => true,
      () => false,
    ),
  );
  const controller = nodeDisksFor(await cp.controller());
  await denied(t, controller.create(newNodeDisk('helm-node-a', 'disk2'), { fieldManager: FIELD_MANAGER.controller }));

  // The CSI controller's ServiceAccount the chart created has the rights of its role and is held to its
  // policy: a disk for a PersistentVolume, released with a wipe, and nothing for anyone else.
  const csi = nodeDisksFor(await cp.csiController());
  const asCsi = { fieldManager: FIELD_MANAGER.csiController, force: true } as const;
  const disk = { apiVersion: API_VERSION, kind: KIND, metadata: { name: 'node-disk-helm-node-a-disk1' } } as const;
  const forPerson = await eventually(
    "the CSI controller's policy in force",
    async () =>
      csi.apply({ ...disk, spec: { desired: { state: 'Reserved', owner: 'team-x' } } }, { ...asCsi, dryRun: true }).then(
        (): Error | false => false,
        (e: Error) => (/nodedisks-csi-controller\.localtest\.example\.com/.test(e.message) ? e : false),
      ),
    30_000,
  );
  t.regex(forPerson.message, /it reserves for PersistentVolumes only/);
  const reserved = await csi.apply({ ...disk, spec: { desired: { state: 'Reserved', owner: `${PV_OWNER_PREFIX}pvc-helm`, ownerUID: 'helm' } } }, asCsi);
  t.is(reserved.spec.desired?.owner, 'pv:pvc-helm');
  t.deepEqual((await csi.apply({ ...disk, spec: { desired: { state: 'Available', wipe: 'pv-helm' } } }, asCsi)).spec.desired, { state: 'Available', wipe: 'pv-helm' });
  // The agent's report that it wiped the disk: free again.
  await agentA.applyStatus({ ...disk, status: { node: { phase: 'Available', capacityBytes: 1, wipedFor: 'pv-helm' } } }, { fieldManager: FIELD_MANAGER.agent });
});

test.serial('helm upgrade with changed values changes the install and keeps the NodeDisks', async (t) => {
  const before = await getJson<{ metadata: { uid: string } }>(['nodedisk', 'node-disk-helm-node-a-disk1']);
  await run([
    ...SEED_INSTALL,
    '--set',
    'controller.replicas=3',
    '--set',
    'controller.podDisruptionBudget.enabled=true',
    '--set',
    'agent.scanPeriod=15s',
    '--set',
    'agent.hostPathRoot=/srv/nd',
    '--set',
    'commonLabels.team=storage',
  ]);
  const deploy = await getJson<{ metadata: { labels: Record<string, string> }; spec: { replicas: number } }>(['deployment', 'node-disks-operator', '-n', NS]);
  t.is(deploy.spec.replicas, 3);
  t.is(deploy.metadata.labels.team, 'storage');
  const pdb = await getJson<{ spec: { minAvailable: number } }>(['pdb', 'node-disks-operator', '-n', NS]);
  t.is(pdb.spec.minAvailable, 1);
  const ds = await getJson<{ spec: { template: { spec: { containers: { args: string[] }[]; volumes: { hostPath?: { path: string } }[] } } } }>(['daemonset', 'node-disks-agent', '-n', NS]);
  t.deepEqual(ds.spec.template.spec.containers[0]!.args, ['--disk-dir=/srv/nd/disks', '--http-address=:8080', '--rescan-interval=15s']);
  const policy = await getJson<{ spec: { variables: { name: string; expression: string }[] } }>(['validatingadmissionpolicy', 'nodedisks-agent.localtest.example.com']);
  t.is(policy.spec.variables.find((v) => v.name === 'diskDir')?.expression, "'/srv/nd/disks'");
  const after = await getJson<{ metadata: { uid: string } }>(['nodedisk', 'node-disk-helm-node-a-disk1']);
  t.is(after.metadata.uid, before.metadata.uid);
  const history = await run(['history', 'node-disks-manager', '-n', NS]);
  t.regex(history, /^2\s.*deployed/m);
});

test.serial('helm upgrade with csi.enabled=false removes the driver and nothing else: the ServiceAccount its policies name stays, so NodeDisk writes still pass them', async (t) => {
  await run([...SEED_INSTALL, '--set', 'csi.enabled=false']);
  for (const gone of [
    ['deployment', 'node-disks-csi-controller', '-n', NS],
    ['csidriver', 'nodedisks.localtest.example.com'],
    ['storageclass', 'nodedisks'],
    ['clusterrole', 'node-disks-csi-controller'],
    ['role', 'node-disks-csi-controller', '-n', NS],
  ]) {
    t.regex(await kubectl(['get', ...gone, '--ignore-not-found', '-o', 'name']), /^$/, gone.join(' '));
  }
  await kubectl(['get', 'serviceaccount', 'node-disks-csi-controller', '-n', NS]);
  await kubectl(['get', 'validatingadmissionpolicybinding', 'nodedisks-pv.localtest.example.com']);
  const ds = await getJson<{ spec: { template: { spec: { containers: { name: string }[] } } } }>(['daemonset', 'node-disks-agent', '-n', NS]);
  t.deepEqual(
    ds.spec.template.spec.containers.map((c) => c.name),
    ['agent'],
  );
  // Not refused for want of the policies' parameter; a PersistentVolume's reservation still is.
  const admin = nodeDisksFor(controlPlane().admin());
  const labelled = await admin.mergePatch('node-disk-helm-node-a-disk1', { metadata: { labels: { 'example.com/probe': 'csi-off' } } }, { fieldManager: FIELD_MANAGER.plugin });
  t.is(labelled.metadata.labels?.['example.com/probe'], 'csi-off');
  const forged = await denied(
    t,
    admin.mergePatch('node-disk-helm-node-a-disk1', { spec: { desired: { state: 'Reserved', owner: 'pv:pvc-forged', ownerUID: 'f' } } }, { fieldManager: FIELD_MANAGER.plugin }),
  );
  t.regex(forged.message, /only the CSI driver reserves a NodeDisk for a PersistentVolume/);
});

test.serial('helm uninstall removes the install and keeps the CRD and every NodeDisk', async (t) => {
  const before = await getJson<{ metadata: { uid: string } }>(['nodedisk', 'node-disk-helm-node-a-disk1']);
  const out = await run(['uninstall', 'node-disks-manager', '-n', NS]);
  t.regex(out, /These resources were kept due to the resource policy:\n(\[.*\n)*\[CustomResourceDefinition\] nodedisks\.localtest\.example\.com\n/);
  t.regex(out, /These resources were kept due to the resource policy:\n(\[.*\n)*\[CustomResourceDefinition\] nodediskclaims\.localtest\.example\.com\n/);
  await kubectl(['get', 'crd', 'nodedisks.localtest.example.com', 'nodediskclaims.localtest.example.com']);
  const after = await getJson<{ metadata: { uid: string } }>(['nodedisk', 'node-disk-helm-node-a-disk1']);
  t.is(after.metadata.uid, before.metadata.uid);
  for (const gone of [
    ['deployment', 'node-disks-operator', '-n', NS],
    ['daemonset', 'node-disks-agent', '-n', NS],
    ['validatingadmissionpolicy', 'nodedisks-agent.localtest.example.com'],
    ['clusterrole', 'node-disks-agent'],
  ]) {
    t.regex(await kubectl(['get', ...gone, '--ignore-not-found', '-o', 'name']), /^$/, gone.join(' '));
  }
  // Installed again, the chart takes the CRD it left behind back (it still carries the release's metadata).
  await run(SEED_INSTALL);
  t.is((await getJson<{ metadata: { uid: string } }>(['nodedisk', 'node-disk-helm-node-a-disk1'])).metadata.uid, before.metadata.uid);
  await run(['uninstall', 'node-disks-manager', '-n', NS]);
});

test.serial('make helm-install installs the seed quickstart (disks seeded), make helm-uninstall removes it and keeps the CRD', async (t) => {
  const out = await make('helm-install');
  t.regex(out, /STATUS: deployed/);
  const seeder = await getJson<{ spec: { template: { spec: { volumes: { hostPath?: { path: string } }[] } } } }>(['daemonset', 'node-disks-seeder', '-n', NS]);
  t.deepEqual(
    seeder.spec.template.spec.volumes.map((v) => v.hostPath?.path),
    ['/var/lib/node-disks-manager/disks'],
  );
  t.is(
    (await getJson<{ spec: { template: { spec: { containers: { image: string }[] } } } }>(['deployment', 'node-disks-operator', '-n', NS])).spec.template.spec.containers[0]!.image,
    'node-disks-operator:dev',
  );
  await make('helm-uninstall');
  t.regex(await kubectl(['get', 'daemonset', '-n', NS, '--ignore-not-found', '-o', 'name']), /^$/);
  await kubectl(['get', 'crd', 'nodedisks.localtest.example.com']);
  // A second uninstall of a release that is gone is not an error.
  await make('helm-uninstall');
});

test.serial('every values file under ci/ renders objects the API server accepts (server-side dry run)', async (t) => {
  for (const file of (await readdir(join(CHART, 'ci'))).filter((f) => f.endsWith('.yaml'))) {
    const rendered = await run(['template', 'node-disks-manager', CHART, '-n', NS, '-f', join(CHART, 'ci', file)]);
    // The ServiceMonitor, PodMonitor and PrometheusRule need the Prometheus Operator's CRDs, which this
    // control plane does not have.
    const objs = (loadAll(rendered) as (Obj | null)[]).filter((o): o is Obj => o !== null && !o.apiVersion.startsWith('monitoring.coreos.com/'));
    for (const ns of new Set(objs.flatMap((o) => (o.kind === 'Namespace' ? [o.metadata.name] : o.metadata.namespace ? [o.metadata.namespace] : [])))) {
      await kubectl(['create', 'namespace', ns, '--dry-run=client', '-o', 'yaml']).then((y) => kubectl(['apply', '-f', '-'], y));
    }
    const out = await kubectl(['apply', '--server-side', '--dry-run=server', '--force-conflicts', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objs }));
    t.regex(out, /daemonset\.apps\/node-disks-agent serverside-applied \(server dry run\)/, file);
  }
});

test.serial('why the chart leaves the release namespace to helm: a chart that renders it cannot be installed with --create-namespace', async (t) => {
  // As the seed's chart did with namespace.create: true and its own command line.
  const chart = join(home, 'owns-its-namespace');
  await mkdir(join(chart, 'templates'), { recursive: true });
  await writeFile(join(chart, 'Chart.yaml'), 'apiVersion: v2\nname: owns-its-namespace\nversion: 0.1.0\n');
  await writeFile(join(chart, 'templates', 'namespace.yaml'), 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ .Release.Namespace }}\n');
  const r = await runHelm(helmBin, ['upgrade', '--install', 'owns-its-namespace', chart, '-n', 'nd-owns-its-namespace', '--create-namespace'], { env: helmEnv() });
  t.not(r.code, 0);
  t.regex(r.stderr, /namespaces "nd-owns-its-namespace" already exists/);
});
