// The CSI node side's record of a staged volume: `<disk>.img.staged` beside the image, written when it
// attaches the image to a loop device, removed once that device is detached. It is how the agent, which
// has no device access, knows an image still serves a volume and must not be wiped; and how a restarted
// node side finds a device whose image was removed or renamed since.
//
// Nothing in it is trusted by its path: a record names the image by its inode and filesystem device, and
// the loop device by its number and its disk sequence number (sysfs `diskseq`, which the kernel raises at
// every attach and detach), with the boot it was made in. A record is live only while that same device
// still has that same sequence number in that same boot: a device detached since, reused by another node
// of a shared kernel, or gone with a reboot makes it stale, never a match. Its name is for people (`ls`
// on the node shows which disks are staged); the agent and the node side match records by their content.
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { DISK_SUFFIX, STAGED_SUFFIX } from './constants.ts';

export const SYS_BLOCK = '/sys/block';
export const BOOT_ID_FILE = '/proc/sys/kernel/random/boot_id';
/** A record is a few hundred bytes; anything larger is not one and is not read whole. */
const RECORD_READ_LIMIT = 4096;

/** The longest staging path a record may name (PATH_MAX). */
const MAX_STAGING_PATH = 4096;

/** A device or inode number pair as text, `major:minor`. */
export type DeviceNumber = `${number}:${number}`;

export interface StagedRecord {
  /** Where the volume is staged (the kubelet's staging path): what unstage is asked with. */
  stagingPath: string;
  /** The loop device, `/dev/loopN`, and its device number. */
  device: string;
  rdev: DeviceNumber;
  /** sysfs `diskseq` of the device right after the attach; undefined on kernels without it. */
  diskseq: string | undefined;
  bootId: string;
  /** The image: inode number (decimal text, it may exceed a JSON number) and the device of its filesystem. */
  image: { ino: string; dev: DeviceNumber };
}

/** A device number (st_dev, st_rdev as stat gives them) split as glibc's major() and minor() do. */
export function splitDeviceNumber(dev: bigint): { major: number; minor: number } {
  return {
    major: Number(((dev & 0xfff00n) >> 8n) | ((dev & 0xfffff00000000000n) >> 32n)),
    minor: Number((dev & 0xffn) | ((dev & 0xffffff00000n) >> 12n)),
  };
}

/** A device number as text, `major:minor`. */
export function deviceNumberText(dev: bigint): DeviceNumber {
  const { major, minor } = splitDeviceNumber(dev);
  return `${major}:${minor}`;
}

export function stagedRecordName(diskID: string): string {
  return `${diskID}${DISK_SUFFIX}${STAGED_SUFFIX}`;
}

const DEVNUM = /^\d+:\d+$/;

/** A record's text, or undefined when it is not one (any other shape, or a field of the wrong kind). */
export function parseStagedRecord(text: string): StagedRecord | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof doc !== 'object' || doc === null) return undefined;
  const d = doc as Record<string, unknown>;
  const image = d.image as Record<string, unknown> | null | undefined;
  if (
    typeof d.stagingPath !== 'string' ||
    !d.stagingPath.startsWith('/') ||
    d.stagingPath.length > MAX_STAGING_PATH ||
    // It reaches the agent's report and people's terminals: no control characters (escape sequences).
    /[\0-\x1f\x7f]/.test(d.stagingPath) ||
    typeof d.device !== 'string' ||
    !/^\/dev\/loop\d+$/.test(d.device) ||
    typeof d.rdev !== 'string' ||
    !DEVNUM.test(d.rdev) ||
    !(d.diskseq === undefined || (typeof d.diskseq === 'string' && /^\d+$/.test(d.diskseq))) ||
    typeof d.bootId !== 'string' ||
    d.bootId === '' ||
    typeof image !== 'object' ||
    image === null ||
    typeof image.ino !== 'string' ||
    !/^\d+$/.test(image.ino) ||
    typeof image.dev !== 'string' ||
    !DEVNUM.test(image.dev)
  ) {
    return undefined;
  }
  return {
    stagingPath: d.stagingPath,
    device: d.device,
    rdev: d.rdev as DeviceNumber,
    diskseq: d.diskseq as string | undefined,
    bootId: d.bootId,
    image: { ino: image.ino, dev: image.dev as DeviceNumber },
  };
}

