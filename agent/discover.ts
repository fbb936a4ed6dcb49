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
    if (!name.endsWith(DISK_SUFFIX)) {
      // Markers and temp files are ours; anything else is simply not a disk image.
      continue;
    }
    const diskID = diskIdFromFileName(name);
    const problem = diskID === undefined ? 'no disk name before .img' : diskIdProblem(diskID);
    if (diskID === undefined || problem) {
      ignored.push({ name, reason: `cannot become a diskID: ${problem}` });
      continue;
    }
    const file = join(diskDir, name);
    let st;
    try {
      st = await fs.lstat(file);
    } catch (err) {
      if (vanished(err)) continue; // removed since readdir: Missing for the agent, not an error
      ignored.push({ name, reason: `cannot be inspected: ${(err as Error).message}` });
      continue;
    }
    if (st.isSymbolicLink()) {
      ignored.push({ name, reason: 'is a symbolic link; disk images must be regular files (links are never followed)' });
      continue;
    }
    if (st.isDirectory()) {
      ignored.push({ name, reason: 'is a directory, not a disk image file' });
      continue;
    }
    if (!st.isFile()) {
      ignored.push({ name, reason: 'is not a regular file' });
      continue;
    }
    try {
      await fs.access(file, constants.R_OK);
    } catch (err) {
      if (vanished(err)) continue; // removed since lstat, as above
      ignored.push({ name, reason: 'is not readable by the agent' });
      continue;
    }
    // Two files whose names normalize to one object name (disk_1.img, disk-1.img): the first keeps it.
    const objectName = nodeDiskName(nodeName, diskID);
    const holder = byObjectName.get(objectName);
    if (holder) {
      ignored.push({ name, reason: `its NodeDisk name ${objectName} is already used by ${holder}.img; rename one of them` });
      continue;
    }
    byObjectName.set(objectName, diskID);
    disks.set(diskID, { diskID, file, sizeBytes: st.size });
  }
  return { disks, ignored };
}

/** A file that is gone by the time we look at it: removed in the middle of the scan. */
function vanished(err: unknown): boolean {
  return (err as NodeJS.ErrnoException).code === 'ENOENT';
}

export function markerName(diskID: string): string {
  return `${diskID}${DISK_SUFFIX}${MARKER_SUFFIX}`;
}
