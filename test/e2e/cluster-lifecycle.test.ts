// `npm run cluster` end to end (root only; `npm run test:e2e`, not part of `npm test`): the cluster comes
// up with NodeDisks running as pods, refuses a second start, and every way it can stop (Ctrl-C once up,
// Ctrl-C half way, a crash followed by a new start) leaves the host exactly as found.
import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBinaries } from '../controlplane/binaries.ts';
import { REPO_ROOT } from '../../scripts/lib/paths.ts';
import { readSysctls, sh } from '../cluster/host.ts';
import { leftovers } from '../cluster/state.ts';

const MAIN = join(REPO_ROOT, 'test', 'cluster', 'main.ts');
const SSH = join(REPO_ROOT, 'test', 'cluster', 'ssh.ts');
const dataDir = mkdtempSync(join(tmpdir(), 'nodedisks-cluster-e2e-'));
const env = { ...process.env, NODEDISKS_CLUSTER_DIR: dataDir };
const before = await readSysctls();
test.after.always(() => rmSync(dataDir, { recursive: true, force: true }));

interface Run {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function startCluster(): Run {
  let out = '';
  const child = spawn(process.execPath, [MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

async function waitForOutput(run: Run, text: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void run.exited.then(() => (exited = true));
  while (!run.output().includes(text)) {
    if (exited || Date.now() > deadline) throw new Error(`no "${text}" in the output:\n${run.output()}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function assertNothingLeft(t: import('ava').ExecutionContext): Promise<void> {
  t.deepEqual(await leftovers(before), []);
  t.deepEqual(await readSysctls(), before);
  // A shim killed with its cluster lingers a moment as a zombie until its new parent reaps it: poll, and
  // fail only if a matching process is still there after a generous wait.
  const ours = /node-disks-(agent|operator)\.mjs|containerd-shim|\/pause$/m;
  let ps = await sh('ps', ['-eo', 'args']);
  for (const deadline = Date.now() + 60_000; ours.test(ps) && Date.now() < deadline; ps = await sh('ps', ['-eo', 'args'])) {
    await new Promise((r) => setTimeout(r, 1000));
  }
  t.notRegex(ps, ours);
}

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
    const ls = await sh(process.execPath, [SSH, 'node-disks-dev-m03', 'ls', '/var/lib/node-disks-manager/disks'], { env });
    t.deepEqual(ls.trim().split('\n').filter((f) => f.endsWith('.img')), ['disk1.img', 'disk2.img', 'disk3.img']);

    const second = startCluster();
    t.is(await second.exited, 1);
    t.regex(second.output(), /a local cluster is already running \(pid \d+/);
  } finally {
    run.child.kill('SIGINT');
  }
  t.is(await run.exited, 0);
  t.regex(run.output(), /torn down: no namespace, cgroup, mount or changed kernel setting left\./);
  await assertNothingLeft(t);
});

test.serial('Ctrl-C while the nodes start tears down what was made so far', async (t) => {
  t.timeout(20 * 60_000);
  const run = startCluster();
  await waitForOutput(run, 'image localhost/nodedisks-pause', 15 * 60_000);
  await new Promise((r) => setTimeout(r, 10_000)); // the control plane and some nodes are starting
  run.child.kill('SIGINT');
  t.is(await run.exited, 0);
  t.regex(run.output(), /torn down: no namespace, cgroup, mount or changed kernel setting left\./);
  await assertNothingLeft(t);
});

test.serial('after a crash, the next start cleans up first', async (t) => {
  t.timeout(20 * 60_000);
  const crashed = startCluster();
  await waitForOutput(crashed, 'Ctrl-C here stops it', 15 * 60_000);
  crashed.child.kill('SIGKILL');
  await crashed.exited;
  t.notDeepEqual(await leftovers(before), []); // containers and namespaces outlive a killed cluster

  const next = startCluster();
  try {
    await waitForOutput(next, 'cleaning up after a local cluster that did not stop', 60_000);
    await waitForOutput(next, 'Ctrl-C here stops it', 15 * 60_000);
  } finally {
    next.child.kill('SIGINT');
  }
  t.is(await next.exited, 0);
  await assertNothingLeft(t);
});
