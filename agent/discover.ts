// Discovery: which disk image files the disk dir holds. Only regular `*.img` files whose names make a
// valid diskID count; everything else is listed with the reason it was ignored. Nothing is followed:
// lstat only, so a symlink named disk1.img is reported, never read through.
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { DISK_SUFFIX, DRIVE_ID_PREFIX, MARKER_SUFFIX, STAGED_SUFFIX } from '../api/constants.ts';
import { WIPE_ANSWER_SUFFIX, WIPE_PROGRESS_SUFFIX, WIPE_REQUEST_SUFFIX } from '../api/drive-wipe.ts';
import { diskIdFromFileName, diskIdProblem, isDriveId, nodeDiskName } from '../api/names.ts';
import type { DriveFacts } from '../api/v1alpha1/types.ts';

/** What a chosen drive adds to a disk (./node-drives.ts): its facts, and why it must not be taken. */
export interface DriveInfo {
  facts: DriveFacts;
  /** Why it must not be taken whoever holds it. */
  refusals: string[];
  /** Where it is mounted (a refusal unless it is reserved: its holder mounted it). */
  mountedAt: string[];
  /** The by-id name it was found by, and the device number that name led to. */
  byIdName: string;
  device: string;
}

export interface DiskFile {
  diskID: string;
  /** Path inside this process's view of the disk dir (a drive's: of its by-id dir). */
  file: string;
  /** A drive's host path, for spec.path (an image's is its diskID's in the host disk dir). */
  hostPath?: string;
  /** Set for a drive. */
  drive?: DriveInfo;
  sizeBytes: number;
  /**
   * Bytes the filesystem has allocated to the image (st_blocks): 0 for a sparse image nothing was written
   * to since it was made or last wiped (a wipe cuts it to 0 bytes and extends it again, ADR 38).
   */
  allocatedBytes?: number | undefined;
}

export interface IgnoredFile {
  name: string;
  reason: string;
  /** The diskID that keeps the NodeDisk name this file's name also makes (a name collision). */
  collidesWith?: string;
}

export interface Discovery {
  disks: Map<string, DiskFile>;
  ignored: IgnoredFile[];
}

/** The file-system calls a scan makes (tests interleave real removals with them). */
export interface DiscoverFs {
  readdir(dir: string): Promise<string[]>;
  lstat(path: string): Promise<{ size: number; blocks?: number } & FileType>;
  access(path: string, mode: number): Promise<void>;
}

const realFs: DiscoverFs = { readdir: (dir) => fsp.readdir(dir), lstat: fsp.lstat, access: fsp.access };

/**
 * The diskID of the NodeDisk that already bears an object name, if one does: such a disk keeps its name
 * whatever files come later (undefined for every name: the first file in name order keeps it).
 */
export type NameHolder = (objectName: string) => string | undefined;

/** Scans `diskDir` for disk images. Throws when the dir itself cannot be read (the caller reports it). */
export async function discover(diskDir: string, nodeName: string, fs: DiscoverFs = realFs, holderOf: NameHolder = () => undefined): Promise<Discovery> {
  const disks = new Map<string, DiskFile>();
  const ignored: IgnoredFile[] = [];
  const byObjectName = new Map<string, DiskFile[]>();
  const entries = (await fs.readdir(diskDir)).sort();
  for (const name of entries) {
    // Markers and temp files are ours; anything else is simply not a disk image.
    if (!name.endsWith(DISK_SUFFIX)) continue;
    const seen = await inspectDiskFile(diskDir, name, fs);
    if (seen.kind === 'gone') continue;
    if (seen.kind === 'ignored') {
      ignored.push(seen.ignored);
      continue;
    }
    const objectName = nodeDiskName(nodeName, seen.disk.diskID);
    byObjectName.set(objectName, [...(byObjectName.get(objectName) ?? []), seen.disk]);
  }
  // Files whose names normalize to one object name (disk_1.img, disk-1.img, Disk1.img beside disk1.img):
  // the disk whose NodeDisk already bears the name keeps it, so a newcomer can never take a disk's
  // identity (nor turn a reserved disk Error); with no NodeDisk yet, the first in name order keeps it.
  for (const [objectName, files] of byObjectName) {
    const held = holderOf(objectName);
    const keeper = held ?? files[0]!.diskID;
    for (const f of files) {
      if (f.diskID === keeper) disks.set(f.diskID, f);
      else ignored.push(collision(`${f.diskID}${DISK_SUFFIX}`, objectName, keeper));
    }
  }
  ignored.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { disks, ignored };
}

