// The CSI node side's volume operations (csi/node-volumes.ts) on real loop devices and real ext4, in temp
// dirs (root only; `npm run test:e2e`, no cluster needed): stage, publish, unpublish, unstage in Filesystem
// and Block modes, each done twice (a CO repeats any of them), the data found again after a restage, a
// program restarted between publish and unpublish (the first half in another process, the second from a
// fresh import: nothing is remembered), and the inputs refused (a diskID out of the dir, a link, a FIFO,
// an fsType not offered, a disk holding another filesystem, an unstage while a publish remains). After
// every test nothing is mounted under its temp dir and no loop device serves its images.
import { execFileSync } from 'node:child_process';
import { constants, existsSync } from 'node:fs';
import { lstat, mkdir, open, readFile, rename, rm, stat, symlink, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import test, { type ExecutionContext } from 'ava';
import { NodeVolumeError, type NodeVolumeErrorCode } from '../../csi/node-errors.ts';
import { isMountPoint, openImage, publish, stage, unpublish, unstage, volumeStats } from '../../csi/node-volumes.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { leftovers, loopBackingFiles, otherNodesDevice, requireRoot, rootTempDir } from './_root-node.ts';

const MiB = 2 ** 20;
const IMAGE_BYTES = 64 * MiB;
const MODULE = join(REPO_ROOT, 'csi', 'node-volumes.ts');

test.before(() => requireRoot());

interface Setup {
  dir: string;
  diskDir: string;
  image: string;
  staging: string;
  target: string;
}

async function setup(t: ExecutionContext, diskID = 'disk1'): Promise<Setup> {
  const dir = await rootTempDir(t, 'nodedisks-csi-node-');
  const diskDir = join(dir, 'disks');
  await mkdir(diskDir);
  await writeFile(join(diskDir, `${diskID}.img`), '');
  await truncate(join(diskDir, `${diskID}.img`), IMAGE_BYTES);
  const image = await openImage(diskDir, diskID);
  // Shaped like kubelet's: a staging dir it makes, a target whose parent it makes.
  const staging = join(dir, 'kubelet', 'plugins', 'globalmount');
  await mkdir(staging, { recursive: true });
  const target = join(dir, 'kubelet', 'pods', 'pod-a', 'volumes', 'pvc-1', 'mount');
  await mkdir(join(target, '..'), { recursive: true });
  return { dir, diskDir, image, staging, target };
}

async function loopsOf(image: string): Promise<string[]> {
  return [...(await loopBackingFiles())].filter(([, f]) => f === image || f === `${image} (deleted)`).map(([d]) => d);
}

/** How many mounts are stacked at a path, from the raw mountinfo text. */
async function mountCount(path: string): Promise<number> {
  return (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => l.split(' ')[4] === path).length;
}

async function nothingLeft(t: ExecutionContext, dir: string): Promise<void> {
  t.deepEqual(await leftovers(dir), { mounts: [], loops: [] }, 'something is still mounted under the test dir or attached to its images');
}

async function rejectsWith(t: ExecutionContext, p: Promise<unknown>, code: NodeVolumeErrorCode, message: RegExp): Promise<void> {
  const err = await t.throwsAsync(p, { instanceOf: NodeVolumeError });
  t.is((err as NodeVolumeError | undefined)?.code, code, `error code of: ${err?.message}`);
  t.regex(err?.message ?? '', message);
}

function fsTypeOf(path: string): string {
  try {
    return execFileSync('blkid', ['-p', '-o', 'value', '-s', 'TYPE', path], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
}

test('Filesystem mode: a blank disk is formatted ext4 and mounted; each operation done twice does it once; the data survive an unstage and a restage', async (t) => {
  const s = await setup(t);
  const first = await stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem' });
  t.regex(first.device, /^\/dev\/loop\d+$/);
  t.is(fsTypeOf(s.image), 'ext4', 'the blank disk was formatted ext4');
  const again = await stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem' });
  t.is(again.device, first.device);
  t.deepEqual(await loopsOf(s.image), [first.device], 'a second stage attached a second loop device');
  t.is(await mountCount(s.staging), 1, 'a second stage stacked a second mount');

  await publish({ stagingPath: s.staging, targetPath: s.target, mode: 'filesystem', image: s.image });
  await publish({ stagingPath: s.staging, targetPath: s.target, mode: 'filesystem', image: s.image });
  t.is(await mountCount(s.target), 1, 'a second publish stacked a second mount');
  await writeFile(join(s.target, 'hello'), 'from the pod');
  t.is(await readFile(join(s.staging, 'hello'), 'utf8'), 'from the pod', 'the target is not the staged filesystem');

  // A second, read-only publish of the same volume: writes are refused there, and the stats are the filesystem's.
  const roTarget = join(s.dir, 'kubelet', 'pods', 'pod-b', 'volumes', 'pvc-1', 'mount');
  await publish({ stagingPath: s.staging, targetPath: roTarget, mode: 'filesystem', image: s.image, readOnly: true });
  await publish({ stagingPath: s.staging, targetPath: roTarget, mode: 'filesystem', image: s.image, readOnly: true });
  t.is(await mountCount(roTarget), 1);
  t.is(await readFile(join(roTarget, 'hello'), 'utf8'), 'from the pod');
  await t.throwsAsync(writeFile(join(roTarget, 'nope'), 'x'), { code: 'EROFS' });
  await rejectsWith(t, publish({ stagingPath: s.staging, targetPath: roTarget, mode: 'filesystem', image: s.image }), 'already-exists', /read-only, not read-write/);
  const stats = await volumeStats(s.target);
  if (stats.kind !== 'filesystem') return t.fail(`stats of a filesystem volume said ${stats.kind}`);
  t.true(stats.bytes.total > 40 * MiB && stats.bytes.total <= IMAGE_BYTES, `total ${stats.bytes.total}`);
  t.true(stats.bytes.used > 0 && stats.bytes.available > 0 && stats.bytes.available < stats.bytes.total);
  t.true(stats.inodes.total > 1000 && stats.inodes.used >= 11 && stats.inodes.available === stats.inodes.total - stats.inodes.used);
  t.deepEqual(stats.condition, { abnormal: false, message: '' });

  for (const target of [s.target, roTarget]) {
    await unpublish(target);
    await unpublish(target);
    t.false(existsSync(target), `${target} was not removed`);
  }
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  t.false(await isMountPoint(s.staging));
  await nothingLeft(t, s.dir);

  // Staged again: found as the ext4 it is, never formatted again.
  await stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem' });
  t.is(await readFile(join(s.staging, 'hello'), 'utf8'), 'from the pod');
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  await nothingLeft(t, s.dir);
});

test('Block mode: the loop device itself is published on a file; each operation done twice does it once', async (t) => {
  const s = await setup(t);
  const { device } = await stage({ image: s.image, stagingPath: s.staging, mode: 'block' });
  t.is((await stage({ image: s.image, stagingPath: s.staging, mode: 'block' })).device, device);
  t.deepEqual(await loopsOf(s.image), [device]);
  // Direct I/O (ADR 45): the pod's O_DIRECT writes reach the image's disk, not the host's page cache.
  t.is((await readFile(`/sys/block/${device!.replace('/dev/', '')}/loop/dio`, 'utf8')).trim(), '1');
  t.false(await isMountPoint(s.staging), 'Block mode mounts nothing at the staging path');
  t.is(fsTypeOf(s.image), '', 'Block mode formatted the disk');

  const target = join(s.dir, 'kubelet', 'plugins', 'volumeDevices', 'publish', 'pvc-1', 'pod-a');
  await publish({ stagingPath: s.staging, targetPath: target, mode: 'block', image: s.image });
  await publish({ stagingPath: s.staging, targetPath: target, mode: 'block', image: s.image });
  t.true((await stat(target)).isBlockDevice(), 'the target is not the loop device');
  t.is((await stat(target)).rdev, (await stat(device)).rdev);
  t.is(await mountCount(target), 1, 'a second publish stacked a second mount');
  // Bytes written to the raw device land in the image.
  const fh = await open(target, constants.O_WRONLY | constants.O_DSYNC);
  await fh.write(Buffer.from('raw block bytes'), 0, 15, 5 * MiB);
  await fh.close();
  t.true((await readFile(s.image)).subarray(5 * MiB, 5 * MiB + 15).equals(Buffer.from('raw block bytes')));
  t.deepEqual(await volumeStats(target), { kind: 'block', bytes: { total: IMAGE_BYTES }, condition: { abnormal: false, message: '' } });

  await unpublish(target);
  await unpublish(target);
  t.false(existsSync(target));
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  await nothingLeft(t, s.dir);
});

test('a restart loses nothing: staged and published by one process, unpublished and unstaged by a fresh one', async (t) => {
  const s = await setup(t);
  const blockImage = join(s.diskDir, 'disk2.img');
  await writeFile(blockImage, '');
  await truncate(blockImage, IMAGE_BYTES);
  const blockTarget = join(s.dir, 'kubelet', 'plugins', 'volumeDevices', 'publish', 'pvc-2', 'pod-a');
  const blockStaging = join(s.dir, 'kubelet', 'plugins', 'volumeDevices', 'staging', 'pvc-2');
  // The first program: another process, gone once it has staged and published both volumes.
  const script = `
    import { stage, publish } from ${JSON.stringify(pathToFileURL(MODULE).href)};
    const [fs, block] = JSON.parse(process.argv[1]);
    await stage({ image: fs.image, stagingPath: fs.staging, mode: 'filesystem' });
    await publish({ stagingPath: fs.staging, targetPath: fs.target, mode: 'filesystem', image: fs.image });
    await stage({ image: block.image, stagingPath: block.staging, mode: 'block' });
    await publish({ stagingPath: block.staging, targetPath: block.target, mode: 'block', image: block.image });`;
  execFileSync(process.execPath, ['--input-type=module', '-e', script, JSON.stringify([s, { image: blockImage, staging: blockStaging, target: blockTarget }])], {
    stdio: ['ignore', 'inherit', 'inherit'],
    timeout: 120_000,
  });
  t.true(await isMountPoint(s.target));
  t.true((await stat(blockTarget)).isBlockDevice());
  await writeFile(join(s.target, 'kept'), 'yes');

  // The program started again: a fresh module instance, nothing shared with the one above.
  const fresh = (await import(`${pathToFileURL(MODULE).href}?restart=${Date.now()}`)) as typeof import('../../csi/node-volumes.ts');
  // A repeated stage and publish find what the first program left, and attach nothing new.
  const before = await loopsOf(s.image);
  t.is(before.length, 1);
  t.deepEqual([(await fresh.stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem' })).device], before);
  await fresh.publish({ stagingPath: s.staging, targetPath: s.target, mode: 'filesystem', image: s.image });
  t.is(await readFile(join(s.staging, 'kept'), 'utf8'), 'yes');

  await fresh.unpublish(s.target);
  await fresh.unpublish(blockTarget);
  await fresh.unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  await fresh.unstage({ stagingPath: blockStaging, diskDir: s.diskDir, image: blockImage });
  await nothingLeft(t, s.dir);
});

test('a loop device attached by a program whose mount namespace is gone (a restarted container) is found by its inode, reused and detached', async (t) => {
  const s = await setup(t);
  // The container's view of the disk dir: a bind mount in its own mount namespace, gone with it.
  const ctrDisks = join(s.dir, 'container-view');
  await mkdir(ctrDisks);
  const attached = execFileSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-ec', 'mount --bind "$1" "$2"; losetup --find --show "$2/disk1.img"', 'sh', s.diskDir, ctrDisks], {
    encoding: 'utf8',
  }).trim();
  // Teardown's cleanup knows the test dir's paths, not this one: it is detached here whatever happens.
  t.teardown(async () => {
    if ((await loopBackingFiles()).get(attached) === '/disk1.img') execFileSync('losetup', ['--detach', attached]);
  });
  t.is((await loopBackingFiles()).get(attached), '/disk1.img', 'the kernel names the file from the detached mount (what this test stands for)');

  for (const mode of ['block', 'filesystem'] as const) {
    const { device } = await stage({ image: s.image, stagingPath: s.staging, mode });
    t.is(device, attached, `${mode}: a second loop device was attached`);
    t.deepEqual(
      [...(await loopBackingFiles()).values()].filter((f) => f === '/disk1.img' || f.startsWith(`${s.dir}/`)),
      ['/disk1.img'],
      `${mode}: a second loop device was attached`,
    );
    const target = mode === 'block' ? join(s.dir, 'kubelet', 'block-target') : s.target;
    await publish({ stagingPath: s.staging, targetPath: target, mode, image: s.image });
    await unpublish(target);
  }
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  t.is((await loopBackingFiles()).get(attached), undefined, 'the device attached before the restart was left behind');
  await nothingLeft(t, s.dir);
});

function loopListing(device: string): { name: string; 'back-file': string; autoclear: boolean } | undefined {
  const doc = JSON.parse(execFileSync('losetup', ['--list', '--json', '--output', 'NAME,BACK-FILE,AUTOCLEAR'], { encoding: 'utf8' }) || '{"loopdevices":[]}') as {
    loopdevices: { name: string; 'back-file': string; autoclear: boolean }[];
  };
  return doc.loopdevices.find((d) => d.name === device);
}

test("another node's loop device over its own file of the same path is never this volume's: not reused, not detached, still read (Filesystem and Block)", async (t) => {
  const s = await setup(t);
  const other = await otherNodesDevice(t, { dir: s.dir, diskDir: s.diskDir, diskID: 'disk1', bytes: IMAGE_BYTES, mark: 'other node data' });
  t.is(loopListing(other)?.['back-file'], s.image, "the kernel names the other node's file by this node's image path (what this test stands for)");
  for (const mode of ['filesystem', 'block'] as const) {
    const target = mode === 'block' ? join(s.dir, 'kubelet', 'block-target') : s.target;
    const { device } = await stage({ image: s.image, stagingPath: s.staging, mode });
    t.not(device, other, `${mode}: the other node's device was taken for this node's image`);
    await publish({ stagingPath: s.staging, targetPath: target, mode, image: s.image });
    await unpublish(target);
    await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
    t.deepEqual(loopListing(other), { name: other, 'back-file': s.image, autoclear: false }, `${mode}: the other node's device was asked to go`);
    const head = Buffer.alloc(15);
    const fh = await open(other, 'r');
    await fh.read(head, 0, 15, 0);
    await fh.close();
    t.is(head.toString(), 'other node data', `${mode}: the other node's device no longer reads its data`);
  }
  t.deepEqual(await leftovers(s.dir), { mounts: [], loops: [`${other} ${s.image}`] }, 'this node left something, or the other node lost its device');
});

test('an unstage finds the device of a Block volume whose image was removed or renamed since, by the stage record, and detaches it', async (t) => {
  for (const change of ['removed', 'renamed'] as const) {
    const s = await setup(t, `disk-${change}`);
    const { device } = await stage({ image: s.image, stagingPath: s.staging, mode: 'block' });
    t.true(existsSync(join(s.diskDir, `disk-${change}.img.staged`)), 'no record of the stage beside the image');
    if (change === 'removed') await rm(s.image);
    else await rename(s.image, join(s.diskDir, 'disk-moved.img'));
    await unstage({ stagingPath: s.staging, diskDir: s.diskDir });
    t.is(loopListing(device), undefined, `${change}: the volume's loop device was left attached`);
    t.false(existsSync(join(s.diskDir, `disk-${change}.img.staged`)), `${change}: the record outlived the device`);
    await unstage({ stagingPath: s.staging, diskDir: s.diskDir });
    await nothingLeft(t, s.dir);
  }
});

test('Filesystem mode unstage without the image finds the loop device from the staging mount', async (t) => {
  const s = await setup(t);
  await stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem' });
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir });
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir });
  await nothingLeft(t, s.dir);
});

