// What the CSI node plugin leaves on the host that outlives the node's processes: loop devices (the
// kernel's, not a namespace's) attached to disk images in the node dirs, and, should anything have been
// mounted under a node dir in the host's own namespace, that mount. Teardown (and the cleanup after a
// crash) unmounts and detaches exactly those, after the node's processes are gone.
//
// Which loop devices are ours cannot be told from the path the kernel reports for the backing file: it
// is the path in the mount namespace that attached it (in the plugin's container,
// /var/lib/node-disks-manager/disks/<id>.img) and, once that namespace is gone, the path below the bind
// mount it came through (/disks/<id>.img). The backing file's device and inode are certain: a loop
// device is ours when they are those of a file in a node dir, or when its reported path is in a node dir
// (a device attached from the host's namespace), or when they are those of the device node of one of ours
// (the kubelet's reference to a Block volume).
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { sh, sleep } from './host.ts';

export interface LoopDevice {
  name: string;
  backFile: string;
  backIno: number;
  /** "major:minor" of the device that holds the backing file. */
  backDev: string;
}

/** The devices of `losetup -J -l -O NAME,BACK-FILE,BACK-INO,BACK-MAJ:MIN` (nothing at all when none is attached). */
export function parseLosetup(json: string): LoopDevice[] {
  if (json.trim() === '') return [];
  const parsed = JSON.parse(json) as { loopdevices?: Record<string, unknown>[] };
  return (parsed.loopdevices ?? []).map((d) => ({
    name: String(d.name ?? ''),
    backFile: String(d['back-file'] ?? ''),
    backIno: Number(d['back-ino']),
    // losetup pads this column ("   254:0  ").
    backDev: String(d['back-maj:min'] ?? '').trim(),
  }));
}

/** "major:minor:inode" of a file, as the loop devices' backing files are described. */
export const fileKey = (dev: string, ino: number) => `${dev}:${ino}`;

/** The loop devices backed by one of `files` (fileKey) or by a path inside one of `dirs`. */
export function ourLoops(devices: LoopDevice[], ours: { dirs: string[]; files: ReadonlySet<string> }): LoopDevice[] {
  const inDirs = (p: string) => ours.dirs.some((d) => p.startsWith(`${d.replace(/\/+$/, '')}/`));
  return devices.filter((d) => ours.files.has(fileKey(d.backDev, d.backIno)) || inDirs(d.backFile.replace(/ \(deleted\)$/, '')));
}

/** Linux's encoding of a device number (dev_t) as "major:minor". */
export function majorMinor(dev: bigint): string {
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  return `${major}:${minor}`;
}

/** fileKey of every regular file in `dirs` (recursively; a dir that is not there has none). */
export async function fileKeys(dirs: string[]): Promise<Set<string>> {
  const keys = new Set<string>();
  for (const dir of dirs) {
    const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
    for (const e of entries) {
      if (!e.isFile()) continue;
      const st = await stat(join(e.parentPath, e.name), { bigint: true }).catch(() => undefined);
      if (st) keys.add(fileKey(majorMinor(st.dev), Number(st.ino)));
    }
  }
  return keys;
}

export async function listLoops(): Promise<LoopDevice[]> {
  return parseLosetup(await sh('losetup', ['-J', '-l', '-O', 'NAME,BACK-FILE,BACK-INO,BACK-MAJ:MIN']));
}

/**
 * The loop devices over the device node of one of `ours`, and over theirs in turn: the kubelet maps a
 * Block volume by binding the volume's device node onto a file of its own and attaching a loop device over
 * that file, whose backing file is then the node itself (its device and inode in /dev, the node's /dev
 * being the host's), under a path of the kubelet's namespace.
 */
export async function loopsOverDevices(devices: LoopDevice[], ours: LoopDevice[]): Promise<LoopDevice[]> {
  const found = [...ours];
  for (let i = 0; i < found.length; i++) {
    const st = await stat(found[i]!.name, { bigint: true }).catch(() => undefined);
    if (!st?.isBlockDevice()) continue;
    const key = fileKey(majorMinor(st.dev), Number(st.ino));
    for (const d of devices) if (fileKey(d.backDev, d.backIno) === key && !found.some((f) => f.name === d.name)) found.push(d);
  }
  return found.slice(ours.length);
}

