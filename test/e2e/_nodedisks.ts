// What the e2e files ask of a running local cluster about NodeDisks: kubectl through its kubeconfig, the
// seed's one-line check, the markers on each node (through cluster:ssh), the reservations every pod
// restart or helm operation must keep, and reserve/release by the seed's label, each waiting until the
// controller and the agent have done their part.
import type { TestFn } from 'ava';
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { sh } from '../../hack/cluster/host.ts';
import { clusterEnv, collectPodLogs, keepLogs, onNode, type Run, startCluster, UP, until, waitForOutput } from '../../hack/cluster/run.ts';
import { DISK_DIR, NODE_NAMES } from '../../hack/cluster/topology.ts';
import { ensureBinaries } from '../../hack/controlplane/binaries.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

export const NS = 'node-disks-system';
export const LABEL = 'localtest.example.com/auto-reserve';
export const FINALIZER = 'localtest.example.com/reservation-protection';
export const MINUTES = 60_000;
/** Where `npm run build` puts the plugin's executables. */
export const PLUGIN_BIN = join(REPO_ROOT, 'dist', 'bin');

export interface PodInfo {
  name: string;
  uid: string;
  node: string;
  /** The Ready condition's status, followed by the deletion timestamp of a pod being deleted. */
  ready: string;
}

/** The helpers for the cluster of `dataDir`/`env` (clusterEnv()); `kubectl()` gives the binary once the tests' before hook has it. */
export function nodeDisksE2E(dataDir: string, env: NodeJS.ProcessEnv, kubectl: () => string) {
  const k = (args: string[], timeoutMs = 120_000) => sh(kubectl(), [`--kubeconfig=${join(dataDir, 'kubeconfig')}`, ...args], { timeoutMs });
  const ndName = (node: string, disk: string) => `node-disk-${node}-${disk}`;
  /** The seed's check: desired state, owner, phase, capacity on one line. */
  const seedLine = (nd: string) => k(['get', 'nodedisk', nd, '-o', 'jsonpath={.spec.desired.state} {.spec.desired.owner} {.status.node.phase} {.status.node.capacityBytes}']);
  const markers = async (node: string) =>
    (await onNode(env, node, ['ls', '-1', DISK_DIR]))
      .split('\n')
      .filter((f) => f.endsWith('.reserved'))
      .sort();
  const allMarkers = async () => Object.fromEntries(await Promise.all(NODE_NAMES.map(async (n) => [n, await markers(n)] as const)));

  /** name → "desired owner phase finalizers" of every NodeDisk: what must survive the pods' restarts. */
  async function reservations(): Promise<Record<string, string>> {
    const out = await k([
      'get',
      'nodedisks',
      '-o',
      'jsonpath={range .items[*]}{.metadata.name}={.spec.desired.state} {.spec.desired.owner} {.status.node.phase} {.metadata.finalizers}{"\\n"}{end}',
    ]);
    return Object.fromEntries(
      out
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split('=') as [string, string]),
    );
  }

  async function reserve(node: string, disk: string): Promise<void> {
    await k(['label', 'nodedisk', ndName(node, disk), `${LABEL}=true`, '--overwrite']);
    await until(
      `${ndName(node, disk)} is reserved`,
      3 * MINUTES,
      () => seedLine(ndName(node, disk)),
      (l) => l === 'Reserved auto Reserved 67108864',
    );
    await until(
      `the marker of ${disk} is on ${node}`,
      2 * MINUTES,
      () => markers(node),
      (m) => m.includes(`${disk}.img.reserved`),
    );
  }

  async function release(node: string, disk: string): Promise<void> {
    await k(['label', 'nodedisk', ndName(node, disk), `${LABEL}-`]);
    await until(
      `${ndName(node, disk)} is available`,
      3 * MINUTES,
      () => seedLine(ndName(node, disk)),
      (l) => l === 'Available  Available 67108864',
    );
    await until(
      `the marker of ${disk} is gone from ${node}`,
      2 * MINUTES,
      () => markers(node),
      (m) => !m.includes(`${disk}.img.reserved`),
    );
  }

  /** The pods of one workload (app.kubernetes.io/name). */
  async function pods(app: string): Promise<PodInfo[]> {
    const out = await k([
      '-n',
      NS,
      'get',
      'pods',
      '-l',
      `app.kubernetes.io/name=${app}`,
      '-o',
      'jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status}{.metadata.deletionTimestamp}{"\\n"}{end}',
    ]);
    return out
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const [name = '', uid = '', node = '', ready = ''] = l.split(' ');
        return { name, uid, node, ready };
      });
  }

  return { k, ndName, seedLine, markers, allMarkers, reservations, reserve, release, pods };
}

/**
 * One local cluster for the calling test file (`args` as `npm run cluster` takes them): started in a before
 * hook, interrupted and its data dir removed after the file, whatever happened. `run()` and `kubectl()` are
 * set once the before hook has run. Call it after the file's last await: it declares hooks.
 */
export function clusterForFile(test: TestFn, args: string[] = []) {
  const { dataDir, env } = clusterEnv();
  let run: Run | undefined;
  let kubectl = '';
  let failed = false;
  test.before(async () => {
    kubectl = (await ensureBinaries()).kubectl;
    run = startCluster(env, args);
    // Cold, this builds kubelet & co. first (~16 minutes on a loaded 2-core machine).
    await waitForOutput(run, UP, 40 * MINUTES).catch((err: unknown) => {
      // A cluster that did not come up is a failure no test's afterEach sees.
      failed = true;
      throw err;
    });
  });
  test.afterEach.always((t) => {
    if (!t.passed) failed = true;
  });
  test.after.always(async () => {
    // A failed file's logs outlive its cluster: CI runs on a fresh clone that is gone afterwards, and the
    // next person has nothing else to go on.
    if (failed) collectPodLogs(dataDir);
    if (run && run.child.exitCode === null) {
      run.child.kill('SIGINT');
      await run.exited;
    }
    if (failed) keepLogs(dataDir, basename(test.meta.file).replace(/\.test\.ts$/, ''));
    rmSync(dataDir, { recursive: true, force: true });
  });
  return { dataDir, env, run: () => run, kubectl: () => kubectl };
}

/** `kubectl nodedisks …` as a person types it: the plugin from this checkout's build first on PATH. */
export function runPlugin(kubectl: string, kubeconfig: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(kubectl, ['nodedisks', ...args], { env: { ...process.env, PATH: `${PLUGIN_BIN}:${process.env.PATH}`, KUBECONFIG: kubeconfig }, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}
