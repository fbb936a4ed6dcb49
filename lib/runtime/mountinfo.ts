// What is mounted where, as the kernel says it in /proc/self/mountinfo (proc(5)): read at every operation,
// never remembered, so a restarted program sees exactly what the one before it left.
//
// One line per mount:
//   36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//   id parent major:minor root mount-point per-mount-options [optional fields…] - fstype source super-options
// Paths have space, tab, newline and backslash written as octal escapes (\040 \011 \012 \134).
import { readFile, realpath } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';

export interface MountEntry {
  id: number;
  parentId: number;
  major: number;
  minor: number;
  /** The path inside its filesystem that is mounted: `/` for a whole filesystem, `/loop0` for a bind of /dev/loop0. */
  root: string;
  mountPoint: string;
  /** Per-mount options (ro or rw, nosuid, …). */
  options: string[];
  fsType: string;
  source: string;
  superOptions: string[];
}

/** Undoes the kernel's octal escapes of a mountinfo field. */
export function unescapeMountField(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(Number.parseInt(oct, 8)));
}

/** Parses mountinfo text; a line that does not have the shape of one is skipped. */
export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const f = line.split(' ');
    // The optional fields end at a lone "-", followed by exactly three fields.
    const sep = f.indexOf('-', 6);
    if (sep < 0 || f.length < sep + 4) continue;
    const devs = /^(\d+):(\d+)$/.exec(f[2]!);
    if (!devs) continue;
    entries.push({
      id: Number(f[0]),
      parentId: Number(f[1]),
      major: Number(devs[1]),
      minor: Number(devs[2]),
      root: unescapeMountField(f[3]!),
      mountPoint: unescapeMountField(f[4]!),
      options: f[5]!.split(','),
      fsType: unescapeMountField(f[sep + 1]!),
      source: unescapeMountField(f[sep + 2]!),
      superOptions: f
        .slice(sep + 3)
        .join(' ')
        .split(','),
    });
  }
  return entries;
}

export async function readMounts(file = '/proc/self/mountinfo'): Promise<MountEntry[]> {
  return parseMountInfo(await readFile(file, 'utf8'));
}

/** The mounts at a path, bottom first: the last one is what the path shows. */
export function mountsAt(mounts: MountEntry[], path: string): MountEntry[] {
  return mounts.filter((m) => m.mountPoint === path);
}

export function topMountAt(mounts: MountEntry[], path: string): MountEntry | undefined {
  return mountsAt(mounts, path).at(-1);
}

export function isReadOnly(m: MountEntry): boolean {
  return m.options.includes('ro');
}

/**
 * A path as mountinfo writes it: absolute, with its directories' symbolic links resolved, but not the last
 * component's (nothing is mounted on a link: mount follows it, and unmounting must not follow one either).
 */
export async function canonicalPath(path: string): Promise<string> {
  const abs = resolve(path);
  if (abs === '/') return abs;
  try {
    return join(await realpath(dirname(abs)), basename(abs));
  } catch {
    return abs;
  }
}

/** Whether something is mounted at the path. */
export async function isMountPoint(path: string): Promise<boolean> {
  return topMountAt(await readMounts(), await canonicalPath(path)) !== undefined;
}
