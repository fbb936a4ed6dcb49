// The node side of a volume: a disk image served by a loop device, formatted and mounted at the staging
// path (Filesystem mode) and bind-mounted into the pod's target path, or the loop device itself
// bind-mounted on a file at the target path (Block mode).
//
// Every operation is idempotent and starts from what the node shows (/proc/self/mountinfo, losetup's list
// of loop devices), never from memory: the program restarted under running pods finds their volumes again,
// and an operation repeated after a timeout does what is left and nothing twice. A disk that holds a
// filesystem other than the one asked, or any other signature (a partition table), is refused, never
// formatted: only a disk with nothing on it is formatted (the agent wipes a disk before it changes hands).
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { DISK_SUFFIX } from '../api/constants.ts';
import { diskIdFromFileName, diskIdProblem, nodeDiskName } from '../api/names.ts';
import { attachLoop, detachLoop, devicesOfImage, type ImageRef, imageRef, listLoopDevices, type LoopDevice, sameAttachment } from './loop.ts';
import { canonicalPath, isReadOnly, type MountEntry, readMounts, splitDeviceNumber, topMountAt } from './mountinfo.ts';
import { NodeVolumeError } from './node-errors.ts';
import { OneAtATime } from '../lib/runtime/one-at-a-time.ts';
import { hasTool, runTool } from './run-tool.ts';
import { liveRecordsAt, removeStagedRecords, stagedRecordOf, writeStagedRecord } from './staged-records.ts';

export { isMountPoint } from './mountinfo.ts';
export { isNodeVolumeError, NodeVolumeError, type NodeVolumeErrorCode } from './node-errors.ts';

export type VolumeMode = 'filesystem' | 'block';

const MOUNT_TIMEOUT_MS = 60_000;
const BLKID_TIMEOUT_MS = 30_000;
/** mkfs of a large disk writes its metadata (ext4 initialises inode tables lazily, after the mount). */
const MKFS_TIMEOUT_MS = 10 * 60_000;
/** Stacked mounts unmounted from one path before giving up: more is not something this driver made. */
const MAX_STACKED_MOUNTS = 16;
/** After a detach, how long the device may take to go (a probe by udev holding it open for a moment). */
const DETACH_SETTLE_MS = 3000;

const OPEN_IMAGE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;
const CREATE_TARGET_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

/** Options that would make mount(8) do something else than mount the volume's filesystem (bind, move, set up its own loop device, …). */
const MOUNT_ACTIONS = /^(bind|rbind|move|remount|loop|offset|sizelimit|encryption|X-mount\.[\w-]+|x-mount\.[\w-]+)(=.*)?$/;

/** Per-mount flags a bind mount can carry (the rest of the mount options apply where the filesystem is mounted). */
const PER_MOUNT_FLAGS = new Set(['ro', 'nosuid', 'nodev', 'noexec', 'noatime', 'nodiratime', 'relatime', 'strictatime']);

/** Filesystems this driver formats and mounts: ext4 and ext3 from e2fsprogs, xfs where mkfs.xfs is installed. */
export async function supportedFsTypes(): Promise<string[]> {
  return ['ext4', 'ext3', ...((await hasTool('mkfs.xfs')) ? ['xfs'] : [])];
}

// ---------------------------------------------------------------------------------------------------------
// Arguments

function absolutePath(what: string, p: unknown): string {
  if (typeof p !== 'string' || p === '') throw new NodeVolumeError('invalid', `${what} is missing`);
  if (!p.startsWith('/')) throw new NodeVolumeError('invalid', `${what} ${JSON.stringify(p)} is not an absolute path`);
  if (p.includes('\0')) throw new NodeVolumeError('invalid', `${what} contains a NUL character`);
  return p;
}

async function pathArg(what: string, p: unknown): Promise<string> {
  return canonicalPath(absolutePath(what, p));
}

function modeArg(mode: unknown): VolumeMode {
  if (mode === 'filesystem' || mode === 'block') return mode;
  throw new NodeVolumeError('invalid', `volume mode ${JSON.stringify(mode)} is neither 'filesystem' nor 'block'`);
}

