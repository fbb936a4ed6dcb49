// A published volume's condition (NodeGetVolumeStats' volume_condition, csi/volume-condition.ts) on the
// real path: images staged and published by the node side's own functions, on loop devices, with real IO
// errors from a disk that fails on command (hack/faultydisk). Root only: FUSE, loop devices, mounts.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, open, rm, truncate, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { openImage, publish, stage, unpublish, unstage, volumeStats } from '../../csi/node-volumes.ts';
import { ensureFaultyDisk, FaultyDisk } from '../../hack/faultydisk/faultydisk.ts';

const run = promisify(execFile);
const MiB = 2 ** 20;
const NORMAL = { abnormal: false, message: '' };

let work = '';
let bin = '';
/** Undone last first, whatever a test got to. */
const cleanups: (() => Promise<unknown>)[] = [];

test.before(async () => {
  if (process.getuid?.() !== 0) throw new Error('volume conditions need root (FUSE, loop devices, mounts): run the integration tests as root, as .ci/run does');
  bin = await ensureFaultyDisk();
  work = await mkdtemp(join(tmpdir(), 'nodedisks-condition-'));
});

test.after.always(async () => {
  for (const undo of cleanups.splice(0).reverse()) await undo().catch(() => undefined);
  if (work) await rm(work, { recursive: true, force: true });
});

async function conditionOf(target: string) {
  return (await volumeStats(target)).condition;
}

test.serial('a filesystem volume on a disk whose writes fail turns abnormal, saying what the kernel saw', async (t) => {
  const dir = join(work, 'fs');
  const diskDir = join(dir, 'disks');
  const fuse = join(dir, 'fuse');
  await mkdir(diskDir, { recursive: true });
  await mkdir(fuse);
  await run('truncate', ['-s', String(64 * MiB), join(dir, 'backing')]);
  const disk = await FaultyDisk.serve(bin, join(dir, 'backing'), fuse);
  cleanups.push(() => disk.close());
  // The failing file where the node side looks for the disk's image: bound onto <disk dir>/<diskID>.img.
  const imagePath = join(diskDir, 'failing-1.img');
  await writeFile(imagePath, '');
  await run('mount', ['--bind', disk.path, imagePath]);
  cleanups.push(() => run('umount', [imagePath]));

  const image = await openImage(diskDir, 'failing-1');
  const stagingPath = join(dir, 'staging');
  const targetPath = join(dir, 'target');
  await mkdir(stagingPath);
  await stage({ image, stagingPath, mode: 'filesystem', fsType: 'ext4' });
  cleanups.push(() => unstage({ stagingPath, diskDir, image }));
  await publish({ stagingPath, targetPath, mode: 'filesystem', image });
  cleanups.push(() => unpublish(targetPath));
  await writeFile(join(targetPath, 'before'), 'written while the disk was healthy');
  t.deepEqual(await conditionOf(targetPath), NORMAL);

  await disk.set('fail writes');
  const fh = await open(join(targetPath, 'after'), 'w');
  await fh.write(Buffer.alloc(256 * 1024, 1));
  await fh.sync().catch(() => undefined);
  await fh.close().catch(() => undefined);
  await run('sync', ['-f', targetPath]).catch(() => undefined);

  let condition = await conditionOf(targetPath);
  for (let i = 0; i < 50 && !condition.abnormal; i++) {
    await new Promise((r) => setTimeout(r, 100));
    condition = await conditionOf(targetPath);
  }
  t.true(condition.abnormal, condition.message);
  t.regex(condition.message, /^the ext4 filesystem on this volume \(loop\d+\) went read-only after IO errors; /);
  t.regex(condition.message, /ext4 has recorded \d+ errors? on it since its last check; copy the data off/);
  // The usage is still reported beside it.
  const stats = await volumeStats(targetPath);
  t.true(stats.kind === 'filesystem' && stats.bytes.total > 0);
  await disk.set('heal');
});

test.serial('a block volume whose image is deleted while published turns abnormal, and unstages', async (t) => {
  const dir = join(work, 'block');
  const diskDir = join(dir, 'disks');
  await mkdir(diskDir, { recursive: true });
  const imagePath = join(diskDir, 'deleted-1.img');
  await writeFile(imagePath, '');
  await truncate(imagePath, 16 * MiB);
  const image = await openImage(diskDir, 'deleted-1');
  const stagingPath = join(dir, 'staging');
  const targetPath = join(dir, 'device');
  await mkdir(stagingPath);
  const { device } = await stage({ image, stagingPath, mode: 'block' });
  cleanups.push(() => unstage({ stagingPath, diskDir }));
  await publish({ stagingPath, targetPath, mode: 'block', image });
  cleanups.push(() => unpublish(targetPath));
  t.deepEqual(await conditionOf(targetPath), NORMAL);

  await unlink(imagePath);
  const condition = await conditionOf(targetPath);
  t.true(condition.abnormal);
  t.regex(condition.message, /^the disk image behind this volume \(loop\d+\) was deleted while the volume is in use: /);

  await unpublish(targetPath);
  await unstage({ stagingPath, diskDir });
  const { stdout } = await run('losetup', ['--list', '--noheadings', '--output', 'NAME']);
  t.false(stdout.split('\n').includes(device), `${device} is still attached`);
});
