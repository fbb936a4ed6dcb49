// `sudo npm run test:storage [-- --focus=REGEX] [--out=DIR] [--drives]`: Kubernetes' own external storage suites
// (e2e.test with testdriver.yaml beside this file) against NodeDisks on a local cluster of three kubelets
// started for the run and torn down after it. e2e.test and agnhost are built and busybox fetched once per
// machine, the test images made from them at each run (hack/e2e-storage); nothing is pulled. --focus narrows the specs further (the e2e test runs a subset);
// the ginkgo JSON report, its summary (summary.json) and e2e.test's output stay in --out (default: a temp
// dir, named at the end). --drives runs them against a class of drives instead of disk images: each node
// gets stand-in drives of the same sizes (hack/cluster/stand-in-drives.ts) and no images, every drive is
// wiped once (a drive never wiped by NodeDisks holds data), and the test driver's class is DRIVE_CLASS.
// Exit 0 only when no spec failed and at least one passed.
import { spawn } from 'node:child_process';
import { cpSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { dump, load } from 'js-yaml';
import { sh } from '../cluster/host.ts';
import { writeArchive } from '../cluster/oci.ts';
import { clusterEnv, seedNodeUniqueDisks, startCluster, until, UP, waitForOutput } from '../cluster/run.ts';
import { attachStandInDrives, detachStandInDrives, type StandInDrive } from '../cluster/stand-in-drives.ts';
import { NODE_NAMES } from '../cluster/topology.ts';
import { ensureBinaries } from '../controlplane/binaries.ts';
import { ensureE2eBinaries } from './e2e-test.ts';
import { buildE2eImages, e2eImages, REPO_LIST } from './images.ts';
import { REPO_ROOT } from '../lib/paths.ts';
import { formatSummary, readSummary, type Summary } from './report.ts';
import { DRIVER, FOCUS, SKIP } from './selection.ts';

const MiB = 2 ** 20;
/**
 * Each node's disks: a spec holds at most two volumes on one node, and a released disk is wiped before
 * reuse; four small ones, and two of the 300 MiB and more mkfs.xfs needs (the xfs specs' volumes go to
 * those, the others to the smallest that fits). Sparse: they cost nothing until written.
 */
const DISK_SIZES = [64 * MiB, 64 * MiB, 64 * MiB, 64 * MiB, 320 * MiB, 320 * MiB];

export interface StorageRunOptions {
  /** Narrows the specs further: ANDed with the driver's focus. */
  focus?: string;
  /** Where the report and the log go. */
  out: string;
  log?: (line: string) => void;
  /** Copy e2e.test's output to stdout as it comes (the command does; the e2e test keeps it in the log only). */
  echo?: boolean;
  /** Against stand-in drives through DRIVE_CLASS, with no disk images on the nodes. */
  drives?: boolean;
}

/** The class of the --drives run: the stand-in drives' media (loop devices are ssd or hdd, by their sysfs). */
export const DRIVE_CLASS = {
  apiVersion: 'storage.k8s.io/v1',
  kind: 'StorageClass',
  metadata: { name: 'nodedisks-drives' },
  provisioner: DRIVER,
  volumeBindingMode: 'WaitForFirstConsumer',
  reclaimPolicy: 'Delete',
  parameters: { 'csi.storage.k8s.io/fstype': 'ext4', diskSelector: 'localtest.example.com/media in (nvme,ssd,hdd)' },
};

/** testdriver.yaml with its class swapped for DRIVE_CLASS: the same driver and capabilities otherwise. */
export function driveTestDriver(): string {
  const base = load(readFileSync(join(REPO_ROOT, 'hack', 'e2e-storage', 'testdriver.yaml'), 'utf8')) as { StorageClass: Record<string, string> };
  return dump({ ...base, StorageClass: { FromExistingClassName: DRIVE_CLASS.metadata.name } });
}

/**
 * The run's --ginkgo.focus: every spec of the driver, narrowed by `extra`. ginkgo reads it as RE2 and the
 * summary as JavaScript, so one that JavaScript cannot read is refused, before anything is built.
 */
export function storageFocus(extra?: string): string {
  const focus = extra ? `${FOCUS}.*(${extra})` : FOCUS;
  try {
    new RegExp(focus);
  } catch (err) {
    throw new Error(`--focus ${JSON.stringify(extra)} is not a regular expression this runner reads (RE2 and JavaScript alike, no inline flags): ${(err as Error).message}`);
  }
  return focus;
}

/** Runs the suites on a fresh local cluster; returns their summary (throws if the run itself broke). */
export async function runStorageSuites(o: StorageRunOptions): Promise<Summary & { drivesWipedAfterUse?: number }> {
  const say = o.log ?? ((l: string) => console.log(l));
  const focus = storageFocus(o.focus);
  mkdirSync(o.out, { recursive: true });
  const { e2eTest, agnhost } = await ensureE2eBinaries(say);
  const kubectl = (await ensureBinaries(say)).kubectl;
  const repoList = join(o.out, 'repo-list.yaml');
  writeFileSync(repoList, dump(REPO_LIST));
  const images = await buildE2eImages(await e2eImages(e2eTest, repoList), agnhost);
  const archives: string[] = [];
  for (const img of images) {
    const f = join(o.out, `${img.name.replace(/[/:]/g, '_')}.tar`);
    await writeArchive(img, f);
    archives.push(f);
  }

  const { dataDir, env } = clusterEnv();
  const kubeconfig = join(dataDir, 'kubeconfig');
  const k = (args: string[]) => sh(kubectl, [`--kubeconfig=${kubeconfig}`, ...args], { timeoutMs: 120_000 });
  say(`starting a local cluster in ${dataDir} (1–2 minutes)`);
  let passed = false;
  const drives: StandInDrive[] = [];
  const run = startCluster(env);
  try {
    await waitForOutput(run, UP, 40 * 60_000);
    const all = DISK_SIZES.length * NODE_NAMES.length;
    const free = async (prefix: string) =>
      (await k(['get', 'nodedisks', '-o', 'jsonpath={range .items[*]}{.spec.desired.state}/{.status.node.phase}/{.status.node.holdsData}/{.metadata.name}{"\\n"}{end}']))
        .split('\n')
        .filter((l) => /^Available\/Available\/(false)?\//.test(l) && l.includes(prefix)).length;
    let testDriver = join(REPO_ROOT, 'hack', 'e2e-storage', 'testdriver.yaml');
    if (o.drives) {
      seedNodeUniqueDisks(dataDir, []);
      drives.push(...attachStandInDrives(dataDir, DISK_SIZES, 1));
      await until(
        `${all} drives found`,
        600_000,
        () => k(['get', 'nodedisks', '-o', 'name']),
        (l) => drives.every((d) => l.includes(`/${d.nodeDisk}`)),
      );
      // Taking over a drive is an explicit wipe (docs/drives.md); until then it holds data and backs no PV.
      for (const d of drives) await k(['patch', 'nodedisk', d.nodeDisk, '--type=merge', '-p', '{"spec":{"desired":{"wipe":"storage-suites"}}}']);
      await until(
        `${all} drives wiped and Available`,
        600_000,
        () => free('-drive-'),
        (n) => n === all,
      );
      const classFile = join(o.out, 'drive-class.json');
      writeFileSync(classFile, JSON.stringify(DRIVE_CLASS));
      await k(['apply', '-f', classFile]);
      testDriver = join(o.out, 'testdriver-drives.yaml');
      writeFileSync(testDriver, driveTestDriver());
    } else {
      seedNodeUniqueDisks(dataDir, DISK_SIZES);
      await until(
        `${all} disks Available`,
        600_000,
        () => free('-'),
        (n) => n === all,
      );
    }
    for (const node of NODE_NAMES) {
      const socket = join(dataDir, 'nodes', node.slice(node.lastIndexOf('-') + 1), 'run-containerd', 'containerd.sock');
      for (const f of archives) await sh('ctr', ['--address', socket, '-n', 'k8s.io', 'images', 'import', '--no-unpack', f], { timeoutMs: 300_000 });
    }
    say(`imported ${images.map((i) => i.name).join(', ')} into ${NODE_NAMES.length} nodes; ${all} disks Available`);

    const report = join(o.out, 'report.json');
    const args = [
      `--kubeconfig=${kubeconfig}`,
      '--provider=skeleton',
      '--node-os-distro=debian',
      `--kubectl-path=${kubectl}`,
      `--storage.testdriver=${testDriver}`,
      `--ginkgo.focus=${focus}`,
      `--ginkgo.skip=${SKIP}`,
      '--ginkgo.timeout=4h',
      '--ginkgo.no-color',
      `--ginkgo.json-report=${report}`,
      // No log dump: the framework's would SSH to the nodes.
      '--disable-log-dump',
      '--allowed-not-ready-nodes=0',
      '--node-schedulable-timeout=5m',
      '--system-pods-startup-timeout=3m',
    ];
    say(`e2e.test ${args.join(' ')}`);
    const logFile = join(o.out, 'e2e.log');
    const logStream = createWriteStream(logFile);
    const code = await new Promise<number | null>((done, fail) => {
      const child = spawn(e2eTest, args, {
        cwd: o.out,
        // KUBE_SSH_KEY_PATH names no file, so the specs that need SSH skip instead of trying a key of this host's.
        env: { ...process.env, KUBECONFIG: kubeconfig, KUBE_TEST_REPO_LIST: repoList, KUBE_SSH_KEY_PATH: '/nonexistent' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      for (const s of [child.stdout, child.stderr]) {
        s.on('data', (b: Buffer) => {
          logStream.write(b);
          if (o.echo !== false) process.stdout.write(b);
        });
      }
      child.on('error', fail);
      child.on('exit', (c) => done(c));
    });
    await new Promise((r) => logStream.end(r));
    let summary: Summary;
    try {
      summary = readSummary(report, focus);
    } catch (err) {
      throw new Error(`e2e.test exited ${code} and wrote no readable report ${report} (${(err as Error).message}); its output is in ${logFile}`);
    }
    writeFileSync(join(o.out, 'summary.json'), `${JSON.stringify({ focus, exitCode: code, ...summary }, null, 2)}\n`);
    say(formatSummary(summary));
    passed = summary.failed === 0;
    if (o.drives) {
      // A drive that backed a deleted PV was wiped again for the next spec, under another request than ours.
      const wiped = await k(['get', 'nodedisks', '-o', 'jsonpath={range .items[*]}{.metadata.name}={.status.node.wipedFor}{"\\n"}{end}']);
      const reused = wiped.split('\n').filter((l) => l.includes('-drive-') && !l.endsWith('=storage-suites')).length;
      say(`${reused} of ${all} drives backed a volume and were wiped after it`);
      return { ...summary, drivesWipedAfterUse: reused };
    }
    return summary;
  } finally {
    run.child.kill('SIGINT');
    const exit = await run.exited;
    detachStandInDrives(drives);
    // A failed run keeps the cluster's logs (control plane, kubelets, containers) beside its report.
    if (!passed && existsSync(join(dataDir, 'logs'))) cpSync(join(dataDir, 'logs'), join(o.out, 'cluster-logs'), { recursive: true, force: true });
    say(`local cluster stopped (exit ${exit})${passed ? '' : `; its logs are in ${join(o.out, 'cluster-logs')}`}`);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { focus: { type: 'string' }, out: { type: 'string' }, drives: { type: 'boolean' } } });
  if (process.getuid?.() !== 0) {
    console.error('error: the storage suites run on the local cluster, which needs root: sudo npm run test:storage');
    process.exit(2);
  }
  const out = values.out ? resolve(values.out) : mkdtempSync(join(tmpdir(), 'nodedisks-storage-'));
  try {
    const s = await runStorageSuites({ out, drives: values.drives === true, ...(values.focus ? { focus: values.focus } : {}) });
    console.log(`report and log in ${out}`);
    process.exit(s.failed === 0 && s.passed > 0 ? 0 : 1);
  } catch (err) {
    console.error(`error: ${(err as Error).message}`);
    console.error(`what the run left is in ${out}`);
    process.exit(1);
  }
}
