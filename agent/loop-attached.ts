// Whether a disk image is attached to a loop device: a volume still staged on this node by the CSI node
// side. Such an image is not wiped: a filesystem still mounted from it would write its metadata back over
// the wiped file when it is unmounted (ext4 its superblock), and a pod may still be using it.
//
// The agent has no device access, so it cannot ask the kernel which file a loop device serves (that takes
// an ioctl on the device); sysfs only names the backing file by a path, which a node of a shared kernel
// (the local cluster) or a restarted container makes ambiguous. It reads the node side's records instead
// (api/staged-record.ts): the image's inode and device, the loop device and its sequence number, checked
// live against sysfs. An image renamed since it was staged is still found by its inode.
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { DISK_SUFFIX } from '../api/constants.ts';
import { bootId, deviceNumberText, isLive, readStagedRecords, recordsImage, SYS_BLOCK } from '../api/staged-record.ts';

export { SYS_BLOCK };

export interface LoopAttachment {
  /** `/dev/loopN`. */
  device: string;
  /** Where the volume served by it is staged. */
  stagingPath: string;
}

/**
 * The loop devices that serve the image `<diskDir>/<diskID>.img` now, by the node side's live records of
 * it; `sysBlock` and `bootIdFile` are for tests. Throws when the records or sysfs cannot be read: an
 * image that may be attached is not one to wipe.
 */
export async function loopDevicesHolding(diskDir: string, diskID: string, o: { sysBlock?: string | undefined; bootIdFile?: string | undefined } = {}): Promise<LoopAttachment[]> {
  let st;
  try {
    st = await fsp.lstat(join(diskDir, `${diskID}${DISK_SUFFIX}`), { bigint: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new Error(`cannot look at the disk image: ${(err as Error).message}`);
  }
  if (!st.isFile()) return [];
  const image = { ino: st.ino, dev: deviceNumberText(st.dev) };
  const records = (await readStagedRecords(diskDir)).filter((f) => recordsImage(f.record, image));
  if (records.length === 0) return [];
  const boot = await bootId(o.bootIdFile);
  const found: LoopAttachment[] = [];
  for (const { record } of records) {
    if (await isLive(record, { bootId: boot, sysBlock: o.sysBlock ?? SYS_BLOCK })) found.push({ device: record.device, stagingPath: record.stagingPath });
  }
  return found;
}
