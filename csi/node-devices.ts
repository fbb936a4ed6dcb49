// The devices and mounts of a volume on the node: a loop device's own numbers, the mounts that use it (its
// filesystem, or its device node bound onto a file), unmounting, probing, formatting, and detaching a
// device once no mount uses it. A device is known by its numbers, never by a name.
import * as fsp from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { basename } from 'node:path';
import pLimit from 'p-limit';
import { detachLoop, listLoopDevices, type LoopDevice, sameAttachment } from './loop.ts';
import { type MountEntry, readMounts, topMountAt } from '../lib/runtime/mountinfo.ts';
import { SYS_BLOCK, splitDeviceNumber } from '../api/staged-record.ts';
import { NodeVolumeError } from './node-errors.ts';
import { runTool } from './run-tool.ts';

export const MOUNT_TIMEOUT_MS = 60_000;
export const BLKID_TIMEOUT_MS = 30_000;
/** mkfs of a large disk writes its metadata (ext4 initialises inode tables lazily, after the mount). */
const MKFS_TIMEOUT_MS = 10 * 60_000;
/** Stacked mounts unmounted from one path before giving up: more is not something this driver made. */
const MAX_STACKED_MOUNTS = 16;
/** After a detach, how long the device may take to go (a probe by udev holding it open for a moment). */
const DETACH_SETTLE_MS = 3000;

interface DeviceNode {
  device: string;
  /** The block device's own number (what a filesystem mounted from it shows in mountinfo). */
  rdev: { major: number; minor: number };
  /** The number of the filesystem holding the node (what a bind mount of the node itself shows). */
  dev: { major: number; minor: number };
}

export async function deviceNode(device: string): Promise<DeviceNode> {
  let st;
  try {
    st = await fsp.stat(device, { bigint: true });
  } catch (err) {
    throw new NodeVolumeError('internal', `cannot look at device ${device} (is the host's /dev mounted?): ${(err as Error).message}`, { cause: err });
  }
  if (!st.isBlockDevice()) throw new NodeVolumeError('internal', `${device} is not a block device`);
  return { device, rdev: splitDeviceNumber(st.rdev), dev: splitDeviceNumber(st.dev) };
}

export function sameNumber(m: MountEntry, n: { major: number; minor: number }): boolean {
  return m.major === n.major && m.minor === n.minor;
}

/** Whether a mount is the filesystem on this device (mounted from it, or bound from such a mount). */
export function isFilesystemOf(m: MountEntry, node: DeviceNode): boolean {
  return sameNumber(m, node.rdev);
}

/** Filesystems a device node is bound from (the host's /dev, or a container's own). */
const DEVICE_NODE_FS = new Set(['devtmpfs', 'tmpfs']);

/**
 * The mounts that use this device: its filesystem (mounted from it, or bound from such a mount), or a
 * device node of it bound onto a file (Block mode's publish, the kubelet's maps of it). A bound node is
 * known by the device number the bound file has, not by the node's name: a restarted container's /dev,
 * or another node's of a shared kernel, has other nodes of other names.
 */
async function mountsOfDevice(mounts: MountEntry[], node: DeviceNode): Promise<MountEntry[]> {
  const out: MountEntry[] = [];
  for (const m of mounts) {
    if (isFilesystemOf(m, node)) out.push(m);
    else if (m.root !== '/' && DEVICE_NODE_FS.has(m.fsType)) {
      const st = await fsp.stat(m.mountPoint, { bigint: true }).catch(() => undefined);
      const r = st?.isBlockDevice() ? splitDeviceNumber(st.rdev) : undefined;
      if (r && r.major === node.rdev.major && r.minor === node.rdev.minor) out.push(m);
    }
  }
  return out;
}

/** Unmounts everything stacked on the path, top first; nothing mounted is success. */
export async function unmountAll(path: string): Promise<void> {
  for (let i = 0; i < MAX_STACKED_MOUNTS; i++) {
    if (!topMountAt(await readMounts(), path)) return;
    try {
      await runTool('umount', [path], { timeoutMs: MOUNT_TIMEOUT_MS });
    } catch (err) {
      // Unmounted meanwhile: the next look says so.
      if (!topMountAt(await readMounts(), path)) return;
      if (/busy/i.test((err as Error).message)) {
        throw new NodeVolumeError('failed-precondition', `${path} is busy (a process still uses it): not unmounted. ${(err as Error).message}`, { cause: err });
      }
      throw err;
    }
  }
  throw new NodeVolumeError('internal', `more than ${MAX_STACKED_MOUNTS} mounts are stacked on ${path}: not made by this driver, left for a person`);
}