export function formatStagedRecord(r: StagedRecord): string {
  return `${JSON.stringify(r)}\n`;
}

export interface FoundRecord {
  /** The record's file name in the disk dir. */
  name: string;
  record: StagedRecord;
}

/**
 * The records of the disk dir. The dir is not trusted: only regular files are read (lstat, then an
 * O_NOFOLLOW|O_NONBLOCK open checked again with fstat), at most a few KiB of each; anything that is not a
 * record is passed over.
 */
export async function readStagedRecords(diskDir: string): Promise<FoundRecord[]> {
  let names: string[];
  try {
    names = await fsp.readdir(diskDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const out: FoundRecord[] = [];
  for (const name of names.filter((n) => n.endsWith(`${DISK_SUFFIX}${STAGED_SUFFIX}`)).sort()) {
    const text = await readSmallRegularFile(join(diskDir, name));
    const record = text === undefined ? undefined : parseStagedRecord(text);
    if (record) out.push({ name, record });
  }
  return out;
}

async function readSmallRegularFile(path: string): Promise<string | undefined> {
  try {
    const st = await fsp.lstat(path);
    if (!st.isFile() || st.size > RECORD_READ_LIMIT) return undefined;
    const fh = await fsp.open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
    try {
      const fst = await fh.stat();
      if (!fst.isFile() || fst.ino !== st.ino || fst.dev !== st.dev) return undefined;
      const buf = Buffer.alloc(RECORD_READ_LIMIT);
      const { bytesRead } = await fh.read(buf, 0, RECORD_READ_LIMIT, 0);
      return buf.subarray(0, bytesRead).toString('utf8');
    } finally {
      await fh.close();
    }
  } catch (err) {
    // Gone meanwhile, or something that cannot be opened as a file: not a record.
    if (['ENOENT', 'ELOOP', 'EACCES', 'ENXIO', 'EISDIR'].includes((err as NodeJS.ErrnoException).code ?? '')) return undefined;
    throw err;
  }
}

/** This boot's ID: records of another boot are stale. */
export async function bootId(file = BOOT_ID_FILE): Promise<string> {
  return (await fsp.readFile(file, 'utf8')).trim();
}

/** sysfs `diskseq` of a block device, or undefined on kernels without it (or when the device is not there). */
export async function diskSeq(deviceName: string, sysBlock = SYS_BLOCK): Promise<string | undefined> {
  try {
    const v = (await fsp.readFile(join(sysBlock, deviceName, 'diskseq'), 'utf8')).trim();
    return /^\d+$/.test(v) ? v : undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Whether the record's loop device is still the attachment it recorded: the same boot, the device still
 * attached (sysfs has its `loop/` dir) and, where the kernel counts them, not attached or detached since.
 */
export async function isLive(r: StagedRecord, o: { bootId: string; sysBlock?: string }): Promise<boolean> {
  if (r.bootId !== o.bootId) return false;
  const sysBlock = o.sysBlock ?? SYS_BLOCK;
  const name = r.device.slice('/dev/'.length);
  try {
    const dev = (await fsp.readFile(join(sysBlock, name, 'dev'), 'utf8')).trim();
    if (dev !== r.rdev) return false;
    await fsp.access(join(sysBlock, name, 'loop', 'backing_file'));
    if (r.diskseq === undefined) return true;
    return (await diskSeq(name, sysBlock)) === r.diskseq;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new Error(`cannot read loop device ${name} in ${sysBlock}: ${(err as Error).message}`, { cause: err });
  }
}

/** Whether a record names this image: the same inode on the same filesystem. */
export function recordsImage(r: StagedRecord, image: { ino: bigint; dev: DeviceNumber }): boolean {
  return r.image.ino === image.ino.toString() && r.image.dev === image.dev;
}
