// A volume's condition from what the kernel shows (csi/volume-condition.ts), on sysfs trees laid out as the
// kernel lays them out: the mount's and the device's numbers lead to the device's name and its files. The
// same on a real failing disk: test/integration/volume-condition.test.ts.
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { blockCondition, filesystemCondition, NORMAL } from '../../csi/volume-condition.ts';
import type { MountEntry } from '../../lib/runtime/mountinfo.ts';

async function sysfs(o: { errors?: number; backing?: string } = {}): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'nodedisks-sysfs-'));
  const dev = join(root, 'devices/virtual/block/loop3');
  await mkdir(join(dev, 'loop'), { recursive: true });
  await mkdir(join(root, 'dev/block'), { recursive: true });
  await symlink('../../devices/virtual/block/loop3', join(root, 'dev/block/7:3'));
  if (o.backing !== undefined) await writeFile(join(dev, 'loop/backing_file'), `${o.backing}\n`);
  if (o.errors !== undefined) {
    await mkdir(join(root, 'fs/ext4/loop3'), { recursive: true });
    await writeFile(join(root, 'fs/ext4/loop3/errors_count'), `${o.errors}\n`);
  }
  return root;
}

function mount(options: string[], superOptions: string[], fsType = 'ext4'): MountEntry {
  return { id: 1, parentId: 0, major: 7, minor: 3, root: '/', mountPoint: '/pods/a/mount', options, fsType, source: '/dev/loop3', superOptions };
}

test('a healthy filesystem is normal, and so is one mounted read-only on purpose', async (t) => {
  const root = await sysfs({ errors: 0, backing: '/var/lib/node-disks-manager/disks/d1.img' });
  t.deepEqual(await filesystemCondition(mount(['rw', 'relatime'], ['rw', 'errors=remount-ro']), root), NORMAL);
  t.deepEqual(await filesystemCondition(mount(['ro', 'relatime'], ['ro']), root), NORMAL);
  await rm(root, { recursive: true });
});

test('a filesystem gone read-only under a writable mount, or marked emergency_ro, is abnormal and says what to do', async (t) => {
  const root = await sysfs({ errors: 0 });
  for (const superOptions of [
    ['ro', 'errors=remount-ro'],
    ['rw', 'errors=remount-ro', 'emergency_ro'],
  ]) {
    t.deepEqual(await filesystemCondition(mount(['rw'], superOptions), root), {
      abnormal: true,
      message: 'the ext4 filesystem on this volume (loop3) went read-only after IO errors; copy the data off and move the workload to another volume.',
    });
  }
  await rm(root, { recursive: true });
});

test('errors ext4 has recorded make a volume abnormal even while it is still writable', async (t) => {
  const root = await sysfs({ errors: 1 });
  t.deepEqual(await filesystemCondition(mount(['rw'], ['rw']), root), {
    abnormal: true,
    message: 'ext4 has recorded 1 error on it since its last check; copy the data off and move the workload to another volume.',
  });
  await rm(root, { recursive: true });
});

test('a deleted image behind the device is abnormal for a block volume and a filesystem alike', async (t) => {
  const root = await sysfs({ backing: '/var/lib/node-disks-manager/disks/d1.img (deleted)' });
  const deleted = 'the disk image behind this volume (loop3) was deleted while the volume is in use: its data goes when the volume is unstaged; copy what you need now.';
  t.deepEqual(await blockCondition({ major: 7, minor: 3 }, root), { abnormal: true, message: deleted });
  t.deepEqual(await filesystemCondition(mount(['rw'], ['rw'], 'xfs'), root), { abnormal: true, message: deleted });
  await rm(root, { recursive: true });
});

test('a device sysfs does not know (a drive, another kernel layout) is normal, not an error', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'nodedisks-sysfs-'));
  t.deepEqual(await blockCondition({ major: 259, minor: 0 }, root), NORMAL);
  t.deepEqual(await filesystemCondition({ ...mount(['rw'], ['rw']), major: 259, minor: 0 }, root), NORMAL);
  await rm(root, { recursive: true });
});
