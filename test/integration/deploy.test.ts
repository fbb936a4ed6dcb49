// Deploying for real: every Kustomize overlay builds and is accepted by the API server (server-side dry
// run, so every object and the admission policies are validated), kustomize/default applies, the
// Dockerfile copies only paths that exist, and the bundles the images copy start and work.
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { load, loadAll } from 'js-yaml';
import { DEFAULT_DISK_DIR } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import { runKubectl } from '../../hack/controlplane/controlplane.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { Program, seedDisks } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const OVERLAYS = ['kustomize/default', 'kustomize/overlays/dev', 'kustomize/overlays/minikube', 'kustomize/overlays/production'];
const GITOPS = ['kustomize/gitops/argocd'];
const BASES = ['crd', 'namespace', 'rbac', 'policies', 'controller', 'agent', 'csi'];

type Obj = { kind: string; metadata: { name: string; namespace?: string }; spec?: Record<string, unknown> };

for (const dir of [...OVERLAYS, ...GITOPS, ...BASES.map((b) => `kustomize/${b}`)]) {
  test(`${dir} builds with both kubectls`, async (t) => {
    for (const bin of [controlPlane().binaries.kubectl, 'kubectl']) {
      const out = await runKubectl(bin, ['kustomize', join(REPO_ROOT, dir)]);
      t.true(loadAll(out).length > 0);
    }
  });
}

for (const dir of OVERLAYS) {
  test(`${dir} is accepted by the API server (server-side dry run)`, async (t) => {
    const cp = controlPlane();
    const out = await cp.kubectl(cp.admin(), ['apply', '--server-side', '--dry-run=server', '--force-conflicts', '-k', join(REPO_ROOT, dir)]);
    t.regex(out, /deployment\.apps\/node-disks-operator serverside-applied \(server dry run\)/);
    t.regex(out, /daemonset\.apps\/node-disks-agent serverside-applied \(server dry run\)/);
    t.regex(out, /validatingadmissionpolicy\.admissionregistration\.k8s\.io\/nodedisks-agent\.localtest\.example\.com serverside-applied/);
    t.regex(out, /deployment\.apps\/node-disks-csi-controller serverside-applied \(server dry run\)/);
    t.regex(out, /csidriver\.storage\.k8s\.io\/nodedisks\.localtest\.example\.com serverside-applied \(server dry run\)/);
    t.regex(out, /storageclass\.storage\.k8s\.io\/nodedisks serverside-applied \(server dry run\)/);
    t.regex(out, /validatingadmissionpolicy\.admissionregistration\.k8s\.io\/nodedisks-pv\.localtest\.example\.com serverside-applied/);
  });
}