/**
 * The mount options, one option an element: an element may join several with commas (mount(8) splits them
 * so), and each of those is checked on its own.
 */
function mountOptionsArg(options: unknown): string[] {
  if (options === undefined) return [];
  if (!Array.isArray(options)) throw new NodeVolumeError('invalid', 'mount options must be a list');
  const out: string[] = [];
  for (const element of options) {
    if (typeof element !== 'string') throw new NodeVolumeError('invalid', `mount option ${JSON.stringify(element)} is not a string`);
    for (const o of element.split(',')) {
      if (o === '') throw new NodeVolumeError('invalid', `mount option ${JSON.stringify(element)} is empty or has an empty option between its commas`);
      if (/[\0-\x1f]/.test(o)) throw new NodeVolumeError('invalid', `mount option ${JSON.stringify(o)} contains a control character`);
      if (MOUNT_ACTIONS.test(o)) throw new NodeVolumeError('invalid', `mount option ${JSON.stringify(o)} changes what mount does, not how the filesystem is mounted: not accepted`);
      out.push(o);
    }
  }
  return out;
}

/** Whether mount(8) mounts read-only with these options: the last of ro and rw decides. */
function readOnlyByOptions(options: string[]): boolean {
  return options.findLast((o) => o === 'ro' || o === 'rw') === 'ro';
}

async function fsTypeArg(fsType: unknown): Promise<string> {
  const t = fsType === undefined || fsType === '' ? 'ext4' : fsType;
  const supported = await supportedFsTypes();
  if (typeof t !== 'string' || !supported.includes(t)) {
    throw new NodeVolumeError('invalid', `filesystem type ${JSON.stringify(t)} is not offered on this node (offered: ${supported.join(', ')})`);
  }
  return t;
}

function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

// ---------------------------------------------------------------------------------------------------------
// Images

/**
 * Checks that the image is a regular file, not a link or anything else, looked at without following a
 * link (lstat, then an O_NOFOLLOW open checked with fstat, so an entry swapped in between is caught).
 */
async function checkImage(image: string): Promise<string> {
  const name = basename(image);
  let st;
  try {
    st = await fsp.lstat(image);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') throw new NodeVolumeError('not-found', `disk image ${image} does not exist on this node`, { cause: err });
    throw new NodeVolumeError('internal', `cannot inspect disk image ${image}: ${(err as Error).message}`, { cause: err });
  }
  if (st.isSymbolicLink()) throw new NodeVolumeError('failed-precondition', `disk image ${image} is a symbolic link: a disk image is never followed through a link`);
  if (!st.isFile()) throw new NodeVolumeError('failed-precondition', `disk image ${image} is not a regular file`);
  let fh;
  try {
    fh = await fsp.open(image, OPEN_IMAGE_FLAGS);
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ELOOP') throw new NodeVolumeError('failed-precondition', `disk image ${image} is a symbolic link: a disk image is never followed through a link`, { cause: err });
    if (code === 'ENOENT') throw new NodeVolumeError('not-found', `disk image ${image} does not exist on this node`, { cause: err });
    throw new NodeVolumeError('internal', `cannot open disk image ${name}: ${(err as Error).message}`, { cause: err });
  }
  try {
    const fst = await fh.stat();
    if (!fst.isFile() || fst.ino !== st.ino || fst.dev !== st.dev)
      throw new NodeVolumeError('failed-precondition', `disk image ${image} changed while it was looked at: not a stable regular file`);
  } finally {
    await fh.close();
  }
  return image;
}

/** The image as it is now; a missing one is not found. */
async function existingImage(path: string): Promise<ImageRef> {
  const ref = await imageRef(path);
  if (ref.identity === undefined) throw new NodeVolumeError('not-found', `disk image ${path} does not exist on this node`);
  return ref;
}

/**
 * The disk image `<diskDir>/<diskID>.img`, checked: a valid diskID (the agent's rules, so never a path
 * out of the dir), a regular file that is not a link. The dir is resolved, so the path is the one the
 * kernel reports for the loop device's backing file.
 */