/** How an ignored file whose NodeDisk name another disk holds is described. */
export const COLLISION_REASON = 'its NodeDisk name';

/** The ignored entry of a file whose NodeDisk name `keeper` holds. */
export function collision(name: string, objectName: string, keeper: string): IgnoredFile {
  return { name, reason: `${COLLISION_REASON} ${objectName} is already used by ${keeper}${DISK_SUFFIX}; rename ${name}`, collidesWith: keeper };
}

export interface FileType {
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
  isFIFO(): boolean;
  isSocket(): boolean;
  isBlockDevice(): boolean;
  isCharacterDevice(): boolean;
}

/** What a dir entry is, in words, for the reason it is ignored or put right. */
export function fileTypeOf(st: FileType): string {
  if (st.isFile()) return 'a regular file';
  if (st.isDirectory()) return 'a directory';
  if (st.isSymbolicLink()) return 'a symbolic link';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isSocket()) return 'a socket';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isCharacterDevice()) return 'a character device';
  return 'not a regular file';
}

export type DiskFileState = { kind: 'disk'; disk: DiskFile } | { kind: 'ignored'; ignored: IgnoredFile } | { kind: 'gone' };

/**
 * One `*.img` entry of the dir, on its own: a usable disk image, a file ignored (and why), or gone.
 * Name collisions between files are not judged here: they need the whole dir (see discover).
 */
export async function inspectDiskFile(diskDir: string, name: string, fs: DiscoverFs = realFs): Promise<DiskFileState> {
  const diskID = diskIdFromFileName(name);
  const problem = diskID === undefined ? 'no disk name before .img' : diskIdProblem(diskID);
  if (diskID === undefined || problem) return { kind: 'ignored', ignored: { name, reason: `cannot become a diskID: ${problem}` } };
  if (isDriveId(diskID)) return { kind: 'ignored', ignored: { name, reason: `begins with ${DRIVE_ID_PREFIX}, which names drives (their NodeDisks are drive-<identity>); rename the image` } };
  const file = join(diskDir, name);
  let st;
  try {
    st = await fs.lstat(file);
  } catch (err) {
    if (vanished(err)) return { kind: 'gone' }; // removed since readdir: Missing for the agent, not an error
    return { kind: 'ignored', ignored: { name, reason: `cannot be inspected: ${(err as Error).message}` } };
  }
  if (st.isSymbolicLink()) return { kind: 'ignored', ignored: { name, reason: 'is a symbolic link; disk images must be regular files (links are never followed)' } };
  if (st.isDirectory()) return { kind: 'ignored', ignored: { name, reason: 'is a directory, not a disk image file' } };
  if (!st.isFile()) return { kind: 'ignored', ignored: { name, reason: `is ${fileTypeOf(st)}; disk images must be regular files` } };
  try {
    await fs.access(file, constants.R_OK);
  } catch (err) {
    if (vanished(err)) return { kind: 'gone' }; // removed since lstat, as above
    return { kind: 'ignored', ignored: { name, reason: 'is not readable by the agent' } };
  }
  return { kind: 'disk', disk: { diskID, file, sizeBytes: st.size, ...(st.blocks !== undefined ? { allocatedBytes: st.blocks * 512 } : {}) } };
}

/**
 * The diskID a dir entry's change concerns: `<id>.img`, its marker `<id>.img.reserved` and the CSI node
 * side's record `<id>.img.staged` (its removal lets a waiting wipe go at once); undefined for anything else
 * (our own marker temp files among them: the rename that completes a marker names it).
 */
export function diskIdOfEntry(name: string): string | undefined {
  const suffix = [MARKER_SUFFIX, STAGED_SUFFIX].find((s) => name.endsWith(s));
  const base = suffix ? name.slice(0, -suffix.length) : name;
  // A drive's marker, `drive-<identity>.reserved` (./markers.ts), its wipe's request, progress and answer, and the
  // node side's record of its stage (its removal lets a waiting wipe go at once).
  const driveSuffix = [MARKER_SUFFIX, WIPE_REQUEST_SUFFIX, WIPE_ANSWER_SUFFIX, WIPE_PROGRESS_SUFFIX, STAGED_SUFFIX].find((s) => name.endsWith(s));
  if (driveSuffix !== undefined && isDriveId(name)) return name.slice(0, -driveSuffix.length);
  if (!base.endsWith(DISK_SUFFIX)) return undefined;
  return diskIdFromFileName(base);
}

/** A file that is gone by the time we look at it: removed in the middle of the scan. */
function vanished(err: unknown): boolean {
  return (err as NodeJS.ErrnoException).code === 'ENOENT';
}
