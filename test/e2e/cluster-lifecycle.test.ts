// `npm run cluster` end to end (root only; `npm run test:e2e`, not part of `npm test`): the cluster comes
// up with NodeDisks running as pods, refuses a second start, and every way it can stop (Ctrl-C once up,
// Ctrl-C half way, a crash followed by a new start) leaves the host exactly as found.
import test from 'ava';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { ensureBinaries } from '../../hack/controlplane/binaries.ts';
import { readSysctls, sh } from '../../hack/cluster/host.ts';
import { leftovers } from '../../hack/cluster/state.ts';
import { assertNothingLeft as nothingLeft, clusterEnv, onNode, startCluster as start, waitForOutput } from '../../hack/cluster/run.ts';

const { dataDir, env } = clusterEnv();
const before = await readSysctls();
test.after.always(() => rmSync(dataDir, { recursive: true, force: true }));
const startCluster = (args: string[] = []) => start(env, args);
const assertNothingLeft = (t: import('ava').ExecutionContext) => nothingLeft(t, before, dataDir);

test.serial('the cluster runs NodeDisks as pods on three nodes, refuses a second start, and Ctrl-C leaves nothing behind', async (t) => {
  t.timeout(20 * 60_000);
  const run = startCluster();
  try {
    await waitForOutput(run, 'Ctrl-C here stops it', 15 * 60_000);
    const kubectl = (await ensureBinaries()).kubectl;
    const k = (args: string[]) => sh(kubectl, [`--kubeconfig=${join(dataDir, 'kubeconfig')}`, ...args]);
    t.is((await k(['get', 'nodes', '-o', 'name'])).trim().split('\n').length, 3);
    t.is((await k(['get', 'nodedisks', '-o', 'name'])).trim().split('\n').length, 9);
    t.is(await k(['-n', 'node-disks-system', 'get', 'daemonset/node-disks-agent', '-o', 'jsonpath={.status.numberReady}']), '3');
    // The kubelet's kernel settings are back as soon as the nodes are Ready.
    t.deepEqual(await readSysctls(), before);
    // Each node sees its own disk dir at the path kustomize/default mounts.
    const ls = await onNode(env, 'node-disks-dev-m03', ['ls', '/var/lib/node-disks-manager/disks']);
    t.deepEqual(
      ls
        .trim()
        .split('\n')
        .filter((f) => f.endsWith('.img')),
      ['disk1.img', 'disk2.img', 'disk3.img'],
    );

    const second = startCluster();
    t.is(await second.exited, 1);
    t.regex(second.output(), /a local cluster is already running \(pid \d+/);
  } finally {
    run.child.kill('SIGINT');
  }
  t.is(await run.exited, 0);
  t.regex(run.output(), /torn down: no namespace, cgroup, mount, loop device or changed kernel setting left\./);
  await assertNothingLeft(t);
});

test.serial('Ctrl-C while the nodes start tears down what was made so far', async (t) => {
  t.timeout(20 * 60_000);
  const run = startCluster();
  await waitForOutput(run, 'image localhost/nodedisks-pause', 15 * 60_000);
  await new Promise((r) => setTimeout(r, 10_000)); // the control plane and some nodes are starting
  run.child.kill('SIGINT');
  t.is(await run.exited, 0);
  t.regex(run.output(), /torn down: no namespace, cgroup, mount, loop device or changed kernel setting left\./);
  await assertNothingLeft(t);
});

test.serial('after a crash, the next start cleans up first (that start installs with --install=helm: the chart, nine NodeDisks from its pods)', async (t) => {
  t.timeout(20 * 60_000);
  const crashed = startCluster();
  await waitForOutput(crashed, 'Ctrl-C here stops it', 15 * 60_000);
  crashed.child.kill('SIGKILL');
  await crashed.exited;
  t.notDeepEqual(await leftovers(before), []); // containers and namespaces outlive a killed cluster

  const next = startCluster(['--install=helm']);
  try {
    await waitForOutput(next, 'cleaning up after a local cluster that did not stop', 60_000);
    await waitForOutput(next, 'Ctrl-C here stops it', 15 * 60_000);
    t.regex(next.output(), /STATUS: deployed/);
    t.regex(next.output(), /NodeDisks \(helm\) running as pods/);
    const kubectl = (await ensureBinaries()).kubectl;
    const labels = await sh(kubectl, [
      `--kubeconfig=${join(dataDir, 'kubeconfig')}`,
      '-n',
      'node-disks-system',
      'get',
      'daemonset/node-disks-agent',
      '-o',
      'jsonpath={.metadata.labels.app\\.kubernetes\\.io/managed-by} {.status.numberReady}',
    ]);
    t.is(labels, 'Helm 3');
  } finally {
    next.child.kill('SIGINT');
  }
  t.is(await next.exited, 0);
  await assertNothingLeft(t);
});