export async function openImage(diskDir: string, diskID: string): Promise<string> {
  if (typeof diskID !== 'string') throw new NodeVolumeError('invalid', 'diskID is missing');
  const problem = diskIdProblem(diskID);
  if (problem) throw new NodeVolumeError('invalid', problem);
  absolutePath('disk dir', diskDir);
  let dir;
  try {
    dir = await fsp.realpath(diskDir);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') throw new NodeVolumeError('not-found', `disk dir ${diskDir} does not exist on this node`, { cause: err });
    throw new NodeVolumeError('internal', `cannot resolve disk dir ${diskDir}: ${(err as Error).message}`, { cause: err });
  }
  return checkImage(join(dir, `${diskID}${DISK_SUFFIX}`));
}

/**
 * The images of the disk dir whose NodeDisk name (api/names.ts nodeDiskName) on this node is `name`:
 * what a request that carries only a volume ID (`<NodeDisk name>/…`: NodeUnstageVolume) is found by,
 * with no API access. Usually one; two files whose names make the same NodeDisk name give both (the
 * agent reports only one of them as a NodeDisk), none gives an empty list.
 */
export async function imagesNamed(diskDir: string, nodeName: string, name: string): Promise<string[]> {
  absolutePath('disk dir', diskDir);
  let dir;
  let entries;
  try {
    dir = await fsp.realpath(diskDir);
    entries = await fsp.readdir(dir);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return [];
    throw new NodeVolumeError('internal', `cannot read disk dir ${diskDir}: ${(err as Error).message}`, { cause: err });
  }
  return entries
    .filter((f) => {
      const id = diskIdFromFileName(f);
      return id !== undefined && diskIdProblem(id) === undefined && nodeDiskName(nodeName, id) === name;
    })
    .sort()
    .map((f) => join(dir, f));
}

// ---------------------------------------------------------------------------------------------------------
// Devices and mounts

interface DeviceNode {
  device: string;
  /** The block device's own number (what a filesystem mounted from it shows in mountinfo). */
  rdev: { major: number; minor: number };
  /** The number of the filesystem holding the node (what a bind mount of the node itself shows). */
  dev: { major: number; minor: number };
}

async function deviceNode(device: string): Promise<DeviceNode> {
  let st;
  try {
    st = await fsp.stat(device, { bigint: true });
  } catch (err) {
    throw new NodeVolumeError('internal', `cannot look at loop device ${device} (is the host's /dev mounted?): ${(err as Error).message}`, { cause: err });
  }
  if (!st.isBlockDevice()) throw new NodeVolumeError('internal', `${device} is not a block device`);
  return { device, rdev: splitDeviceNumber(st.rdev), dev: splitDeviceNumber(st.dev) };
}

function sameNumber(m: MountEntry, n: { major: number; minor: number }): boolean {
  return m.major === n.major && m.minor === n.minor;
}