test.serial('kustomize/default applies for real', async (t) => {
  const cp = controlPlane();
  await cp.kubectl(cp.admin(), ['apply', '--server-side', '--force-conflicts', '-k', join(REPO_ROOT, 'kustomize/default')]);
  const ds = JSON.parse(await cp.kubectl(cp.admin(), ['get', 'daemonset', 'node-disks-agent', '-n', 'node-disks-system', '-o', 'json'])) as {
    spec: {
      template: {
        spec: {
          automountServiceAccountToken?: boolean;
          containers: {
            name: string;
            env: { name: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
            securityContext: Record<string, unknown>;
            volumeMounts: { name: string; mountPath: string; mountPropagation?: string }[];
          }[];
          volumes: { name: string; hostPath?: { path: string } }[];
          tolerations: { operator: string }[];
        };
      };
    };
  };
  const pod = ds.spec.template.spec;
  const agent = pod.containers[0]!;
  t.is(agent.name, 'agent');
  t.is(agent.env.find((e) => e.name === 'NODE_NAME')?.valueFrom?.fieldRef?.fieldPath, 'spec.nodeName');
  const hostPaths = new Map(pod.volumes.filter((v) => v.hostPath).map((v) => [v.name, v.hostPath!.path]));
  t.deepEqual(
    agent.volumeMounts.filter((m) => hostPaths.has(m.name)).map((m) => hostPaths.get(m.name)),
    ['/var/lib/node-disks-manager/disks'],
    'the agent: the disk dir and nothing else of the host',
  );
  t.like(agent.securityContext, { privileged: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
  // The CSI driver's node side beside it: privileged for mounts and loop devices, the kubelet's dir
  // (Bidirectional), the host's devices and the disk dir; no token, so no Kubernetes API access.
  const csiNode = pod.containers[1]!;
  t.is(csiNode.name, 'csi-node');
  t.like(csiNode.securityContext, { privileged: true });
  t.deepEqual(
    csiNode.volumeMounts.map((m) => [hostPaths.get(m.name) ?? m.name, m.mountPath, m.mountPropagation ?? 'None']),
    [
      ['/var/lib/kubelet', '/var/lib/kubelet', 'Bidirectional'],
      ['/dev', '/dev', 'None'],
      ['/var/lib/node-disks-manager/disks', '/var/lib/node-disks-manager/disks', 'None'],
    ],
  );
  t.is(pod.automountServiceAccountToken, false, "the pod mounts only the agent's projected token, into the agent alone");
  t.deepEqual(pod.tolerations, [{ operator: 'Exists' }]);
  const deploy = JSON.parse(await cp.kubectl(cp.admin(), ['get', 'deployment', 'node-disks-operator', '-n', 'node-disks-system', '-o', 'json'])) as {
    spec: { template: { spec: { securityContext: Record<string, unknown>; containers: { args: string[]; securityContext: Record<string, unknown> }[] } } };
  };
  t.like(deploy.spec.template.spec.securityContext, { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
  t.true(deploy.spec.template.spec.containers[0]!.args.includes('--leader-elect=true'));
});

test('production pins images by digest and has a PodDisruptionBudget; dev never pulls and seeds disks', async (t) => {
  const prod = loadAll(await runKubectl('kubectl', ['kustomize', join(REPO_ROOT, 'kustomize/overlays/production')])) as Obj[];
  const images = prod.flatMap((o) => ((o.spec?.template as { spec?: { containers?: { image: string }[] } })?.spec?.containers ?? []).map((c) => c.image));
  t.true(images.length >= 2 && images.every((i) => /@sha256:[0-9a-f]{64}$/.test(i)), images.join(', '));
  t.true(prod.some((o) => o.kind === 'PodDisruptionBudget'));
  const dev = loadAll(await runKubectl('kubectl', ['kustomize', join(REPO_ROOT, 'kustomize/overlays/dev')])) as Obj[];
  const devImages = dev.flatMap((o) => (o.spec?.template as { spec?: { containers?: { image: string; imagePullPolicy?: string }[] } })?.spec?.containers ?? []);
  t.true(devImages.some((c) => c.image === 'node-disks-operator:dev' && c.imagePullPolicy === 'Never'));
  t.true(devImages.some((c) => c.image === 'node-disks-agent:dev' && c.imagePullPolicy === 'Never'));
  t.deepEqual(
    devImages.filter((c) => c.image === 'node-disks-csi:dev').map((c) => c.imagePullPolicy),
    ['Never', 'Never'],
    'the CSI controller and the csi-node container',
  );
  t.true(dev.some((o) => o.kind === 'DaemonSet' && o.metadata.name === 'node-disks-seeder'));
});

test('every path the Dockerfile copies from the build context exists', (t) => {
  const dockerfile = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');
  const lines = dockerfile.split('\n').filter((l) => /^COPY\s/.test(l) && !l.includes('--from='));
  t.true(lines.length > 5);
  for (const line of lines) {
    const parts = line.split(/\s+/).slice(1, -1);
    for (const p of parts) t.true(existsSync(join(REPO_ROOT, p)), `${p} (from: ${line})`);
  }
  const fromBuild = [...dockerfile.matchAll(/--from=build (\S+)/g)].map((m) => m[1] ?? '');
  t.true(fromBuild.length > 0);
  for (const path of fromBuild) {
    if (path.startsWith('/src/')) {
      // Under the build stage's WORKDIR: made by `npm run build` from this checkout.
      t.true(existsSync(join(REPO_ROOT, path.slice('/src/'.length))), `${path} is built by npm run build`);
    } else {
      // Anything else comes from the build stage's base image: only the official Node image's own binary.
      t.is(path, '/usr/local/bin/node', `${path} is neither built by npm run build nor part of the node image`);
      t.regex(dockerfile, /^FROM node:24\.[0-9.]+-\S+ AS build$/m);
    }
  }
});

test.serial('the bundles the images copy start and do their job', async (t) => {
  const cp = controlPlane();
  const work = await mkdtemp(join(tmpdir(), 'nodedisks-bundles-'));
  const started: Program[] = [];
  try {
    const node = 'node-bundle';
    await seedDisks(join(work, 'disks'), 1, 4096);
    const agentId = await cp.agent(node);
    const controllerId = await cp.controller();
    const agent = new Program('agent-bundle', join(work, 'agent.log'), join(REPO_ROOT, 'dist/agent/node-disks-agent.mjs'), [
      `--kubeconfig=${agentId.kubeconfig}`,
      `--node-name=${node}`,
      `--disk-dir=${join(work, 'disks')}`,
      `--host-disk-dir=${DEFAULT_DISK_DIR}`,
      '--http-address=127.0.0.1:0',
    ]).launch();
    const controller = new Program('controller-bundle', join(work, 'controller.log'), join(REPO_ROOT, 'dist/controller/node-disks-operator.mjs'), [
      `--kubeconfig=${controllerId.kubeconfig}`,
      '--http-address=127.0.0.1:0',
      '--identity=bundle',
      '--leader-elect=false',
    ]).launch();
    started.push(agent, controller);
    const name = nodeDiskName(node, 'disk1');
    await eventually('the bundled agent reports the disk', async () => (await nodeDisksFor(cp.admin()).get(name)).status?.node?.phase === 'Available');
    await cp.kubectl(cp.admin(), ['label', 'nodedisk', name, 'localtest.example.com/auto-reserve=true']);
    await eventually('the bundled controller and agent reserve it', async () => (await nodeDisksFor(cp.admin()).get(name)).status?.node?.phase === 'Reserved');
    t.true(existsSync(join(work, 'disks', 'disk1.img.reserved')));
  } finally {
    await Promise.all(started.map((p) => p.stop()));
    await rm(work, { recursive: true, force: true });
  }
});

test('the kustomize bases are shaped like kubebuilder config/', (t) => {
  for (const dir of [...BASES, 'default', 'components/seeder', 'components/prometheus', 'components/nvme-drives', 'overlays/dev', 'overlays/production']) {
    const k = load(readFileSync(join(REPO_ROOT, 'kustomize', dir, 'kustomization.yaml'), 'utf8')) as { kind: string };
    t.true(['Kustomization', 'Component'].includes(k.kind), dir);
  }
});
