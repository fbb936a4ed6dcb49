// A disk that fails under a volume, end to end on the real paths: a disk image on a FUSE file that fails
// writes on command (hack/faultydisk), staged and published by the CSI node side's own functions (a loop
// device, ext4), the real agent and controller on a real control plane. The agent reports what the kernel
// saw (status.node.health), the controller the Healthy condition; the failure outlives its evidence (the
// volume unstaged, the disk wiped), tells the claim that held it, keeps the next claim from getting the disk,
// fires the shipped alert in a real Prometheus scraping the agent, and ends when a person uncordons it with
// the real plugin. Root only: FUSE, loop
// devices, mounts.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { NodeDiskClaimClient } from '../../api/claim-client.ts';
import { ANNOTATION_HEALTH_REVIEWED, API_VERSION, CLAIM_KIND, CONDITION, DEFAULT_SYSTEM_NAMESPACE } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { holderOf } from '../../controller/failing-disk-events.ts';
import { openImage, publish, stage, unpublish, unstage } from '../../csi/node-volumes.ts';
import { ensureFaultyDisk, FaultyDisk } from '../../hack/faultydisk/faultydisk.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { Prometheus } from '../../hack/promtool/prometheus.ts';
import { shippedRuleGroups, withShortFor } from '../../hack/promtool/rules.ts';
import { execResult } from '../harness/exec.ts';
import { nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const run = promisify(execFile);
const MiB = 2 ** 20;
const NODE = 'health-n1';
const NS = 'health-a';
const DISK = nodeDiskName(NODE, 'failing-1');
const BIN = join(REPO_ROOT, 'dist', 'bin');
const disks = () => nodeDisksFor(controlPlane().admin());
const claims = () => new NodeDiskClaimClient(disks().rest);
const healthOf = async () => (await disks().get(DISK)).status?.node?.health;
const healthyCondition = (nd: NodeDisk) => nd.status?.conditions?.find((c) => c.type === CONDITION.healthy);

let work = '';
const programs: Program[] = [];
/** Undone last first, whatever a test got to. */
const cleanups: (() => Promise<unknown>)[] = [];

test.serial.before(async () => {
  if (process.getuid?.() !== 0) throw new Error('disk health needs root (FUSE, loop devices, mounts): run the integration tests as root, as .ci/run does');
  const bin = await ensureFaultyDisk();
  work = await mkdtemp(join(tmpdir(), 'nodedisks-health-'));
  const diskDir = join(work, 'disks');
  const fuse = join(work, 'fuse');
  await mkdir(diskDir, { recursive: true });
  await mkdir(fuse);
  await run('truncate', ['-s', String(64 * MiB), join(work, 'backing')]);
  const disk = await FaultyDisk.serve(bin, join(work, 'backing'), fuse);
  cleanups.push(() => disk.close());
  faulty = disk;
  // The failing file where the agent and the node side look for the disk's image.
  const imagePath = join(diskDir, 'failing-1.img');
  await writeFile(imagePath, '');
  await run('mount', ['--bind', disk.path, imagePath]);
  cleanups.push(() => run('umount', [imagePath]));
  programs.push(await startController(controlPlane(), { logDir: join(work, 'logs') }));
  const agent = await startAgent(controlPlane(), { node: NODE, diskDir, logDir: join(work, 'logs'), rescanInterval: '1s' });
  programs.push(agent);
  const port = await eventually("the agent's http port", async () => Number(/"httpPort":(\d+)/.exec(agent.logsOfThisRun())?.[1]) || undefined, 30_000);
  // The shipped rules with short for: durations, the target labelled as the PodMonitor labels an agent.
  prom = await Prometheus.start({
    groups: withShortFor(shippedRuleGroups()),
    jobs: [{ job: 'node-disks-agent', targets: [{ address: `127.0.0.1:${port}`, labels: { namespace: DEFAULT_SYSTEM_NAMESPACE, pod: `node-disks-agent-${NODE}`, node: NODE } }] }],
  });
  await eventually(
    'the disk Available',
    async () =>
      (
        await disks()
          .get(DISK)
          .catch(() => undefined)
      )?.status?.node?.phase === 'Available',
    30_000,
  );
  await controlPlane().kubectl(controlPlane().admin(), ['create', 'namespace', NS]);
  dirs = { diskDir, image: await openImage(diskDir, 'failing-1') };
});
let faulty: FaultyDisk;
let dirs: { diskDir: string; image: string };
let prom: Prometheus | undefined;
/** The shipped alert for the node, when it fires. */
const failingAlert = async () => (await prom!.alerts()).find((a) => a.labels.alertname === 'NodeDisksDiskFailing' && a.labels.node === NODE && a.state === 'firing');

test.afterEach.always((t) => {
  if (!t.passed) for (const p of programs) console.error(`----- ${p.name} -----\n${p.logs(4000)}`);
});
test.after.always(async () => {
  await prom?.stop();
  for (const undo of cleanups.splice(0).reverse()) await undo().catch(() => undefined);
  await Promise.all(programs.map((p) => p.stop()));
  if (work) await rm(work, { recursive: true, force: true });
});

interface EventList {
  items: { reason?: string; type?: string; note?: string; regarding?: { kind?: string; name?: string; namespace?: string }; related?: { name?: string } }[];
}
const claimBody = (name: string) => ({ apiVersion: API_VERSION, kind: CLAIM_KIND, metadata: { name, namespace: NS }, spec: { diskName: DISK } }) as const;
const claimIn = async (name: string, phase: string) => {
  const c = await claims().get(NS, name);
  return c.status?.phase === phase ? c : undefined;
};

test.serial("writes failing under a claim's volume: Healthy=False, a Warning on the claim, the alert; kept after the volume goes, handed to no claim until a person uncordons it", async (t) => {
  // The team's claim holds the disk; the volume is staged from it as the node side stages one.
  await claims().create(claimBody('db'), { fieldManager: 'nodedisks-test' });
  await eventually('the claim Bound', () => claimIn('db', 'Bound'), 30_000);
  const stagingPath = join(work, 'staging');
  const targetPath = join(work, 'target');
  await mkdir(stagingPath);
  await stage({ image: dirs.image, stagingPath, mode: 'filesystem', fsType: 'ext4' });
  cleanups.push(() => unstage({ stagingPath, diskDir: dirs.diskDir, image: dirs.image }));
  await publish({ stagingPath, targetPath, mode: 'filesystem', image: dirs.image });
  cleanups.push(() => unpublish(targetPath));
  await writeFile(join(targetPath, 'before'), 'written while the disk was healthy');
  t.is(await healthOf(), undefined, 'a disk nothing failed on has no health report');

  await faulty.set('fail writes');
  const fh = await open(join(targetPath, 'after'), 'w');
  await fh.write(Buffer.alloc(256 * 1024, 1));
  await fh.sync().catch(() => undefined);
  await fh.close().catch(() => undefined);
  await run('sync', ['-f', targetPath]).catch(() => undefined);

  const failed = await eventually('the agent reports the disk failing', async () => ((await healthOf())?.status === 'False' ? await healthOf() : undefined), 30_000);
  t.is(failed?.reason, 'FilesystemErrors');
  t.regex(failed?.message ?? '', /^ext4 on the volume staged from it \(loop\d+\) has recorded \d+ errors? since it was last checked; it is not handed out until a person checks it/);
  const cond = await eventually('the controller says Healthy=False', async () => healthyCondition(await disks().get(DISK)), 30_000);
  t.like(cond, { status: 'False', reason: 'FilesystemErrors', message: failed?.message });
  // The team hears of it on its own claim, in its namespace.
  const told = await eventually(
    'a DiskFailing Warning on the claim',
    async () =>
      (await restFor(controlPlane().admin()).request<EventList>('GET', `/apis/events.k8s.io/v1/namespaces/${NS}/events`)).items.find(
        (e) => e.reason === 'DiskFailing' && e.regarding?.name === 'db',
      ),
    30_000,
  );
  t.like(told, { type: 'Warning', regarding: { kind: CLAIM_KIND, namespace: NS }, related: { name: DISK } });
  t.is(told.note, `its disk ${DISK} on node ${NODE} is failing: ${failed?.message}`);
  const alert = await eventually('NodeDisksDiskFailing firing for the node', failingAlert, 60_000, 250);
  t.like(alert.labels, { severity: 'critical', pod: `node-disks-agent-${NODE}` });

  // The volume goes, and with it the kernel's evidence; the claim goes, and its disk is wiped: the failure stays.
  await faulty.set('heal');
  await unpublish(targetPath);
  await unstage({ stagingPath, diskDir: dirs.diskDir, image: dirs.image });
  await claims().delete(NS, 'db');
  await eventually(
    'the disk released and wiped',
    async () => {
      const nd = await disks().get(DISK);
      return nd.spec.desired?.state === 'Available' && nd.status?.node?.phase === 'Available' && nd.spec.desired.wipe !== undefined && nd.status.node.wipedFor === nd.spec.desired.wipe;
    },
    30_000,
  );
  await claims().create(claimBody('db2'), { fieldManager: 'nodedisks-test' });
  const pending = await eventually('the next claim Pending', () => claimIn('db2', 'Pending'), 30_000);
  t.is(pending.status?.diskName, undefined);
  t.like(await healthOf(), { status: 'False', since: failed?.since }, 'still failing after its volume was unstaged and the disk wiped');

  const plugin = await execResult('kubectl', ['nodedisks', 'uncordon', DISK], { env: { PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig } });
  t.is(plugin.code, 0, plugin.stderr);
  t.is(plugin.stdout, `nodedisk.localtest.example.com/${DISK} uncordoned (its failure marked checked)\n`);
  // Marked checked as of the failure's own start, by the node's clock, not the person's.
  t.is((await disks().get(DISK)).metadata.annotations?.[ANNOTATION_HEALTH_REVIEWED], failed?.since);
  const bound = await eventually('the next claim Bound to the disk', () => claimIn('db2', 'Bound'), 30_000);
  t.is(bound.status?.diskName, DISK);
  await eventually('the failure dropped from the report and the condition', async () => {
    const nd = await disks().get(DISK);
    return nd.status?.node?.health === undefined && healthyCondition(nd) === undefined;
  });
  await eventually('the alert cleared', async () => (await failingAlert()) === undefined, 60_000, 250);
});

test.serial("the controller, with its own rights, finds the PVC of a volume's disk through the PV, and no other claim", async (t) => {
  const admin = restFor(controlPlane().admin());
  const uid = '8f0c5b9e-1d2a-4c3b-9e8f-7a6b5c4d3e2f';
  const pv = `pvc-${uid}`;
  await admin.request('POST', '/api/v1/persistentvolumes', {
    body: {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: pv },
      spec: {
        capacity: { storage: '64Mi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Delete',
        claimRef: { namespace: NS, name: 'data-0', uid },
        csi: { driver: 'nodedisks.localtest.example.com', volumeHandle: `${DISK}/${pv}` },
      },
    },
  });
  t.teardown(() => admin.request('DELETE', `/api/v1/persistentvolumes/${pv}`).catch(() => undefined));
  const controller = restFor(await controlPlane().controller());
  const reserved = (owner: string, ownerUID: string): NodeDisk => ({ ...newNodeDisk(NODE, 'x'), spec: { ...newNodeDisk(NODE, 'x').spec, desired: { state: 'Reserved', owner, ownerUID } } });
  t.deepEqual(await holderOf(reserved(`pv:${pv}`, uid), controller), { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: NS, name: 'data-0', uid });
  // A PV bound to another claim (another UID) than the reservation names: nobody is told.
  t.is(await holderOf(reserved(`pv:${pv}`, '00000000-0000-4000-8000-000000000000'), controller), undefined);
  // Another person's reservation has no team object to tell.
  t.is(await holderOf(reserved('alice', ''), controller), undefined);
});
