// The node's drives as sysfs and udev's /dev/disk/by-id show them (docs/adr/0044-real-drives.md): for each
// whole block device, its stable identity, the facts people select drives by, and why it must not be taken.
// Read only: nothing here opens a device (the agent has no device access); what only the device's own
// bytes can tell (a filesystem, RAID or LVM signature) is the node side's to probe before it writes.
//
// Identity, best first: the world-wide name the kernel reads from the device (`wwid`: NVMe's EUI-64 or
// NGUID, SCSI's NAA or EUI from VPD page 0x83), then the model and serial together. Never the kernel name:
// `sdb` may be `sdc` after a reboot. A drive with none (a virtio disk with no serial) has no identity and is
// refused with that reason, as are two drives that report the same one (cheap bridges, cloned virtual
// disks): merging them would hand one drive's data out as the other's.
import { readdir, readFile, readlink, realpath } from 'node:fs/promises';
import { basename, join } from 'node:path';

export type Media = 'nvme' | 'ssd' | 'hdd';
export type Transport = 'nvme' | 'sata' | 'sas' | 'scsi' | 'usb' | 'virtio' | 'other';

export interface Drive {
  /** The kernel's name now (`nvme0n1`, `sdb`): for messages and the device node, never for identity. */
  kernelName: string;
  major: number;
  minor: number;
  /** `wwn-…`, `eui-…`, `nvme-…` or `serial-…`, lower case and safe in a NodeDisk name; undefined when the drive reports none. */
  identity: string | undefined;
  model: string;
  serial: string;
  sizeBytes: number;
  logicalBlockSize: number;
  physicalBlockSize: number;
  media: Media;
  transport: Transport;
  /** The /dev/disk/by-id names of the whole device, sorted. */
  byId: string[];
  /** Why the drive must not be taken, whoever holds it; empty when it may (see whyNotTaken). */
  refusals: string[];
  /** Where it or one of its partitions is mounted, sorted: a refusal unless its holder mounted it. */
  mountedAt: string[];
}

/**
 * Why a drive must not be taken. A reserved drive is mounted by the one who holds it (the CSI node side
 * stages it there): that is use, not a refusal. Everything else refuses it whoever holds it.
 */
export function whyNotTaken(d: Pick<Drive, 'refusals' | 'mountedAt'>, held = false): string[] {
  if (held || d.mountedAt.length === 0) return d.refusals;
  return [...d.refusals, `is mounted at ${d.mountedAt.join(', ')}`];
}

/** What the drive said, for status and logs: printable ASCII, anything else a '?' (model and serial strings are the drive's, not ours). */
function printable(s: string): string {
  return s.replace(/[^\x20-\x7e]/g, '?');
}

export interface ScanOptions {
  /** `/sys` (a test's tree elsewhere). */
  sysRoot: string;
  /** `/dev/disk/by-id`. */
  byIdDir: string;
  /** What is mounted, by device number (mountinfo's major:minor and mount point). */
  mounts: { major: number; minor: number; mountPoint: string }[];
}

/** Kernel names of devices that are not drives: loop, RAM, zram, device-mapper, md, network block devices, floppies, optical. */
const NOT_A_DRIVE = /^(loop|ram|zram|dm-|md|nbd|fd|sr|rbd)\d*/;

async function text(path: string): Promise<string | undefined> {
  try {
    return (await readFile(path, 'utf8')).trim();
  } catch {
    return undefined;
  }
}

async function entries(path: string): Promise<string[]> {
  try {
    return await readdir(path);
  } catch {
    return [];
  }
}