export type Probe = { kind: 'blank' } | { kind: 'filesystem'; type: string } | { kind: 'other'; what: string };

/** What the device holds, by its signatures (blkid -p reads the device itself, no cache). */
export async function probe(device: string): Promise<Probe> {
  const r = await runTool('blkid', ['-p', '-o', 'export', device], { timeoutMs: BLKID_TIMEOUT_MS, okExitCodes: [2, 8] });
  if (r.exitCode === 2) return { kind: 'blank' };
  if (r.exitCode === 8) return { kind: 'other', what: 'several conflicting signatures' };
  const fields = new Map(
    r.stdout
      .split('\n')
      .map((l) => l.split('='))
      .filter((kv) => kv.length >= 2)
      .map(([k, ...v]) => [k!, v.join('=')] as const),
  );
  const type = fields.get('TYPE');
  if (type && fields.get('USAGE') !== 'raid' && fields.get('USAGE') !== 'crypto') return { kind: 'filesystem', type };
  if (type) return { kind: 'other', what: `a ${type} signature` };
  const pt = fields.get('PTTYPE');
  return { kind: 'other', what: pt ? `a ${pt} partition table` : 'a signature blkid names no type for' };
}

/** Formats at once when nothing says otherwise: one a core. */
export const DEFAULT_FORMATS_AT_ONCE = availableParallelism();
let formats = pLimit(DEFAULT_FORMATS_AT_ONCE);

/**
 * How many mkfs runs this node side lets run at once; the others wait their turn, first asked first run.
 * Sharing the cores among every stage of a burst finishes them all late; in turn, most finish early.
 */
export function setFormatsAtOnce(n: number): void {
  formats = pLimit(n);
}

export function format(fsType: string, device: string): Promise<void> {
  // Its time limit counts from its own start, not from the wait for its turn.
  return formats(() => formatNow(fsType, device));
}

async function formatNow(fsType: string, device: string): Promise<void> {
  // -F: mke2fs would otherwise ask before formatting a whole device, and nobody answers. The device was
  // probed blank just before, so nothing is overwritten; mkfs.xfs refuses an existing signature anyway.
  const args = fsType === 'xfs' ? ['-q', device] : ['-F', '-q', device];
  await runTool(`mkfs.${fsType}`, args, { timeoutMs: MKFS_TIMEOUT_MS });
}

/** Detaches the loop devices if no mount uses them, and waits until the kernel has let them go. */
export async function detachUnmounted(devices: LoopDevice[], image: string): Promise<void> {
  if (devices.length === 0) return;
  const mounts = await readMounts();
  const nodes = await Promise.all(devices.map((d) => deviceNode(d.device)));
  const busy: string[] = [];
  for (const n of nodes) {
    const where = await mountsOfDevice(mounts, n);
    if (where.length) busy.push(`${n.device} is mounted at ${where.map((m) => m.mountPoint).join(', ')}`);
  }
  if (busy.length) {
    throw new NodeVolumeError('failed-precondition', `the loop device of ${image} is still in use, so it is not detached: ${busy.join('; ')} (a publish not yet undone?)`);
  }
  for (const d of devices) {
    try {
      await detachLoop(d.device);
    } catch (err) {
      // Detached meanwhile, or the number reused for another file: either way not this image's any more.
      if ((await listLoopDevices()).some((x) => sameAttachment(x, d))) throw err;
    }
  }
  const deadline = Date.now() + DETACH_SETTLE_MS;
  for (;;) {
    // The kernel removes a device's sysfs `loop` dir at the detach: a device without one is gone, and only
    // one that has one (still ours, or reused meanwhile by another node of a shared kernel) needs the full
    // list, a losetup run that reads every loop device of the kernel.
    const maybe: LoopDevice[] = [];
    for (const d of devices) if (await fsp.stat(`${SYS_BLOCK}/${basename(d.device)}/loop`).catch(() => undefined)) maybe.push(d);
    if (maybe.length === 0) return;
    const left = (await listLoopDevices()).filter((x) => maybe.some((d) => sameAttachment(x, d)));
    if (left.length === 0) return;
    if (Date.now() > deadline) {
      throw new NodeVolumeError(
        'failed-precondition',
        `loop device ${left.map((x) => x.device).join(', ')} of ${image} is still open (a process, or a mount in another mount namespace): the kernel detaches it at its last close`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
