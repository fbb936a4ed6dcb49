// Discovery: which disk image files the disk dir holds. Only regular `*.img` files whose names make a
// valid diskID count; everything else is listed with the reason it was ignored. Nothing is followed:
// lstat only, so a symlink named disk1.img is reported, never read through.
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { DISK_SUFFIX, MARKER_SUFFIX } from '../api/constants.ts';
import { diskIdFromFileName, diskIdProblem, nodeDiskName } from '../api/names.ts';

export interface DiskFile {
  diskID: string;
  /** Path inside this process's view of the disk dir. */
  file: string;
  sizeBytes: number;
}

export interface IgnoredFile {
  name: string;
  reason: string;
}

export interface Discovery {
  disks: Map<string, DiskFile>;
  ignored: IgnoredFile[];
}

/** The file-system calls a scan makes (tests interleave real removals with them). */
export interface DiscoverFs {
  readdir(dir: string): Promise<string[]>;
  lstat(path: string): Promise<{ size: number; isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }>;
  access(path: string, mode: number): Promise<void>;
}

const realFs: DiscoverFs = { readdir: (dir) => fsp.readdir(dir), lstat: fsp.lstat, access: fsp.access };

/** Scans `diskDir` for disk images. Throws when the dir itself cannot be read (the caller reports it). */
export async function discover(diskDir: string, nodeName: string, fs: DiscoverFs = realFs): Promise<Discovery> {
  const disks = new Map<string, DiskFile>();
  const ignored: IgnoredFile[] = [];
  const byObjectName = new Map<string, string>();
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
    // Two files whose names normalize to one object name (disk_1.img, disk-1.img): the first keeps it.
    const objectName = nodeDiskName(nodeName, seen.disk.diskID);
    const holder = byObjectName.get(objectName);
    if (holder) {
      ignored.push({ name, reason: `${COLLISION_REASON} ${objectName} is already used by ${holder}.img; rename one of them` });
      continue;
    }
    byObjectName.set(objectName, seen.disk.diskID);
    disks.set(seen.disk.diskID, seen.disk);
  }
  return { disks, ignored };
}

/** How an ignored file whose NodeDisk name another file holds is described (a scan settles who keeps it). */
export const COLLISION_REASON = 'its NodeDisk name';

export type DiskFileState = { kind: 'disk'; disk: DiskFile } | { kind: 'ignored'; ignored: IgnoredFile } | { kind: 'gone' };

/**
 * One `*.img` entry of the dir, on its own: a usable disk image, a file ignored (and why), or gone.
 * Name collisions between files are not judged here: they need the whole dir (see discover).
 */
export async function inspectDiskFile(diskDir: string, name: string, fs: DiscoverFs = realFs): Promise<DiskFileState> {
  const diskID = diskIdFromFileName(name);
  const problem = diskID === undefined ? 'no disk name before .img' : diskIdProblem(diskID);
  if (diskID === undefined || problem) return { kind: 'ignored', ignored: { name, reason: `cannot become a diskID: ${problem}` } };
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
  if (!st.isFile()) return { kind: 'ignored', ignored: { name, reason: 'is not a regular file' } };
  try {
    await fs.access(file, constants.R_OK);
  } catch (err) {
    if (vanished(err)) return { kind: 'gone' }; // removed since lstat, as above
    return { kind: 'ignored', ignored: { name, reason: 'is not readable by the agent' } };
  }
  return { kind: 'disk', disk: { diskID, file, sizeBytes: st.size } };
}

/**
 * The diskID a dir entry's change concerns: `<id>.img` and its marker `<id>.img.reserved`; undefined for
 * anything else (our own marker temp files among them: the rename that completes a marker names it).
 */
export function diskIdOfEntry(name: string): string | undefined {
  const base = name.endsWith(MARKER_SUFFIX) ? name.slice(0, -MARKER_SUFFIX.length) : name;
  if (!base.endsWith(DISK_SUFFIX)) return undefined;
  return diskIdFromFileName(base);
}

/** A file that is gone by the time we look at it: removed in the middle of the scan. */
function vanished(err: unknown): boolean {
  return (err as NodeJS.ErrnoException).code === 'ENOENT';
}

export function markerName(diskID: string): string {
  return `${diskID}${DISK_SUFFIX}${MARKER_SUFFIX}`;
}
