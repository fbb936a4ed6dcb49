// The drive scan (agent/drive-scan.ts) on this machine's own /sys, not a tree laid out by a test: the kernel's
// real layout of its disks (here a virtio disk under /sys/devices/pci…/virtioN/block) must give the same
// answers the unit tests' trees give. The machine's root filesystem is on a block device (true of every
// machine these tests run on; the test says so if not).
import { readdir, readFile, realpath } from 'node:fs/promises';
import test from 'ava';
import { scanDrives } from '../../agent/drive-scan.ts';
import { parseMountInfo } from '../../lib/runtime/mountinfo.ts';

const NOT_A_DRIVE = /^(loop|ram|zram|dm-|md|nbd|fd|sr|rbd)\d*/;

test("this machine's disks from the real /sys: each found by identity with its facts, and the root disk refused as the node's root", async (t) => {
  const mounts = parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8'));
  const drives = await scanDrives({ sysRoot: '/sys', byIdDir: '/dev/disk/by-id', mounts });

  const disks = (await readdir('/sys/block')).filter((n) => !NOT_A_DRIVE.test(n)).sort();
  t.true(disks.length > 0, 'this machine has a disk in /sys/block');
  t.deepEqual(
    drives.map((d) => d.kernelName),
    disks,
    'every disk is found, and nothing that is not one (loop devices here have no by-id name)',
  );
  for (const d of drives) {
    const sys = `/sys/block/${d.kernelName}`;
    t.is(`${d.major}:${d.minor}`, (await readFile(`${sys}/dev`, 'utf8')).trim(), `${d.kernelName}: its device number`);
    t.is(d.sizeBytes, Number((await readFile(`${sys}/size`, 'utf8')).trim()) * 512, `${d.kernelName}: its size`);
    t.is(d.logicalBlockSize, Number((await readFile(`${sys}/queue/logical_block_size`, 'utf8')).trim()));
    t.is(d.physicalBlockSize, Number((await readFile(`${sys}/queue/physical_block_size`, 'utf8')).trim()));
    if (d.identity !== undefined) t.false(d.identity.includes(d.kernelName), `${d.kernelName}: identity ${d.identity} never comes from the kernel name`);
    // Where the kernel put it says what bus it is on.
    const bus = await realpath(sys);
    if (bus.includes('/virtio')) t.is(d.transport, 'virtio', bus);
    if (bus.includes('/nvme')) t.is(d.transport, 'nvme', bus);
  }

  const root = mounts.find((m) => m.mountPoint === '/');
  const rootDev = `${root?.major}:${root?.minor}`;
  // The root is the disk itself or one of its partitions.
  const rootDisk = (await realpath(`/sys/dev/block/${rootDev}`).catch(() => '')).split('/block/')[1]?.split('/')[0];
  t.truthy(rootDisk, `/ is mounted from ${rootDev}, which is a block device`);
  const d = drives.find((x) => x.kernelName === rootDisk);
  t.truthy(d, `the root disk ${rootDisk} is in the scan`);
  t.true(
    d?.refusals.some((r) => r.includes("node's root")),
    `the root disk is refused as the node's root: ${d?.refusals.join('; ')}`,
  );
});