/** Printable ASCII, runs of anything else (and spaces) made one '-': what a NodeDisk name and a terminal can carry. */
function slug(s: string): string {
  return s
    .toLowerCase()
    .replace(/[^a-z0-9.]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/**
 * The drive's identity from what the kernel read from it. NVMe's `wwid` is `eui.<hex>`, `nvme.<vid>-<serial
 * hex>-<model hex>-<nsid>` or an NGUID; SCSI's is `naa.<hex>`, `eui.<hex>` or `t10.<vendor model serial>`.
 * With none of those, udev's by-id names, which it made from the same reports: `wwn-0x…`, `nvme-eui.…`
 * first, then a name of model and serial (`ata-<model>_<serial>`).
 */
export function identityOf(wwid: string | undefined, model: string, serial: string, byId: readonly string[] = []): string | undefined {
  const w = wwid?.trim() ?? '';
  const m = /^(naa|eui)\.([0-9a-fA-F]+)$/.exec(w);
  if (m) return `${m[1] === 'naa' ? 'wwn' : 'eui'}-${m[2]!.toLowerCase()}`;
  if (/^nvme\.[0-9a-f-]+$/i.test(w)) return slug(w.replace(/^nvme\./, 'nvme-'));
  if (serial.trim() !== '') return `serial-${slug(`${model} ${serial}`)}`;
  // A t10 name carries vendor, model and serial in one string: an identity when nothing better is given.
  if (w.startsWith('t10.') && w.length > 4) return `serial-${slug(w.slice(4))}`;
  const names = [...byId].sort();
  const wwn = names.map((n) => /^wwn-0x([0-9a-fA-F]+)$/.exec(n)).find((x) => x);
  if (wwn) return `wwn-${wwn[1]!.toLowerCase()}`;
  const eui = names.map((n) => /^nvme-eui\.([0-9a-fA-F]+)$/.exec(n)).find((x) => x);
  if (eui) return `eui-${eui[1]!.toLowerCase()}`;
  const named = names.find((n) => /^[a-z]+-.+_.+$/.test(n));
  return named ? `serial-${slug(named.replace(/^[a-z]+-/, ''))}` : undefined;
}

/** How the drive is attached, from where it sits in the device tree. */
export function transportOf(kernelName: string, devicePath: string): Transport {
  if (kernelName.startsWith('nvme')) return 'nvme';
  if (devicePath.includes('/usb')) return 'usb';
  if (devicePath.includes('/virtio')) return 'virtio';
  if (/\/ata\d+\//.test(devicePath)) return 'sata';
  if (/\/(port|end_device|expander)-\d/.test(devicePath)) return 'sas';
  if (/\/host\d+\/target\d/.test(devicePath)) return 'scsi';
  return 'other';
}

/**
 * Reads the node's whole block devices with their facts and refusals: every one but loop, RAM, zram, dm,
 * md and optical devices, and of those, one that udev (or an admin) gave a by-id name: a loop device named
 * so stands for a drive (the local cluster's nodes share one kernel, and each has its own in its own /dev).
 */
export async function scanDrives(o: ScanOptions): Promise<Drive[]> {
  const byId = await byIdLinks(o.byIdDir);
  const rootDevices = new Set(o.mounts.filter((m) => m.mountPoint === '/' || m.mountPoint === '/boot' || m.mountPoint === '/boot/efi').map((m) => `${m.major}:${m.minor}`));
  const filesystems = await mountedFilesystems(o.sysRoot);
  const drives: Drive[] = [];
  for (const name of (await entries(join(o.sysRoot, 'block'))).sort()) {
    if (NOT_A_DRIVE.test(name) && !byId.has(name)) continue;
    drives.push(await readDrive(o, name, byId, rootDevices, filesystems));
  }
  // Two drives of one identity: neither is taken, and each says which other drive has it.
  for (const d of drives) {
    const twins = drives.filter((x) => x !== d && x.identity !== undefined && x.identity === d.identity);
    if (twins.length) d.refusals.push(`reports the same identity ${d.identity} as ${twins.map((x) => x.kernelName).join(', ')}: not merged, not taken`);
  }
  return drives;
}

/**
 * The devices with a mounted ext4, xfs or btrfs filesystem, by kernel name, as sysfs lists them for the
 * whole kernel: a mount in another mount namespace (the host's, where this container cannot see) counts.
 */
async function mountedFilesystems(sysRoot: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const fs of ['ext4', 'xfs']) for (const dev of await entries(join(sysRoot, 'fs', fs))) if (dev !== 'features') out.set(dev, fs);
  for (const uuid of await entries(join(sysRoot, 'fs', 'btrfs'))) for (const dev of await entries(join(sysRoot, 'fs', 'btrfs', uuid, 'devices'))) out.set(dev, 'btrfs');
  return out;
}

async function readDrive(o: ScanOptions, name: string, byId: Map<string, string[]>, rootDevices: ReadonlySet<string>, filesystems: ReadonlyMap<string, string>): Promise<Drive> {
  const dir = join(o.sysRoot, 'block', name);
  const [devNo, size, logical, physical, rotational, ro, wwidOwn, wwidDevice, modelRaw, serialOwn, serialDevice] = await Promise.all([
    text(join(dir, 'dev')),
    text(join(dir, 'size')),
    text(join(dir, 'queue', 'logical_block_size')),
    text(join(dir, 'queue', 'physical_block_size')),
    text(join(dir, 'queue', 'rotational')),
    text(join(dir, 'ro')),
    text(join(dir, 'wwid')),
    text(join(dir, 'device', 'wwid')),
    text(join(dir, 'device', 'model')),
    text(join(dir, 'serial')),
    text(join(dir, 'device', 'serial')),
  ]);
  const [major, minor] = (devNo ?? '0:0').split(':').map(Number) as [number, number];
  const model = printable((modelRaw ?? '').trim());
  const serial = printable((serialOwn || serialDevice || '').trim());
  const devicePath = await realpath(dir).catch(() => dir);
  const transport = transportOf(name, devicePath);
  const identity = identityOf(wwidOwn || wwidDevice, model, serial, byId.get(name));
  const partitions = await partitionsOf(dir, name);
  const holders = await entries(join(dir, 'holders'));
  const sizeBytes = Number(size ?? 0) * 512;
  const refusals: string[] = [];
  if (identity === undefined) refusals.push('reports no identity (no WWN, EUI or serial): it could not be told from another drive after a reboot');
  if (rootDevices.has(`${major}:${minor}`) || partitions.some((p) => rootDevices.has(p.dev))) refusals.push("holds the node's root or boot filesystem");
  if (partitions.length) refusals.push(`has partitions (${partitions.map((p) => p.name).join(', ')})`);
  if (holders.length) refusals.push(`is held by ${holders.sort().join(', ')} (device-mapper, md or another layer)`);
  const mounted = o.mounts.filter((m) => (m.major === major && m.minor === minor) || partitions.some((p) => p.dev === `${m.major}:${m.minor}`));
  if (ro === '1') refusals.push('is read-only');
  if (sizeBytes === 0) refusals.push('has no size (no medium?)');
  return {
    kernelName: name,
    major,
    minor,
    identity,
    model,
    serial,
    sizeBytes,
    logicalBlockSize: Number(logical ?? 512),
    physicalBlockSize: Number(physical ?? logical ?? 512),
    media: transport === 'nvme' ? 'nvme' : rotational === '0' ? 'ssd' : 'hdd',
    transport,
    byId: (byId.get(name) ?? []).sort(),
    refusals,
    mountedAt: [
      ...new Set([
        ...mounted.map((m) => printable(m.mountPoint)),
        ...[name, ...partitions.map((p) => p.name)]
          .filter((n) => filesystems.has(n) && !mounted.length)
          .map((n) => `a place this node's agent cannot see (${n} has a mounted ${filesystems.get(n)} filesystem)`),
      ]),
    ].sort(),
  };
}

/** The partitions of a whole device: its sysfs subdirectories that have a `partition` file. */
async function partitionsOf(dir: string, name: string): Promise<{ name: string; dev: string }[]> {
  const out: { name: string; dev: string }[] = [];
  for (const child of (await entries(dir)).sort()) {
    if (!child.startsWith(name)) continue;
    if ((await text(join(dir, child, 'partition'))) === undefined) continue;
    out.push({ name: child, dev: (await text(join(dir, child, 'dev'))) ?? '' });
  }
  return out;
}

/** The by-id names of each device (a partition's links go under the partition's name, never a drive's), by the kernel name their link points at. */
export async function byIdLinks(byIdDir: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const link of await entries(byIdDir)) {
    const target = await readlink(join(byIdDir, link)).catch(() => undefined);
    if (target === undefined) continue;
    const name = basename(target);
    out.set(name, [...(out.get(name) ?? []), link]);
  }
  return out;
}
