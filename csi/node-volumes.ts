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
import { dirname } from 'node:path';
import { OneAtATime } from '../lib/runtime/one-at-a-time.ts';
import { attachLoop, devicesOfImage, type ImageRef, imageRef, type LoopDevice, listLoopDevices } from './loop.ts';
import { isReadOnly, type MountEntry, readMounts, topMountAt } from '../lib/runtime/mountinfo.ts';
import { splitDeviceNumber } from '../api/staged-record.ts';
import { absolutePath, errnoOf, fsTypeArg, modeArg, mountOptionsArg, PER_MOUNT_FLAGS, pathArg, readOnlyByOptions, type VolumeMode } from './node-args.ts';
import { BLKID_TIMEOUT_MS, deviceNode, detachUnmounted, format, isFilesystemOf, MOUNT_TIMEOUT_MS, probe, sameNumber, unmountAll } from './node-devices.ts';
import { driveStagesAt, forgetDriveStagesAt } from './node-drive-volumes.ts';
import { NodeVolumeError } from './node-errors.ts';
import { checkImage, existingImage } from './node-images.ts';
import { runTool } from './run-tool.ts';
import { liveRecordsAt, removeStagedRecords, stagedRecordOf, writeStagedRecord } from './staged-records.ts';
import { blockCondition, filesystemCondition, type VolumeCondition } from './volume-condition.ts';

export { isMountPoint } from '../lib/runtime/mountinfo.ts';
export { supportedFsTypes, type VolumeMode } from './node-args.ts';
export { imagesNamed, openImage } from './node-images.ts';
export { openDrive, stageDrive } from './node-drive-volumes.ts';
export { isNodeVolumeError, NodeVolumeError, type NodeVolumeErrorCode } from './node-errors.ts';

const CREATE_TARGET_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

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
  /** The disk image, from openImage; or, for a drive, its device node (./node-drive-volumes.ts openDrive). */
  image?: string | undefined;
  device?: string | undefined;
  readOnly?: boolean | undefined;
  /** Only the per-mount flags among them apply here (nosuid, noexec, …); the rest applied at stage. */
  mountOptions?: string[] | undefined;
}

/** Bind-mounts the staged volume (Filesystem) or the loop device (Block) at the target path, unless it is already there. */
export async function publish(r: PublishRequest): Promise<void> {
  const mode = modeArg(r.mode);
  const image = r.device === undefined ? await existingImage(absolutePath('disk image', r.image ?? '')) : undefined;
  // The devices the volume is on: the drive itself, or the loop devices serving the image's inode.
  const volumeDevices = async () => (image === undefined ? [await deviceNode(r.device!)] : await Promise.all(devicesOfImage(await listLoopDevices(), image).map((d) => deviceNode(d.device))));
  const what = image === undefined ? `drive ${r.device}` : `a loop device of ${image.path}`;
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
      const nodes = await volumeDevices();
      if (!nodes.some((n) => isFilesystemOf(staged, n))) {
        throw new NodeVolumeError('failed-precondition', `staging path ${stagingPath} has ${staged.source} mounted, not ${what}`);
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
    const nodes = await volumeDevices();
    if (nodes.length === 0) throw new NodeVolumeError('failed-precondition', `the volume is not staged: no loop device serves ${image?.path}`);
    const top = topMountAt(await readMounts(), targetPath);
    if (top) {
      const st = await fsp.stat(targetPath, { bigint: true }).catch(() => undefined);
      const rdev = st?.isBlockDevice() ? splitDeviceNumber(st.rdev) : undefined;
      const bound = rdev !== undefined && nodes.some((n) => n.rdev.major === rdev.major && n.rdev.minor === rdev.minor);
      if (!bound) throw new NodeVolumeError('already-exists', `target path ${targetPath} already has ${top.source} mounted, not ${what}`);
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
    // A drive staged here is the drive itself, never ours to detach, even when it is a loop device (the
    // local cluster's stand-in drives are).
    const drives = new Set((await driveStagesAt(diskDir, stagingPath)).map((r) => r.rdev));
    if (top && !drives.has(`${top.major}:${top.minor}`)) {
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
    // A drive's volume has no loop device: unmounted, its stage is undone.
    await forgetDriveStagesAt(diskDir, stagingPath);
  });
}

export type VolumeStats = (
  | { kind: 'filesystem'; bytes: { total: number; available: number; used: number }; inodes: { total: number; available: number; used: number } }
  | { kind: 'block'; bytes: { total: number } }
) & { condition: VolumeCondition };

/** NodeGetVolumeStats: a mounted volume dir's bytes and inodes, or a published block device's size; and its condition. */
export async function volumeStats(path: string): Promise<VolumeStats> {
  const p = await pathArg('volume path', path);
  let st;
  try {
    st = await fsp.stat(p, { bigint: true });
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') throw new NodeVolumeError('not-found', `volume path ${p} does not exist`, { cause: err });
    throw new NodeVolumeError('internal', `cannot inspect volume path ${p}: ${(err as Error).message}`, { cause: err });
  }
  if (st.isBlockDevice()) {
    const { stdout } = await runTool('blockdev', ['--getsize64', p], { timeoutMs: BLKID_TIMEOUT_MS });
    const total = Number(stdout.trim());
    if (!Number.isSafeInteger(total)) throw new NodeVolumeError('internal', `blockdev gave no size for ${p} (it printed ${JSON.stringify(stdout)})`);
    return { kind: 'block', bytes: { total }, condition: await blockCondition(splitDeviceNumber(st.rdev)) };
  }
  const mount = st.isDirectory() ? topMountAt(await readMounts(), p) : undefined;
  if (!mount) throw new NodeVolumeError('not-found', `no volume is mounted at ${p}`);
  const s = await fsp.statfs(p, { bigint: true });
  const n = (v: bigint) => Number(v);
  return {
    kind: 'filesystem',
    bytes: { total: n(s.blocks * s.bsize), available: n(s.bavail * s.bsize), used: n((s.blocks - s.bfree) * s.bsize) },
    inodes: { total: n(s.files), available: n(s.ffree), used: n(s.files - s.ffree) },
    condition: await filesystemCondition(mount),
  };
}