/** Whether a mount is the filesystem on this device (mounted from it, or bound from such a mount). */
function isFilesystemOf(m: MountEntry, node: DeviceNode): boolean {
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
async function unmountAll(path: string): Promise<void> {
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

type Probe = { kind: 'blank' } | { kind: 'filesystem'; type: string } | { kind: 'other'; what: string };

/** What the device holds, by its signatures (blkid -p reads the device itself, no cache). */
async function probe(device: string): Promise<Probe> {
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

async function format(fsType: string, device: string): Promise<void> {
  // -F: mke2fs would otherwise ask before formatting a whole device, and nobody answers. The device was
  // probed blank just before, so nothing is overwritten; mkfs.xfs refuses an existing signature anyway.
  const args = fsType === 'xfs' ? ['-q', device] : ['-F', '-q', device];
  await runTool(`mkfs.${fsType}`, args, { timeoutMs: MKFS_TIMEOUT_MS });
}

/** Detaches the loop devices if no mount uses them, and waits until the kernel has let them go. */
async function detachUnmounted(devices: LoopDevice[], image: string): Promise<void> {
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
    const left = (await listLoopDevices()).filter((x) => devices.some((d) => sameAttachment(x, d)));
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

// ---------------------------------------------------------------------------------------------------------
// One operation at a time per volume within this process (a CO retrying while the first call still runs);
// nothing is kept once it is done.

const queue = new OneAtATime();
const serialized = <T>(key: string, fn: () => Promise<T>): Promise<T> => queue.run(key, fn);

// ---------------------------------------------------------------------------------------------------------
// The operations

export interface StageRequest {
  /** The disk image, from openImage. */
  image: string;
  stagingPath: string;
  mode: VolumeMode;
  /** Filesystem mode: the filesystem to find on the disk, or to make on a blank one (default ext4). */
  fsType?: string | undefined;
  mountOptions?: string[] | undefined;
  readOnly?: boolean | undefined;
}

/**
 * Makes the image's loop device ready on this node: attached (the one already serving the image, else a
 * new one), and in Filesystem mode formatted if blank and mounted at the staging path. Block mode mounts
 * nothing: the device is found again from the image. Returns the loop device.
 */
export async function stage(r: StageRequest): Promise<{ device: string }> {
  const mode = modeArg(r.mode);
  const image = await checkImage(absolutePath('disk image', r.image));
  const stagingPath = await pathArg('staging path', r.stagingPath);
  const ref = await existingImage(image);
  if (mode === 'block') {
    return serialized(image, async () => {
      const already = devicesOfImage(await listLoopDevices(), ref)[0]?.device;
      const device = already ?? (await attachLoop(image));
      await recordOrDetach(ref, device, stagingPath, already === undefined);
      return { device };
    });
  }
  const fsType = await fsTypeArg(r.fsType);
  const readOnly = r.readOnly === true;
  const options = [...mountOptionsArg(r.mountOptions), ...(readOnly ? ['ro'] : [])];
  // What the mount is, read-only access or a class's `ro` option alike: a repeated stage compares with this.
  const mountedReadOnly = readOnlyByOptions(options);
  return serialized(image, async () => {
    try {
      await fsp.mkdir(stagingPath, { recursive: true, mode: 0o750 });
    } catch (err) {
      throw new NodeVolumeError('failed-precondition', `cannot make staging dir ${stagingPath}: ${(err as Error).message}`, { cause: err });
    }
    const attached = devicesOfImage(await listLoopDevices(), ref);
    const top = topMountAt(await readMounts(), stagingPath);
    if (top) {
      const nodes = await Promise.all(attached.map((d) => deviceNode(d.device)));
      const ours = nodes.find((n) => isFilesystemOf(top, n) && top.root === '/');
      if (!ours) throw new NodeVolumeError('already-exists', `staging path ${stagingPath} already has ${top.source} (${top.fsType}) mounted, not a loop device of ${image}`);
      if (top.fsType !== fsType) throw new NodeVolumeError('already-exists', `staging path ${stagingPath} has ${image} mounted as ${top.fsType}, not ${fsType}`);
      // Staged by a program that stopped before it wrote the record (or wrote none): written now.
      await writeStagedRecord(ref, await stagedRecordOf(ref, ours.device, stagingPath));
      if (isReadOnly(top) !== mountedReadOnly) {
        throw new NodeVolumeError(
          'already-exists',
          `staging path ${stagingPath} has ${image} mounted ${isReadOnly(top) ? 'read-only' : 'read-write'}, not ${mountedReadOnly ? 'read-only' : 'read-write'}`,
        );
      }
      return { device: ours.device };
    }
    const already = attached[0]?.device;
    const device = already ?? (await attachLoop(image));
    await recordOrDetach(ref, device, stagingPath, already === undefined);
    try {
      const found = await probe(device);
      if (found.kind === 'other') {
        throw new NodeVolumeError('failed-precondition', `disk image ${image} holds ${found.what}, not a ${fsType} filesystem: it is never formatted over, left as it is`);
      }
      if (found.kind === 'filesystem' && found.type !== fsType) {
        throw new NodeVolumeError(
          'failed-precondition',
          `disk image ${image} holds a ${found.type} filesystem, not ${fsType}: it is never reformatted (ask for fsType ${found.type}, or wipe the disk)`,
        );
      }
      if (found.kind === 'blank') {
        if (readOnly) throw new NodeVolumeError('failed-precondition', `disk image ${image} holds no filesystem, and a read-only volume cannot be formatted`);
        await format(fsType, device);
      }
      await runTool('mount', ['-t', fsType, ...(options.length ? ['-o', options.join(',')] : []), device, stagingPath], { timeoutMs: MOUNT_TIMEOUT_MS });
    } catch (err) {
      // A device this call attached is not left behind by its failure (nothing else knows of it yet).
      if (!already) await detachOwn(ref, device, stagingPath);
      throw err;
    }
    return { device };
  });
}

/**
 * Records the stage (./staged-records.ts) before anything is written to the device; a record that cannot
 * be written fails the stage, and a device this call attached goes with it.
 */
async function recordOrDetach(ref: ImageRef, device: string, stagingPath: string, attachedNow: boolean): Promise<void> {
  try {
    await writeStagedRecord(ref, await stagedRecordOf(ref, device, stagingPath));
  } catch (err) {
    if (attachedNow) await detachOwn(ref, device, stagingPath);
    throw err;
  }
}

/** Detaches a device this call attached, after a failure, and forgets its record: best effort, the failure is what is reported. */
async function detachOwn(ref: ImageRef, device: string, stagingPath: string): Promise<void> {
  const mine = devicesOfImage(await listLoopDevices(), ref).filter((d) => d.device === device);
  try {
    await detachUnmounted(mine, ref.path);
    await removeStagedRecords(dirname(ref.path), stagingPath);
  } catch {
    // Left for the unstage the CO sends after a failed stage, which finds the device by the image.
  }
}

export interface PublishRequest {
  /** Filesystem mode: where stage mounted the filesystem. */
  stagingPath: string;
  /** Filesystem mode: a directory (made here); Block mode: a file (made here, with its parent dir). */
  targetPath: string;
  mode: VolumeMode;
  image: string;
  readOnly?: boolean | undefined;
  /** Only the per-mount flags among them apply here (nosuid, noexec, …); the rest applied at stage. */
  mountOptions?: string[] | undefined;
}

/** Bind-mounts the staged volume (Filesystem) or the loop device (Block) at the target path, unless it is already there. */
export async function publish(r: PublishRequest): Promise<void> {
  const mode = modeArg(r.mode);
  const image = await existingImage(absolutePath('disk image', r.image));
  const targetPath = await pathArg('target path', r.targetPath);
  const options = mountOptionsArg(r.mountOptions);
  const readOnly = r.readOnly === true || readOnlyByOptions(options);
  const flags = [...new Set([...(readOnly ? ['ro'] : []), ...options.filter((o) => PER_MOUNT_FLAGS.has(o) && o !== 'ro')])];
  if (mode === 'filesystem') {
    const stagingPath = await pathArg('staging path', r.stagingPath);
    return serialized(targetPath, async () => {
      const mounts = await readMounts();
      const staged = topMountAt(mounts, stagingPath);
      if (!staged) throw new NodeVolumeError('failed-precondition', `the volume is not staged: nothing is mounted at ${stagingPath}`);
      const nodes = await Promise.all(devicesOfImage(await listLoopDevices(), image).map((d) => deviceNode(d.device)));
      if (!nodes.some((n) => isFilesystemOf(staged, n))) {
        throw new NodeVolumeError('failed-precondition', `staging path ${stagingPath} has ${staged.source} mounted, not a loop device of ${image.path}`);
      }
      await makeTargetDir(targetPath);
      const top = topMountAt(mounts, targetPath);
      if (top) {
        if (!sameNumber(top, staged) || top.root !== staged.root)
          throw new NodeVolumeError('already-exists', `target path ${targetPath} already has ${top.source} mounted, not the volume staged at ${stagingPath}`);
        // A read-only staging makes every bind of it read-only.
        checkReadOnly(top, readOnly || isReadOnly(staged) || staged.superOptions.includes('ro'), targetPath);
        return;
      }
      await bind(stagingPath, targetPath, flags);
    });
  }
  return serialized(targetPath, async () => {
    const attached = devicesOfImage(await listLoopDevices(), image);
    if (attached.length === 0) throw new NodeVolumeError('failed-precondition', `the volume is not staged: no loop device serves ${image.path}`);
    const nodes = await Promise.all(attached.map((d) => deviceNode(d.device)));
    const top = topMountAt(await readMounts(), targetPath);
    if (top) {
      const st = await fsp.stat(targetPath, { bigint: true }).catch(() => undefined);
      const rdev = st?.isBlockDevice() ? splitDeviceNumber(st.rdev) : undefined;
      const bound = rdev !== undefined && nodes.some((n) => n.rdev.major === rdev.major && n.rdev.minor === rdev.minor);
      if (!bound) throw new NodeVolumeError('already-exists', `target path ${targetPath} already has ${top.source} mounted, not a loop device of ${image.path}`);
      checkReadOnly(top, readOnly, targetPath);
      return;
    }
    await makeTargetFile(targetPath);
    await bind(nodes[0]!.device, targetPath, flags);
  });
}

function checkReadOnly(top: MountEntry, readOnly: boolean, targetPath: string): void {
  if (isReadOnly(top) !== readOnly) {
    throw new NodeVolumeError('already-exists', `target path ${targetPath} has the volume mounted ${isReadOnly(top) ? 'read-only' : 'read-write'}, not ${readOnly ? 'read-only' : 'read-write'}`);
  }
}

async function makeTargetDir(targetPath: string): Promise<void> {
  try {
    await fsp.mkdir(targetPath, { recursive: true, mode: 0o750 });
  } catch (err) {
    throw new NodeVolumeError('already-exists', `cannot make target dir ${targetPath}: ${(err as Error).message}`, { cause: err });
  }
}

/** Block mode's target: an empty file to bind the device on, made without following a link. */
async function makeTargetFile(targetPath: string): Promise<void> {
  try {
    await fsp.mkdir(dirname(targetPath), { recursive: true, mode: 0o750 });
    const fh = await fsp.open(targetPath, CREATE_TARGET_FLAGS, 0o640);
    try {
      if (!(await fh.stat()).isFile()) throw new NodeVolumeError('already-exists', `target path ${targetPath} exists and is not a regular file`);
    } finally {
      await fh.close();
    }
  } catch (err) {
    if (err instanceof NodeVolumeError) throw err;
    throw new NodeVolumeError('already-exists', `cannot make target file ${targetPath}: ${(err as Error).message}`, { cause: err });
  }
}

/** A bind mount, then its per-mount flags (read-only among them); a bind that cannot take them is undone. */
async function bind(source: string, targetPath: string, flags: string[]): Promise<void> {
  await runTool('mount', ['--bind', source, targetPath], { timeoutMs: MOUNT_TIMEOUT_MS });
  if (flags.length === 0) return;
  try {
    await runTool('mount', ['-o', ['remount', 'bind', ...flags].join(','), targetPath], { timeoutMs: MOUNT_TIMEOUT_MS });
  } catch (err) {
    await runTool('umount', [targetPath], { timeoutMs: MOUNT_TIMEOUT_MS }).catch(() => undefined);
    throw err;
  }
}

/** Unmounts everything at the target path and removes it (the dir or the file); nothing there is success. */
export async function unpublish(targetPath: string): Promise<void> {
  const target = await pathArg('target path', targetPath);
  return serialized(target, async () => {
    await unmountAll(target);
    let st;
    try {
      st = await fsp.lstat(target);
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return;
      throw new NodeVolumeError('internal', `cannot inspect target path ${target}: ${(err as Error).message}`, { cause: err });
    }
    try {
      if (st.isDirectory()) await fsp.rmdir(target);
      else await fsp.unlink(target);
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'ENOENT') return;
      if (code === 'ENOTEMPTY' || code === 'EEXIST') {
        throw new NodeVolumeError('failed-precondition', `target dir ${target} is not empty once unmounted (something wrote into it while nothing was mounted): left as it is`, { cause: err });
      }
      throw new NodeVolumeError('internal', `cannot remove target path ${target}: ${(err as Error).message}`, { cause: err });
    }
  });
}

export interface UnstageRequest {
  stagingPath: string;
  /** The disk dir: where the stage's record is (api/staged-record.ts). */
  diskDir: string;
  /** The disk image, when its name still leads to one: the loop devices serving its inode are this volume's too. */
  image?: string | undefined;
}

/**
 * Unmounts the staging path and detaches the volume's loop devices, unless a mount of one remains
 * elsewhere (a publish not undone): that is an error, not a detach. Nothing there is success.
 *
 * The volume's devices are found by what they are, never by a path: the device whose filesystem is
 * mounted at the staging path (Filesystem), the devices serving the image's inode, and the device of the
 * stage's record while it is still that attachment and serves the inode recorded (an image removed or
 * renamed since). A device over another file of the same path (another node's, on a shared kernel) is
 * none of these.
 */
export async function unstage(r: UnstageRequest): Promise<void> {
  const stagingPath = await pathArg('staging path', r.stagingPath);
  const diskDir = absolutePath('disk dir', r.diskDir);
  const image = r.image === undefined ? undefined : absolutePath('disk image', r.image);
  return serialized(image ?? stagingPath, async () => {
    const devices = await listLoopDevices();
    const mine: LoopDevice[] = [];
    const add = (d: LoopDevice | undefined) => {
      if (d && !mine.some((m) => m.device === d.device)) mine.push(d);
    };
    const top = topMountAt(await readMounts(), stagingPath);
    if (top) {
      for (const d of devices) {
        const n = await deviceNode(d.device).catch(() => undefined);
        if (n && isFilesystemOf(top, n)) add(d);
      }
    }
    if (image !== undefined) for (const d of devicesOfImage(devices, await imageRef(image))) add(d);
    for (const rec of await liveRecordsAt(diskDir, stagingPath)) {
      add(devices.find((d) => d.device === rec.device && d.backing !== undefined && `${d.backing.ino}` === rec.image.ino && `${d.backing.major}:${d.backing.minor}` === rec.image.dev));
    }
    await unmountAll(stagingPath);
    await detachUnmounted(mine, image ?? `the volume staged at ${stagingPath}`);
    await removeStagedRecords(diskDir, stagingPath);
  });
}

export type VolumeStats =
  | { kind: 'filesystem'; bytes: { total: number; available: number; used: number }; inodes: { total: number; available: number; used: number } }
  | { kind: 'block'; bytes: { total: number } };

/** NodeGetVolumeStats: a mounted volume dir's bytes and inodes, or a published block device's size. */
export async function volumeStats(path: string): Promise<VolumeStats> {
  const p = await pathArg('volume path', path);
  let st;
  try {
    st = await fsp.stat(p);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') throw new NodeVolumeError('not-found', `volume path ${p} does not exist`, { cause: err });
    throw new NodeVolumeError('internal', `cannot inspect volume path ${p}: ${(err as Error).message}`, { cause: err });
  }
  if (st.isBlockDevice()) {
    const { stdout } = await runTool('blockdev', ['--getsize64', p], { timeoutMs: BLKID_TIMEOUT_MS });
    const total = Number(stdout.trim());
    if (!Number.isSafeInteger(total)) throw new NodeVolumeError('internal', `blockdev gave no size for ${p} (it printed ${JSON.stringify(stdout)})`);
    return { kind: 'block', bytes: { total } };
  }
  if (!st.isDirectory() || !topMountAt(await readMounts(), p)) throw new NodeVolumeError('not-found', `no volume is mounted at ${p}`);
  const s = await fsp.statfs(p, { bigint: true });
  const n = (v: bigint) => Number(v);
  return {
    kind: 'filesystem',
    bytes: { total: n(s.blocks * s.bsize), available: n(s.bavail * s.bsize), used: n((s.blocks - s.bfree) * s.bsize) },
    inodes: { total: n(s.files), available: n(s.ffree), used: n(s.files - s.ffree) },
  };
}
