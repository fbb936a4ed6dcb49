// `npm start`: a local NodeDisks cluster with no Docker. A real etcd + kube-apiserver, the CRD and RBAC
// from kustomize/, three Node objects with 64 MiB sparse disk images each, the controller and one agent
// per node as separate processes with their own identities. State lives in .nodedisks-dev/ (wiped at
// each start, unless another demo runs there: .nodedisks-dev/demo.pid); Ctrl-C stops everything.
import { copyFile, mkdir, readdir, rm } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { ControlPlane } from './controlplane/controlplane.ts';
import { REPO_ROOT } from './lib/paths.ts';
import { acquireDemoLock, DemoRunning, releaseDemoLock } from './demo-lock.ts';
import { seedDisks, startAgent, startController, type Program } from './lib/programs.ts';

const NODES = ['node-disks-dev-m02', 'node-disks-dev-m03', 'node-disks-dev-m04'];
const DISKS_PER_NODE = 3;
const DISK_BYTES = 64 * 1024 * 1024;
// NODEDISKS_DEV_DIR moves the state elsewhere (the demo's own test runs it in a temp dir).
const work = process.env.NODEDISKS_DEV_DIR || join(REPO_ROOT, '.nodedisks-dev');
const say = (line: string) => console.log(line);

await mkdir(work, { recursive: true });
// Before anything is wiped: a second start while a demo runs must leave that demo alone.
try {
  const lock = await acquireDemoLock(work, say);
  process.on('exit', () => releaseDemoLock(lock));
} catch (err) {
  if (!(err instanceof DemoRunning)) throw err;
  console.error(`error: ${err.message}`);
  process.exit(1);
}
for (const entry of await readdir(work)) if (entry !== 'demo.pid') await rm(join(work, entry), { recursive: true, force: true });
say('starting etcd and kube-apiserver …');
const cp = await ControlPlane.start({ dir: join(work, 'cluster'), log: say });
const programs: Program[] = [];
let stopping: Promise<void> | undefined;
let signalled = false;
/** Stops everything once; concurrent callers wait for the same stop. After Ctrl-C the exit code is 0. */
async function shutdown(code: number): Promise<never> {
  stopping ??= (async () => {
    say('\nstopping agents, controller and control plane …');
    await Promise.all(programs.map((p) => p.stop()));
    await cp.stop();
    say('stopped.');
  })();
  await stopping;
  process.exit(signalled ? 0 : code);
}
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    signalled = true;
    void shutdown(0);
  });
}

try {
  const logs = join(work, 'logs');
  programs.push(await startController(cp, { logDir: logs, nodeLifecycle: true }));
  for (const node of NODES) {
    const diskDir = join(work, 'nodes', node, 'disks');
    await seedDisks(diskDir, DISKS_PER_NODE, DISK_BYTES);
    programs.push(await startAgent(cp, { node, diskDir, logDir: logs }));
  }
  const kubeconfig = join(work, 'kubeconfig');
  await copyFile(cp.admin().kubeconfig, kubeconfig);
  // Wait until every disk has been discovered and reported.
  const want = NODES.length * DISKS_PER_NODE;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const out = await cp.kubectl(cp.admin(), ['get', 'nodedisks', '-o', 'jsonpath={range .items[*]}{.status.node.phase}{"\\n"}{end}']);
    if (out.split('\n').filter((l) => l === 'Available').length >= want) break;
    if (Date.now() > deadline) throw new Error(`only ${out.split('\n').filter(Boolean).length} of ${want} disks were reported within 60 s; see ${logs}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  // An application team: rights in its own namespace only (the built-in edit role), as a cluster gives one.
  const teamKubeconfig = join(work, 'kubeconfig-team-a');
  await copyFile((await cp.namespacedUser('team-a', 'dev')).kubeconfig, teamKubeconfig);
  const rel = relative(process.cwd(), work) || '.';
  say(`
NodeDisks is running: Kubernetes ${cp.binaries.kubernetesVersion} at ${cp.server},
the controller and ${NODES.length} node agents (logs in ${rel}/logs/).

In another terminal:

  export KUBECONFIG=${kubeconfig}
  kubectl get nodedisks -o wide
  ND_NAME=$(kubectl get nodedisks -o jsonpath='{.items[0].metadata.name}')
  kubectl label nodedisk "$ND_NAME" localtest.example.com/auto-reserve=true --overwrite
  kubectl get nodedisk "$ND_NAME" -o jsonpath='{.spec.desired.state} {.spec.desired.owner} {.status.node.phase} {.status.node.capacityBytes}{"\\n"}'
  ls -1 ${rel}/nodes/node-disks-dev-m02/disks

Application team (ServiceAccount team-a/dev, only the edit role in namespace team-a; plugin: dist/bin):

  export KUBECONFIG=${teamKubeconfig}
  kubectl nodedisks claim db --min-capacity 32Mi --wait    # bound to a disk; its .reserved marker is on that node
  kubectl get ndc
  kubectl nodedisks status claim/db
  kubectl nodedisks claim big --min-capacity 1Gi           # Pending: "no free disk of at least 1Gi"
  kubectl nodedisks status claim/big
  kubectl delete ndc db big                                # releases the disk

The disk dir of node N is ${rel}/nodes/N/disks (it plays /var/lib/node-disks-manager/disks).
Press Ctrl-C to stop everything.`);
  // If a program dies, say so and stop, rather than leave a half-working demo.
  await Promise.race(programs.map((p) => p.whenExited().then((code) => ({ p, code })))).then(({ p, code }) => {
    if (!stopping) {
      console.error(`\n${p.name} exited (${code}); its log: ${p.logFile}`);
      return shutdown(1);
    }
    return undefined;
  });
} catch (err) {
  console.error(`error: ${(err as Error).message}`);
  await shutdown(1);
}