/** The loop devices attached to files in `dirs` now, and the loop devices over theirs (loopsOverDevices). */
export async function loopsIn(dirs: string[]): Promise<LoopDevice[]> {
  const devices = await listLoops();
  // Walking the dirs (containerd's content is in them) only when some device could be backed there.
  if (devices.length === 0) return [];
  const ours = ourLoops(devices, { dirs, files: await fileKeys(dirs) });
  return [...ours, ...(await loopsOverDevices(devices, ours))];
}

/** The mount points in this mount namespace inside one of `dirs`, deepest first. */
export async function mountsIn(dirs: string[]): Promise<string[]> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  // Field 5 is the mount point, with space, tab, newline and backslash written as octal escapes.
  const points = info
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => !!p)
    .map((p) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8))));
  return points.filter((p) => dirs.some((d) => p.startsWith(`${d.replace(/\/+$/, '')}/`))).sort((a, b) => b.length - a.length);
}

export const describe = (d: LoopDevice) => `${d.name} (backing file ${d.backFile}, inode ${d.backIno} on ${d.backDev})`;

/**
 * Unmounts what is mounted in `dirs` in this namespace, then detaches every loop device backed by a file
 * in them, and waits until none is left: a device still open (a mount that is going away with its
 * namespace) is detached by the kernel when its last user lets go. Throws naming what is left.
 */
export async function releaseDevicesIn(dirs: string[], log: (line: string) => void, timeoutMs = 20_000): Promise<void> {
  for (const point of await mountsIn(dirs)) {
    // Lazily when busy: the mount leaves the tree now, the file system when its last user closes it.
    await sh('umount', [point]).catch(() => sh('umount', ['-l', point]));
    log(`unmounted ${point}`);
  }
  const deadline = Date.now() + timeoutMs;
  const told = new Set<string>();
  const detached = new Set<string>();
  for (let loops = await loopsIn(dirs); loops.length > 0; loops = await loopsIn(dirs)) {
    if (Date.now() > deadline) throw new Error(`loop devices still attached: ${loops.map(describe).join(', ')}`);
    for (const d of loops.filter((l) => !detached.has(l.name))) {
      // A device still open is detached by the kernel when its last user lets go (asked once: the name
      // could meanwhile be another's device); an older kernel refuses it instead, so ask again then.
      const why = await sh('losetup', ['-d', d.name]).then(
        () => '',
        (err: Error) => err.message,
      );
      if (!why) detached.add(d.name);
      if (!told.has(d.name)) log(why ? `could not detach ${d.name} yet: ${why}` : `detached ${describe(d)}`);
      told.add(d.name);
    }
    await sleep(250);
  }
  const left = await mountsIn(dirs);
  if (left.length) throw new Error(`still mounted: ${left.join(', ')}`);
}

/** Where the kubelet mounts volumes for pods (in a node's view): staging, publish and the pods' dirs. */
const VOLUME_MOUNT_DIRS = ['/var/lib/kubelet/plugins/', '/var/lib/kubelet/pods/'];

/**
 * Unmounts, in the mount namespace of process `pid` (a node's holder), every mount inside the kubelet's
 * volume dirs, deepest first: what a reboot of the node takes with it. Returns how many went.
 */
export async function unmountVolumesOf(pid: number): Promise<number> {
  const info = await readFile(`/proc/${pid}/mountinfo`, 'utf8');
  const points = info
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => !!p)
    .map((p) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8))))
    .filter((p) => VOLUME_MOUNT_DIRS.some((d) => p.startsWith(d)))
    .sort((a, b) => b.length - a.length);
  for (const point of points) {
    const inNode = (args: string[]) => sh('nsenter', ['-t', String(pid), '--mount', '--', 'umount', ...args]);
    // Stacked mounts at one point come off one at a time; a busy one (nothing should be: the node's
    // processes are gone) lazily.
    await inNode([point]).catch(() => inNode(['-l', point]));
  }
  return points.length;
}
