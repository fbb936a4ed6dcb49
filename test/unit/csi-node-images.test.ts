// How the CSI node side finds a disk image (csi/node-volumes.ts openImage, imagesNamed), on real files
// and without root: a diskID never leads out of the disk dir, the image is a regular file never followed
// through a link (a FIFO does not block), and a volume ID's NodeDisk name finds its image with no API.
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { nodeDiskName } from '../../api/names.ts';
import { NodeVolumeError, type NodeVolumeErrorCode } from '../../csi/node-errors.ts';
import { imagesNamed, openImage } from '../../csi/node-volumes.ts';

async function diskDir(t: ExecutionContext): Promise<string> {
  const d = await realpath(await mkdtemp(join(tmpdir(), 'nodedisks-csi-images-')));
  t.teardown(() => rm(d, { recursive: true, force: true }));
  return d;
}

async function rejectsWith(t: ExecutionContext, p: Promise<unknown>, code: NodeVolumeErrorCode, message: RegExp): Promise<void> {
  const err = await t.throwsAsync(p, { instanceOf: NodeVolumeError });
  t.is((err as NodeVolumeError | undefined)?.code, code, `error code of: ${err?.message}`);
  t.regex(err?.message ?? '', message);
}

test('the image of a valid diskID is its regular file, with the dir resolved as the kernel names it', async (t) => {
  const d = await diskDir(t);
  await writeFile(join(d, 'disk1.img'), '');
  t.is(await openImage(d, 'disk1'), join(d, 'disk1.img'));
  // Through a link to the dir: the path given back is the real one (what a loop device reports).
  await mkdir(join(d, 'via'));
  await symlink(d, join(d, 'via', 'dir'));
  t.is(await openImage(join(d, 'via', 'dir'), 'disk1'), join(d, 'disk1.img'));
});

test('a diskID that could leave the dir, or is not one the agent would report, is invalid', async (t) => {
  const d = await diskDir(t);
  await writeFile(join(d, 'disk1.img'), '');
  for (const id of ['../disk1', '../x', 'a/b', '..', '', '.disk1', 'x..y', 'disk 1', '-rf']) {
    await rejectsWith(t, openImage(d, id), 'invalid', /diskID/);
  }
  await rejectsWith(t, openImage('relative/dir', 'disk1'), 'invalid', /not an absolute path/);
});

test('a missing image or dir is not found; a link, a FIFO or a directory is refused, and the link is not followed', async (t) => {
  const d = await diskDir(t);
  await rejectsWith(t, openImage(d, 'absent'), 'not-found', /absent\.img does not exist on this node/);
  await rejectsWith(t, openImage(join(d, 'nodir'), 'disk1'), 'not-found', /disk dir .*nodir does not exist/);
  const outside = join(d, 'outside');
  await writeFile(outside, 'not a disk');
  await symlink(outside, join(d, 'link.img'));
  await rejectsWith(t, openImage(d, 'link'), 'failed-precondition', /link\.img is a symbolic link/);
  t.is(await readFile(outside, 'utf8'), 'not a disk');
  execFileSync('mkfifo', [join(d, 'fifo.img')]);
  await rejectsWith(t, openImage(d, 'fifo'), 'failed-precondition', /fifo\.img is not a regular file/);
  await mkdir(join(d, 'dir.img'));
  await rejectsWith(t, openImage(d, 'dir'), 'failed-precondition', /dir\.img is not a regular file/);
});

test("a volume's NodeDisk name finds its image in the disk dir; two files making that name are both named, none gives none", async (t) => {
  const d = await diskDir(t);
  for (const f of ['disk1.img', 'Disk_2.img', 'disk-2.img', 'disk3.img.reserved', 'bad..name.img']) await writeFile(join(d, f), '');
  t.deepEqual(await imagesNamed(d, 'node-a', nodeDiskName('node-a', 'disk1')), [join(d, 'disk1.img')]);
  // Disk_2 and disk-2 both normalise to node-disk-node-a-disk-2.
  t.deepEqual(await imagesNamed(d, 'node-a', nodeDiskName('node-a', 'disk-2')), [join(d, 'Disk_2.img'), join(d, 'disk-2.img')]);
  t.deepEqual(await imagesNamed(d, 'node-b', nodeDiskName('node-a', 'disk1')), [], 'the node name is part of the NodeDisk name');
  t.deepEqual(await imagesNamed(d, 'node-a', nodeDiskName('node-a', 'disk3')), [], 'a marker is not an image');
  t.deepEqual(await imagesNamed(join(d, 'nodir'), 'node-a', nodeDiskName('node-a', 'disk1')), []);
});
