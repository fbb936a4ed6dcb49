// Whether a disk image is attached to a loop device: a volume still staged on this node by the CSI node
// side. Such an image is not wiped: a filesystem still mounted from it would write its metadata back over
// the wiped file when it is unmounted (ext4 its superblock), and a pod may still be using it.
//
// The agent has no device access and needs none: each attached loop device names its backing file in
// sysfs (/sys/block/loopN/loop/backing_file, world-readable). The kernel names it by the path it was
// opened through, as the attaching program's mount namespace sees it: the disk dir's host path (the CSI
// node container mounts the disk dir at that same path), or, once that container is gone (restarted),
// the file's path inside its detached mount of the disk dir: `/<diskID>.img`. Each of these counts.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DISK_SUFFIX } from '../api/constants.ts';
import { diskPath } from '../api/names.ts';

export const SYS_BLOCK = '/sys/block';

export interface LoopAttachment {
  /** `/dev/loopN`. */
  device: string;
  /** The backing file as sysfs names it. */
  backingFile: string;
}

/** The paths by which a loop device may name this disk's image (see above). */
export function imageLoopPaths(diskDir: string, hostDiskDir: string, diskID: string): string[] {
  const name = `${diskID}${DISK_SUFFIX}`;
  return [...new Set([join(diskDir, name), diskPath(hostDiskDir, diskID), `/${name}`])];
}

/**
 * The loop devices whose backing file is one of `paths`, read from `sysBlock` (tests give a fake tree).
 * Throws when sysfs cannot be read: an image that may be attached is not one to wipe.
 */
export async function loopDevicesBacking(paths: string[], sysBlock: string = SYS_BLOCK): Promise<LoopAttachment[]> {
  let names;
  try {
    names = await readdir(sysBlock);
  } catch (err) {
    // No block devices visible at all: no loop device either.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new Error(`cannot list loop devices in ${sysBlock}: ${(err as Error).message}`);
  }
  const wanted = new Set(paths);
  const found: LoopAttachment[] = [];
  for (const name of names.filter((n) => /^loop\d+$/.test(n)).sort((a, b) => Number(a.slice(4)) - Number(b.slice(4)))) {
    let backingFile;
    try {
      backingFile = (await readFile(join(sysBlock, name, 'loop', 'backing_file'), 'utf8')).replace(/\n$/, '');
    } catch (err) {
      // A loop device with nothing attached has no backing_file.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw new Error(`cannot read the backing file of loop device ${name}: ${(err as Error).message}`);
    }
    if (wanted.has(backingFile)) found.push({ device: `/dev/${name}`, backingFile });
  }
  return found;
}
