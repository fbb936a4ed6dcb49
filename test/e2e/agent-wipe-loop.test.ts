// The agent does not wipe a disk image that a loop device still serves (root only; `npm run test:e2e`, no
// cluster needed): with real loop devices and the real sysfs, a released disk whose wipe is asked for
// stays held, phase Wiping naming the device, while the CSI node side has the volume staged (also when
// the node side's container is gone since), and is wiped at the first reconcile after the device is
// detached; another node's device over a file of the same path holds nothing. The agent's reconcile runs against a fake API server; the disk
// dir, the loop devices and the mounts are real.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, open, readFile, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { discover } from '../../agent/discover.ts';
import { markerName } from '../../agent/markers.ts';
import { agentMetrics } from '../../agent/metrics.ts';
import { type DiskCache, type ReconcileContext, reconcileDisk } from '../../agent/reconcile-disk.ts';
import { FINALIZER } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { openImage, stage, unstage } from '../../csi/node-volumes.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { loopBackingFiles, otherNodesDevice, requireRoot, rootTempDir } from './_root-node.ts';

const NODE = 'node-a';
const SECRET = 'team-x secret bytes';
const MiB = 2 ** 20;

test.before(() => requireRoot());

/** A released disk with its wipe asked for (`wipe`), its marker on the node, and an agent's reconcile of it. */
async function releasedDisk(dir: string, diskID: string, wipe: string) {
  const diskDir = join(dir, 'disks');
  await mkdir(diskDir, { recursive: true });
  const image = join(diskDir, `${diskID}.img`);
  await writeFile(image, '');
  await truncate(image, 16 * MiB);
  const fh = await open(image, 'r+');
  await fh.write(Buffer.from(SECRET), 0, SECRET.length, 3 * MiB);
  await fh.close();
  await writeFile(join(diskDir, markerName(diskID)), 'reserved\n');
  const name = nodeDiskName(NODE, diskID);
  let stored: NodeDisk = {
    apiVersion: 'localtest.example.com/v1alpha1',
    kind: 'NodeDisk',
    metadata: { name, resourceVersion: '1', finalizers: [FINALIZER] },
    spec: { nodeName: NODE, diskID, path: image, desired: { state: 'Available', wipe } },
  };
  let statusWrites = 0;
  let rv = 1;
  const client: ReconcileContext['client'] = {
    get: async () => structuredClone(stored),
    create: async (nd) => nd,
    applyStatus: async (body) => {
      statusWrites++;
      stored = { ...stored, metadata: { ...stored.metadata, resourceVersion: String(++rv) }, status: body.status };
      return structuredClone(stored);
    },
    mergePatch: async (_name, patch) => {
      const finalizers = (patch as { metadata: { finalizers: string[] | null } }).metadata.finalizers;
      stored = { ...stored, metadata: { ...stored.metadata, resourceVersion: String(++rv), finalizers: finalizers ?? undefined } };
      return structuredClone(stored);
    },
  };
  const cache: DiskCache = {
    get: () => stored,
    storeOwnWrite: (nd) => (stored = nd),
    forget: () => {},
    values: () => [stored],
  };
  const logs: string[] = [];
  const ctx: ReconcileContext = {
    client,
    nodeName: NODE,
    diskDir,
    hostDiskDir: diskDir,
    cache,
    log: createLogger('test', { write: (l) => logs.push(l) }),
    metrics: agentMetrics(),
    actionErrors: new Map(),
    reportAliases: async () => {},
    // sysBlockDir left out: the real /sys/block.
  };
  return {
    diskDir,
    image,
    reconcile: async () => reconcileDisk(ctx, diskID, await discover(diskDir, NODE)),
    node: () => stored.status?.node,
    statusWrites: () => statusWrites,
    marker: join(diskDir, markerName(diskID)),
    holdsSecret: async () => (await readFile(image)).includes(SECRET),
  };
}

test('a disk staged by the CSI node side is not wiped until it is unstaged, then it is', async (t) => {
  const dir = await rootTempDir(t, 'nodedisks-agent-loop-');
  const d = await releasedDisk(dir, 'disk1', 'pv-1234');
  const staging = join(dir, 'globalmount');
  const { device } = await stage({ image: await openImage(d.diskDir, 'disk1'), stagingPath: staging, mode: 'block' });

  await d.reconcile();
  t.is(d.node()?.phase, 'Wiping');
  t.regex(d.node()?.message ?? '', new RegExp(`^waiting to wipe the disk image \\(wipe request pv-1234\\): it is attached to loop device ${device} `));
  t.true(await d.holdsSecret(), 'the image was wiped while a loop device served it');
  t.true(existsSync(d.marker));
  await d.reconcile();
  t.is(d.statusWrites(), 1, 'the wait was written again at a rescan');

  await unstage({ stagingPath: staging, diskDir: d.diskDir, image: d.image });
  await d.reconcile();
  t.is(d.node()?.phase, 'Available');
  t.is(d.node()?.wipedFor, 'pv-1234');
  t.false(await d.holdsSecret());
  t.false(existsSync(d.marker));
});

test('a volume staged by a node side whose container is gone (the kernel names the file /disk2.img) holds the wipe by its record until its device is detached', async (t) => {
  const dir = await rootTempDir(t, 'nodedisks-agent-loop-');
  const d = await releasedDisk(dir, 'disk2', 'pv-5678');
  // The node side's container: its own mount namespace with its own view of the disk dir, gone once it exits.
  const view = join(dir, 'container-view');
  await mkdir(view);
  const script = `const v = await import(${JSON.stringify(new URL('../../csi/node-volumes.ts', import.meta.url).href)}); const r = await v.stage({ image: await v.openImage(process.argv[1], 'disk2'), stagingPath: process.argv[2], mode: 'block' }); console.log(r.device);`;
  const device = execFileSync(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-ec',
      'mount --bind "$1" "$2"; exec "$3" --input-type=module -e "$4" "$2" "$5"',
      'sh',
      d.diskDir,
      view,
      process.execPath,
      script,
      join(dir, 'staging'),
    ],
    { encoding: 'utf8' },
  ).trim();
  t.teardown(async () => {
    if ((await loopBackingFiles()).get(device) === '/disk2.img') execFileSync('losetup', ['--detach', device]);
  });
  t.is((await loopBackingFiles()).get(device), '/disk2.img', 'the kernel names the file from the detached mount (what this test stands for)');

  await d.reconcile();
  t.is(d.node()?.phase, 'Wiping');
  t.regex(d.node()?.message ?? '', new RegExp(`attached to loop device ${device} \\(staged at ${join(dir, 'staging')}\\)`));
  t.true(await d.holdsSecret());

  execFileSync('losetup', ['--detach', device]);
  await d.reconcile();
  t.is(d.node()?.phase, 'Available');
  t.false(await d.holdsSecret());
});

test("another node's loop device over its own file of this image's path (a kernel shared by several nodes) does not hold this node's wipe", async (t) => {
  const dir = await rootTempDir(t, 'nodedisks-agent-loop-');
  const d = await releasedDisk(dir, 'disk3', 'pv-9012');
  const other = await otherNodesDevice(t, { dir, diskDir: d.diskDir, diskID: 'disk3', bytes: 16 * MiB, mark: 'other node data' });
  t.is((await loopBackingFiles()).get(other), d.image, "the kernel names the other node's file by this image's path (what this test stands for)");

  await d.reconcile();
  t.is(d.node()?.phase, 'Available', d.node()?.message);
  t.is(d.node()?.wipedFor, 'pv-9012');
  t.false(await d.holdsSecret());
});