test('an unstage while a publish remains is refused and detaches nothing; after the unpublish it goes through', async (t) => {
  for (const mode of ['filesystem', 'block'] as const) {
    const s = await setup(t, `disk-${mode}`);
    const target = mode === 'block' ? join(s.dir, 'kubelet', 'block-target') : s.target;
    const { device } = await stage({ image: s.image, stagingPath: s.staging, mode });
    await publish({ stagingPath: s.staging, targetPath: target, mode, image: s.image });
    await rejectsWith(t, unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image }), 'failed-precondition', new RegExp(`${device} is mounted at ${target}`));
    t.deepEqual(await loopsOf(s.image), [device], `${mode}: the loop device was detached under a published volume`);
    t.true(await isMountPoint(target));
    await unpublish(target);
    await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
    await nothingLeft(t, s.dir);
  }
});

test('a publish before a stage is refused, and so is a staging path with something else mounted on it', async (t) => {
  const s = await setup(t);
  await rejectsWith(t, publish({ stagingPath: s.staging, targetPath: s.target, mode: 'filesystem', image: s.image }), 'failed-precondition', /not staged: nothing is mounted at/);
  await rejectsWith(t, publish({ stagingPath: s.staging, targetPath: s.target, mode: 'block', image: s.image }), 'failed-precondition', /not staged: no loop device serves/);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', s.staging]);
  await rejectsWith(t, stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem' }), 'already-exists', /already has tmpfs \(tmpfs\) mounted/);
  await rejectsWith(t, publish({ stagingPath: s.staging, targetPath: s.target, mode: 'filesystem', image: s.image }), 'failed-precondition', /has tmpfs mounted, not a loop device/);
  t.deepEqual(await loopsOf(s.image), []);
  execFileSync('umount', [s.staging]);
  await nothingLeft(t, s.dir);
});

test('bad diskIDs, a missing image, a link, a FIFO and a directory are refused with their reason, and nothing is attached', async (t) => {
  const s = await setup(t);
  for (const id of ['../disks/disk1', 'a/b', '..', '', '.hidden', 'x..y']) {
    await rejectsWith(t, openImage(s.diskDir, id), 'invalid', /diskID/);
  }
  await rejectsWith(t, openImage(s.diskDir, 'absent'), 'not-found', /absent\.img does not exist/);
  await rejectsWith(t, openImage(join(s.dir, 'nodir'), 'disk1'), 'not-found', /disk dir .* does not exist/);

  const precious = join(s.dir, 'precious.img');
  await writeFile(precious, 'not a disk of ours');
  await symlink(precious, join(s.diskDir, 'link.img'));
  await rejectsWith(t, openImage(s.diskDir, 'link'), 'failed-precondition', /symbolic link/);
  await rejectsWith(t, stage({ image: join(s.diskDir, 'link.img'), stagingPath: s.staging, mode: 'block' }), 'failed-precondition', /symbolic link/);
  t.is(await readFile(precious, 'utf8'), 'not a disk of ours');

  execFileSync('mkfifo', [join(s.diskDir, 'fifo.img')]);
  await rejectsWith(t, openImage(s.diskDir, 'fifo'), 'failed-precondition', /not a regular file/);
  await rejectsWith(t, stage({ image: join(s.diskDir, 'fifo.img'), stagingPath: s.staging, mode: 'filesystem' }), 'failed-precondition', /not a regular file/);
  await mkdir(join(s.diskDir, 'dir.img'));
  await rejectsWith(t, openImage(s.diskDir, 'dir'), 'failed-precondition', /not a regular file/);

  await rejectsWith(t, stage({ image: s.image, stagingPath: 'relative/path', mode: 'filesystem' }), 'invalid', /not an absolute path/);
  await rejectsWith(t, stage({ image: s.image, stagingPath: s.staging, mode: 'raw' as 'block' }), 'invalid', /volume mode/);
  await rejectsWith(t, stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', mountOptions: ['noatime\n'] }), 'invalid', /control character/);
  for (const option of ['bind', 'remount', 'loop=/dev/loop9', 'offset=4096', 'X-mount.mkdir']) {
    await rejectsWith(t, stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', mountOptions: ['noatime', option] }), 'invalid', /changes what mount does/);
  }
  await rejectsWith(t, unpublish('target'), 'invalid', /not an absolute path/);
  t.deepEqual((await lstat(join(s.diskDir, 'link.img'))).isSymbolicLink(), true);
  t.deepEqual(
    [...(await loopBackingFiles()).values()].filter((f) => f.startsWith(`${s.dir}/`)),
    [],
  );
  await nothingLeft(t, s.dir);
});

test('an fsType not offered is refused before anything is attached', async (t) => {
  const s = await setup(t);
  for (const fsType of ['btrfs', 'ext4,ro', 'vfat', '../ext4']) {
    await rejectsWith(t, stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', fsType }), 'invalid', /is not offered on this node \(offered: ext4, ext3/);
  }
  t.is(fsTypeOf(s.image), '');
  await nothingLeft(t, s.dir);
});

test('a disk holding another filesystem is never reformatted: refused with its type, left as it was, detached; asked for that type it mounts', async (t) => {
  const s = await setup(t);
  execFileSync('mkfs.ext3', ['-F', '-q', s.image]);
  const uuid = execFileSync('blkid', ['-p', '-o', 'value', '-s', 'UUID', s.image], { encoding: 'utf8' }).trim();
  await rejectsWith(t, stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', fsType: 'ext4' }), 'failed-precondition', /holds a ext3 filesystem, not ext4: it is never reformatted/);
  t.deepEqual(await loopsOf(s.image), [], 'the refused stage left its loop device attached');
  t.false(await isMountPoint(s.staging));
  t.is(fsTypeOf(s.image), 'ext3');
  t.is(execFileSync('blkid', ['-p', '-o', 'value', '-s', 'UUID', s.image], { encoding: 'utf8' }).trim(), uuid, 'the filesystem was replaced');

  await stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', fsType: 'ext3' });
  t.true(await isMountPoint(s.staging));
  await rejectsWith(t, stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', fsType: 'ext4' }), 'already-exists', /mounted as ext3, not ext4/);
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  await nothingLeft(t, s.dir);
});

test('a read-only stage of a blank disk is refused (it cannot be formatted); of a formatted one it mounts read-only', async (t) => {
  const s = await setup(t);
  await rejectsWith(t, stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', readOnly: true }), 'failed-precondition', /no filesystem, and a read-only volume cannot be formatted/);
  await nothingLeft(t, s.dir);
  execFileSync('mkfs.ext4', ['-F', '-q', s.image]);
  await stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', readOnly: true });
  await stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', readOnly: true });
  await t.throwsAsync(writeFile(join(s.staging, 'x'), 'x'), { code: 'EROFS' });
  await publish({ stagingPath: s.staging, targetPath: s.target, mode: 'filesystem', image: s.image });
  await publish({ stagingPath: s.staging, targetPath: s.target, mode: 'filesystem', image: s.image });
  await t.throwsAsync(writeFile(join(s.target, 'x'), 'x'), { code: 'EROFS' });
  await unpublish(s.target);
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  await nothingLeft(t, s.dir);
});

test('volume stats of a path with nothing mounted, or no path at all, say not found', async (t) => {
  const s = await setup(t);
  await rejectsWith(t, volumeStats(s.staging), 'not-found', /no volume is mounted at/);
  await rejectsWith(t, volumeStats(join(s.dir, 'none')), 'not-found', /does not exist/);
  await nothingLeft(t, s.dir);
});

test('an unpublish unmounts every mount stacked on the target, then removes it', async (t) => {
  const s = await setup(t);
  await mkdir(s.target);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', s.target]);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', s.target]);
  t.is(await mountCount(s.target), 2);
  await unpublish(s.target);
  t.is(await mountCount(s.target), 0);
  t.false(existsSync(s.target));
  await nothingLeft(t, s.dir);
});

test('mount options reach the filesystem at stage; at publish the bind takes the per-mount ones among them', async (t) => {
  const s = await setup(t);
  await stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', mountOptions: ['nosuid', 'data=journal'] });
  // A publish's own options: noexec is a per-mount flag the bind takes; data=journal was the stage's business.
  await publish({ stagingPath: s.staging, targetPath: s.target, mode: 'filesystem', image: s.image, mountOptions: ['noexec', 'data=journal'] });
  const lines = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n');
  const options = (path: string) => {
    const fields = lines.find((l) => l.split(' ')[4] === path)?.split(' ') ?? [];
    return { perMount: fields[5]?.split(',') ?? [], superblock: fields.at(-1)?.split(',') ?? [] };
  };
  const staged = options(s.staging);
  const published = options(s.target);
  t.true(staged.perMount.includes('nosuid'), staged.perMount.join(','));
  t.false(staged.perMount.includes('noexec'), 'the publish changed the staging mount');
  t.true(staged.superblock.includes('data=journal'), staged.superblock.join(','));
  t.true(published.perMount.includes('noexec') && published.perMount.includes('nosuid'), published.perMount.join(','));
  await unpublish(s.target);
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  await nothingLeft(t, s.dir);
});

test('a mount option that changes what mount does is refused also inside a comma-joined element, and nothing is attached', async (t) => {
  const s = await setup(t);
  for (const joined of ['noatime,loop', 'noatime,offset=1048576', 'nosuid,bind', 'ro,X-mount.mkdir']) {
    await rejectsWith(t, stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', mountOptions: [joined] }), 'invalid', /changes what mount does/);
    await rejectsWith(t, publish({ stagingPath: s.staging, targetPath: s.target, mode: 'filesystem', image: s.image, mountOptions: [joined] }), 'invalid', /changes what mount does/);
  }
  await rejectsWith(t, stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', mountOptions: ['noatime,'] }), 'invalid', /empty/);
  t.deepEqual(await loopsOf(s.image), []);
  await nothingLeft(t, s.dir);
});

test("'ro' among a class's mount options: a repeated stage (a kubelet restarted) finds the read-only mount its own, and a publish binds it read-only", async (t) => {
  const s = await setup(t);
  // Formatted first: a blank disk cannot be staged read-only.
  await stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem' });
  await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  for (const options of [['ro'], ['noatime,ro']]) {
    await stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', mountOptions: options });
    await stage({ image: s.image, stagingPath: s.staging, mode: 'filesystem', mountOptions: options });
    await publish({ stagingPath: s.staging, targetPath: s.target, mode: 'filesystem', image: s.image, mountOptions: options });
    await publish({ stagingPath: s.staging, targetPath: s.target, mode: 'filesystem', image: s.image, mountOptions: options });
    await t.throwsAsync(writeFile(join(s.target, 'x'), 'x'), { code: 'EROFS' });
    await unpublish(s.target);
    await unstage({ stagingPath: s.staging, diskDir: s.diskDir, image: s.image });
  }
  await nothingLeft(t, s.dir);
});
