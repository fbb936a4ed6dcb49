// What a NodeDisk volume can be: one node's disk, so single-node access modes only; a filesystem (of the
// kinds the node side can make) or the raw block device.
import { invalid } from './errors.ts';
import type { AccessMode, VolumeCapability } from './types.ts';

const SINGLE_NODE: readonly AccessMode[] = ['SINGLE_NODE_WRITER', 'SINGLE_NODE_READER_ONLY', 'SINGLE_NODE_SINGLE_WRITER', 'SINGLE_NODE_MULTI_WRITER'];
/** The filesystems the node side formats a blank disk with (ext4 when the request names none). */
export const FS_TYPES = ['ext4', 'ext3', 'xfs'] as const;
export const DEFAULT_FS_TYPE = 'ext4';

/** Throws INVALID_ARGUMENT, naming the capability and the fix, for one this driver cannot give. */
export function checkCapabilities(caps: readonly VolumeCapability[]): void {
  for (const cap of caps) checkCapability(cap);
}

export function checkCapability(cap: VolumeCapability): void {
  const mode = cap.access_mode?.mode;
  if (!mode || mode === 'UNKNOWN') throw invalid('volume capability has no access mode');
  if (!SINGLE_NODE.includes(mode)) throw invalid(`access mode ${mode} is not supported: a NodeDisk is one node's disk (use ReadWriteOnce or ReadWriteOncePod)`);
  if (cap.access_type === 'mount') {
    const fs = cap.mount?.fs_type ?? '';
    if (fs !== '' && !(FS_TYPES as readonly string[]).includes(fs)) throw invalid(`fsType ${JSON.stringify(fs)} is not supported: use one of ${FS_TYPES.join(', ')}`);
  } else if (cap.access_type !== 'block') throw invalid('volume capability has neither block nor mount access type');
}

/**
 * The smallest disk each filesystem can be made on: mkfs.xfs (xfsprogs 5.19 and later) refuses a
 * filesystem under 300 MiB. A volume of that type is only placed on a disk at least this large, never on
 * one its node could not format.
 */
export const MIN_DISK_BYTES: Readonly<Record<string, number>> = { xfs: 300 * 2 ** 20 };

/** The smallest disk every capability of a request can be made on (0: any). */
export function minDiskBytes(caps: readonly VolumeCapability[]): number {
  return Math.max(0, ...caps.map((c) => (c.access_type === 'mount' ? (MIN_DISK_BYTES[fsTypeOf(c)] ?? 0) : 0)));
}

/** The filesystem a mount capability asks for. */
export function fsTypeOf(cap: VolumeCapability): string {
  return cap.mount?.fs_type || DEFAULT_FS_TYPE;
}
