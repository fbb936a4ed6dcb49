// Loop devices over disk images, through losetup. Which device serves which image is asked of the kernel
// each time (`losetup --list --json`), never remembered: a restarted program finds the devices its
// predecessor attached.
//
// A device is matched to its image by the backing file's inode and device numbers, not by its path: the
// kernel names the backing file by the path it was opened through, in the mount namespace of whoever
// attached it, and once that namespace is gone (this program's container restarted) the path it reports
// is relative to the detached mount of the disk dir (`/disk1.img`). The inode stays what it was.
import { stat } from 'node:fs/promises';
import { splitDeviceNumber } from '../api/staged-record.ts';
import { SharedRun } from '../lib/runtime/shared-run.ts';
import { NodeVolumeError } from './node-errors.ts';
import { runTool } from './run-tool.ts';

const LOSETUP_TIMEOUT_MS = 30_000;
/** How sysfs and losetup name a backing file that was removed while attached. */
const DELETED_SUFFIX = ' (deleted)';

/** A file's identity: its inode on its filesystem's device. */
export interface FileIdentity {
  ino: bigint;
  major: number;
  minor: number;
}

export interface LoopDevice {
  /** The device node, `/dev/loopN`. */
  device: string;
  /** The backing file's path as the kernel names it, without the ` (deleted)` it appends to a removed file's. */
  backingFile: string;
  /** The backing file was removed (or replaced) while attached: the device serves a file no longer in the dir. */
  deleted: boolean;
  /** Set when a detach was asked while the device was still open: it goes when the last user closes it. */
  autoclear: boolean;
  /** The backing file's inode and device, when losetup could read them. */
  backing: FileIdentity | undefined;
}

/** A disk image: its path, and its identity while the file exists. */
export interface ImageRef {
  path: string;
  identity: FileIdentity | undefined;
}

/**
 * Parses `losetup --list --json --output NAME,BACK-FILE,BACK-INO,BACK-MAJ:MIN,AUTOCLEAR` (empty output:
 * no loop device at all). Inode numbers are read as text: they may exceed what a JSON number holds exactly.
 */
export function parseLosetupList(json: string): LoopDevice[] {
  if (json.trim() === '') return [];
  const doc = JSON.parse(json.replace(/("back-ino"\s*:\s*)(\d+)/g, '$1"$2"')) as {
    loopdevices?: { name?: unknown; 'back-file'?: unknown; 'back-ino'?: unknown; 'back-maj:min'?: unknown; autoclear?: unknown }[];
  };
  const out: LoopDevice[] = [];
  for (const d of doc.loopdevices ?? []) {
    if (typeof d.name !== 'string' || typeof d['back-file'] !== 'string') continue;
    const raw = d['back-file'];
    const deleted = raw.endsWith(DELETED_SUFFIX);
    const ino = typeof d['back-ino'] === 'string' && /^\d+$/.test(d['back-ino']) ? BigInt(d['back-ino']) : undefined;
    const majMin = typeof d['back-maj:min'] === 'string' ? /^\s*(\d+):(\d+)\s*$/.exec(d['back-maj:min']) : null;
    out.push({
      device: d.name,
      backingFile: deleted ? raw.slice(0, -DELETED_SUFFIX.length) : raw,
      deleted,
      autoclear: d.autoclear === true || d.autoclear === '1' || d.autoclear === 1,
      backing: ino !== undefined && majMin ? { ino, major: Number(majMin[1]), minor: Number(majMin[2]) } : undefined,
    });
  }
  return out;
}

/** The image's identity now; undefined when there is no file at the path (any more). */
export async function imageRef(path: string): Promise<ImageRef> {
  try {
    const st = await stat(path, { bigint: true });
    return { path, identity: { ino: st.ino, ...splitDeviceNumber(st.dev) } };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { path, identity: undefined };
    throw new NodeVolumeError('internal', `cannot look at disk image ${path}: ${(err as Error).message}`, { cause: err });
  }
}

function sameFile(a: FileIdentity | undefined, b: FileIdentity | undefined): boolean {
  return a !== undefined && b !== undefined && a.ino === b.ino && a.major === b.major && a.minor === b.minor;
}

/** Whether two listings name the same attachment: the same device over the same file. */
export function sameAttachment(a: LoopDevice, b: LoopDevice): boolean {
  return a.device === b.device && (a.backing !== undefined && b.backing !== undefined ? sameFile(a.backing, b.backing) : a.backingFile === b.backingFile);
}

/**
 * Every loop device of the kernel. Volume calls come in bursts (a kubelet starting many pods), and each
 * asks for the list: calls arriving while a list is being read share the next read, which starts after
 * they asked (lib/runtime/shared-run.ts), so each still sees the kernel as it is after its call began.
 */
export function listLoopDevices(): Promise<LoopDevice[]> {
  return loopList.get();
}

const loopList = new SharedRun(readLoopDevices);

async function readLoopDevices(): Promise<LoopDevice[]> {
  const { stdout } = await runTool('losetup', ['--list', '--json', '--output', 'NAME,BACK-FILE,BACK-INO,BACK-MAJ:MIN,AUTOCLEAR'], { timeoutMs: LOSETUP_TIMEOUT_MS });
  try {
    return parseLosetupList(stdout);
  } catch (err) {
    throw new NodeVolumeError('internal', `cannot read losetup's list of loop devices: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * The loop devices serving this image: its very file (same inode on the same filesystem). Never by the
 * path: another file had it before, and on a kernel shared by several nodes, another node's file has it.
 */
export function devicesOfImage(devices: LoopDevice[], image: ImageRef): LoopDevice[] {
  return devices.filter((d) => sameFile(d.backing, image.identity));
}

/**
 * Attaches the image to a free loop device and returns it. `--nooverlap` makes losetup give back the
 * device already serving this file instead of a second one, should another attach have won a race.
 * `--direct-io=on`: the device reads and writes the image with direct I/O, so a pod's O_DIRECT write
 * reaches the host's disk as the pod asked, not the host's page cache, and no page of a tenant's data is
 * cached twice (docs/adr/0045-loop-devices-with-direct-io.md has the measurement and what is left
 * untried).
 */
export async function attachLoop(image: string): Promise<string> {
  const { stdout } = await runTool('losetup', ['--find', '--show', '--nooverlap', '--direct-io=on', image], { timeoutMs: LOSETUP_TIMEOUT_MS });
  const device = stdout.trim();
  if (!/^\/dev\/loop\d+$/.test(device)) throw new NodeVolumeError('internal', `losetup attached ${image} but named no loop device (it printed ${JSON.stringify(stdout)})`);
  return device;
}

/**
 * Detaches a loop device. The kernel accepts a detach of a device still open (by a mount elsewhere, a
 * process) and only marks it to go at the last close, so the caller checks for mounts first.
 */
export async function detachLoop(device: string): Promise<void> {
  await runTool('losetup', ['--detach', device], { timeoutMs: LOSETUP_TIMEOUT_MS });
}
