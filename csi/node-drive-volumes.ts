// The node side of a volume on a drive (docs/adr/0044-real-drives.md): no loop device, the drive itself,
// formatted if blank and mounted at the staging path (Filesystem mode), or its device node bound onto the
// target file (Block mode). The rules are an image's (./node-volumes.ts): every operation idempotent,
// starting from what the node shows; a drive holding another filesystem or any other signature is never
// formatted over; the stage's record (api/drive-staged-record.ts) is written before the device is touched.
//
// The drive is found by the by-id name its NodeDisk was made from, and must still be the device of the
// identity the volume was given: the name leads to a whole block device now, never a path string alone.
import { constants as fsConstants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { basename, join } from 'node:path';
import { DRIVE_ID_PREFIX } from '../api/constants.ts';
import { DRIVE_STAGED_SUFFIX, type DriveStagedRecord, driveStagedRecordName, formatDriveStagedRecord, readDriveStagedRecord } from '../api/drive-staged-record.ts';
import { bootId, diskSeq } from '../api/staged-record.ts';
import { isReadOnly, readMounts, topMountAt } from '../lib/runtime/mountinfo.ts';
import { removeFile, writeFileAtomic } from '../lib/runtime/atomic-file.ts';
import { OneAtATime } from '../lib/runtime/one-at-a-time.ts';
import { absolutePath, fsTypeArg, modeArg, mountOptionsArg, pathArg, readOnlyByOptions, type VolumeMode } from './node-args.ts';
import { deviceNode, format, isFilesystemOf, MOUNT_TIMEOUT_MS, probe } from './node-devices.ts';
import { NodeVolumeError } from './node-errors.ts';
import { runTool } from './run-tool.ts';

const BY_ID_NAME = /^[A-Za-z0-9][A-Za-z0-9._:+-]*$/;
const queue = new OneAtATime();

/** The device node a drive's by-id name leads to now: a whole block device, or an error naming why not. */
export async function openDrive(byIdDir: string, byIdName: string): Promise<string> {
  if (!BY_ID_NAME.test(byIdName)) throw new NodeVolumeError('invalid', `${JSON.stringify(byIdName)} is not a by-id name`);
  const link = join(absolutePath('by-id dir', byIdDir), byIdName);
  let target: string;
  try {
    target = await fsp.readlink(link);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new NodeVolumeError('not-found', `drive ${link} is not on this node`, { cause: err });
    throw new NodeVolumeError('internal', `cannot read ${link}: ${(err as Error).message}`, { cause: err });
  }
  // udev's links are relative to /dev/disk/by-id: the kernel name they end in is the device node.
  const device = join('/dev', basename(target));
  const node = await deviceNode(device);
  const sys = `/sys/dev/block/${node.rdev.major}:${node.rdev.minor}`;
  if ((await fsp.lstat(join(sys, 'partition')).catch(() => undefined)) !== undefined)
    throw new NodeVolumeError('failed-precondition', `${link} leads to ${device}, a partition, not a whole drive`);
  return device;
}

export interface DriveStageRequest {
  device: string;
  diskID: string;
  diskDir: string;
  stagingPath: string;
  mode: VolumeMode;
  fsType?: string | undefined;
  mountOptions?: string[] | undefined;
  readOnly?: boolean | undefined;
}

async function writeRecord(r: DriveStageRequest, stagingPath: string): Promise<void> {
  const node = await deviceNode(r.device);
  const text = formatDriveStagedRecord({
    stagingPath,
    device: r.device,
    rdev: `${node.rdev.major}:${node.rdev.minor}`,
    diskseq: await diskSeq(basename(r.device)),
    bootId: await bootId(),
  });
  try {
    await writeFileAtomic(r.diskDir, driveStagedRecordName(r.diskID), text);
  } catch (err) {
    throw new NodeVolumeError('internal', `cannot write the staged record of ${r.diskID} in ${r.diskDir}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Refuses a drive that something on this node mounts or holds (a filesystem mounted anywhere, in any mount
 * namespace; dm, md; another exclusive opener): the kernel refuses it an exclusive open. A second mount of a
 * filesystem mounted elsewhere would share it with whoever has it, and a bind of its device node would hand
 * a pod a device in use.
 */
async function refuseIfHeld(device: string): Promise<void> {
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(device, fsConstants.O_RDONLY | fsConstants.O_EXCL);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EBUSY')
      throw new NodeVolumeError('failed-precondition', `drive ${device} is in use on this node (mounted or held by something else: the kernel refuses it an exclusive open): it is not staged`, {
        cause: err,
      });
    throw new NodeVolumeError('internal', `cannot open drive ${device}: ${(err as Error).message}`, { cause: err });
  }
  await fh.close();
}

/** Stages a drive: recorded, then (Filesystem) formatted if blank and mounted at the staging path. */
export async function stageDrive(r: DriveStageRequest): Promise<{ device: string }> {
  const mode = modeArg(r.mode);
  const stagingPath = await pathArg('staging path', r.stagingPath);
  const node = await deviceNode(r.device);
  if (mode === 'block') {
    return queue.run(r.device, async () => {
      // A repeated stage of a drive staged here already is not checked again: the pod using it may hold it.
      if ((await readDriveStagedRecord(r.diskDir, r.diskID))?.stagingPath !== stagingPath) await refuseIfHeld(r.device);
      await writeRecord(r, stagingPath);
      return { device: r.device };
    });
  }
  const fsType = await fsTypeArg(r.fsType);
  const readOnly = r.readOnly === true;
  const options = [...mountOptionsArg(r.mountOptions), ...(readOnly ? ['ro'] : [])];
  const mountedReadOnly = readOnlyByOptions(options);
  return queue.run(r.device, async () => {
    try {
      await fsp.mkdir(stagingPath, { recursive: true, mode: 0o750 });
    } catch (err) {
      throw new NodeVolumeError('failed-precondition', `cannot make staging dir ${stagingPath}: ${(err as Error).message}`, { cause: err });
    }
    const top = topMountAt(await readMounts(), stagingPath);
    if (top) {
      if (!isFilesystemOf(top, node) || top.root !== '/')
        throw new NodeVolumeError('already-exists', `staging path ${stagingPath} already has ${top.source} (${top.fsType}) mounted, not drive ${r.device}`);
      if (top.fsType !== fsType) throw new NodeVolumeError('already-exists', `staging path ${stagingPath} has drive ${r.device} mounted as ${top.fsType}, not ${fsType}`);
      await writeRecord(r, stagingPath);
      if (isReadOnly(top) !== mountedReadOnly)
        throw new NodeVolumeError(
          'already-exists',
          `staging path ${stagingPath} has drive ${r.device} mounted ${isReadOnly(top) ? 'read-only' : 'read-write'}, not ${mountedReadOnly ? 'read-only' : 'read-write'}`,
        );
      return { device: r.device };
    }
    await refuseIfHeld(r.device);
    await writeRecord(r, stagingPath);
    const found = await probe(r.device);
    if (found.kind === 'other') throw new NodeVolumeError('failed-precondition', `drive ${r.device} holds ${found.what}, not a ${fsType} filesystem: it is never formatted over, left as it is`);
    if (found.kind === 'filesystem' && found.type !== fsType)
      throw new NodeVolumeError(
        'failed-precondition',
        `drive ${r.device} holds a ${found.type} filesystem, not ${fsType}: it is never reformatted (ask for fsType ${found.type}, or wipe the drive)`,
      );
    if (found.kind === 'blank') {
      if (readOnly) throw new NodeVolumeError('failed-precondition', `drive ${r.device} holds no filesystem, and a read-only volume cannot be formatted`);
      await format(fsType, r.device);
    }
    await runTool('mount', ['-t', fsType, ...(options.length ? ['-o', options.join(',')] : []), r.device, stagingPath], { timeoutMs: MOUNT_TIMEOUT_MS });
    return { device: r.device };
  });
}

/** The drives' records of stages at `stagingPath`, with their file names: found by content, not by name. */
export async function driveStagesAt(diskDir: string, stagingPath: string): Promise<(DriveStagedRecord & { name: string })[]> {
  const out: (DriveStagedRecord & { name: string })[] = [];
  const names = await fsp.readdir(diskDir).catch(() => [] as string[]);
  for (const name of names) {
    if (!name.startsWith(DRIVE_ID_PREFIX) || !name.endsWith(DRIVE_STAGED_SUFFIX)) continue;
    const rec = await readDriveStagedRecord(diskDir, name.slice(0, -DRIVE_STAGED_SUFFIX.length));
    if (rec?.stagingPath === stagingPath) out.push({ ...rec, name });
  }
  return out;
}

/** The drives' records of stages at `stagingPath` go once that stage is undone. */
export async function forgetDriveStagesAt(diskDir: string, stagingPath: string): Promise<void> {
  for (const r of await driveStagesAt(diskDir, stagingPath)) await removeFile(join(diskDir, r.name));
}
