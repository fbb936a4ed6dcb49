// A disk that fails under a volume, end to end on the real paths: a disk image on a FUSE file that fails
// writes on command (hack/faultydisk), staged and published by the CSI node side's own functions (a loop
// device, ext4), the real agent and controller on a real control plane. The agent reports what the kernel
// saw (status.node.health), the controller the Healthy condition; the failure outlives its evidence (the
// volume unstaged), keeps a claim from getting the disk, and ends when a person uncordons it with the real
// plugin. Root only: FUSE, loop devices, mounts.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { NodeDiskClaimClient } from '../../api/claim-client.ts';
import { ANNOTATION_HEALTH_REVIEWED, API_VERSION, CLAIM_KIND, CONDITION } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { openImage, publish, stage, unpublish, unstage } from '../../csi/node-volumes.ts';
import { ensureFaultyDisk, FaultyDisk } from '../../hack/faultydisk/faultydisk.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { execResult } from '../harness/exec.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

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
  programs.push(await startAgent(controlPlane(), { node: NODE, diskDir, logDir: join(work, 'logs'), rescanInterval: '1s' }));
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

test.afterEach.always((t) => {
  if (!t.passed) for (const p of programs) console.error(`----- ${p.name} -----\n${p.logs(4000)}`);
});
test.after.always(async () => {
  for (const undo of cleanups.splice(0).reverse()) await undo().catch(() => undefined);
  await Promise.all(programs.map((p) => p.stop()));
  if (work) await rm(work, { recursive: true, force: true });
});

test.serial('writes failing under a volume make its disk Healthy=False, kept after the volume goes, handed to no claim until a person uncordons it', async (t) => {
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

  // The volume goes, and with it the kernel's evidence: the failure stays.
  await faulty.set('heal');
  await unpublish(targetPath);
  await unstage({ stagingPath, diskDir: dirs.diskDir, image: dirs.image });
  const claim = {
    apiVersion: API_VERSION,
    kind: CLAIM_KIND,
    metadata: { name: 'db', namespace: NS },
    spec: { diskName: DISK },
  } as const;
  await claims().create(claim, { fieldManager: 'nodedisks-test' });
  const pending = await eventually('the claim Pending', async () => ((await claims().get(NS, 'db')).status?.phase === 'Pending' ? await claims().get(NS, 'db') : undefined), 30_000);
  t.is(pending.status?.diskName, undefined);
  t.like(await healthOf(), { status: 'False', since: failed?.since }, 'still failing after its volume was unstaged');

  const plugin = await execResult('kubectl', ['nodedisks', 'uncordon', DISK], { env: { PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig } });
  t.is(plugin.code, 0, plugin.stderr);
  t.is(plugin.stdout, `nodedisk.localtest.example.com/${DISK} uncordoned (its failure marked checked)\n`);
  t.truthy((await disks().get(DISK)).metadata.annotations?.[ANNOTATION_HEALTH_REVIEWED]);
  const bound = await eventually('the claim Bound to the disk', async () => ((await claims().get(NS, 'db')).status?.phase === 'Bound' ? await claims().get(NS, 'db') : undefined), 30_000);
  t.is(bound.status?.diskName, DISK);
  await eventually('the failure dropped from the report and the condition', async () => {
    const nd = await disks().get(DISK);
    return nd.status?.node?.health === undefined && healthyCondition(nd) === undefined;
  });
});
