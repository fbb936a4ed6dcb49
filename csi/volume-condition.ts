// A published volume's health as the kernel sees it, for NodeGetVolumeStats' volume_condition: the kubelet
// turns an abnormal one into an event on the pod. Everything is found from the device's number (the
// mount's, or the bound device node's), never from a path: on a shared kernel another node's volume may
// have the same paths.
//
// Abnormal when:
// - the filesystem went read-only under a writable mount (ext4's errors=remount-ro; newer kernels say
//   `emergency_ro`), or ext4 has recorded errors since its last check;
// - the disk image behind the loop device was deleted while the volume is in use.
import type { MountEntry } from '../lib/runtime/mountinfo.ts';
import { blockDeviceName, ext4ErrorCount, readSysfsValue } from '../lib/runtime/sysfs.ts';

export interface VolumeCondition {
  abnormal: boolean;
  message: string;
}

export const NORMAL: VolumeCondition = { abnormal: false, message: '' };

const DELETED_SUFFIX = ' (deleted)';

interface DeviceNumber {
  major: number;
  minor: number;
}

const kernelName = (sysfs: string, n: DeviceNumber) => blockDeviceName(sysfs, `${n.major}:${n.minor}`);

/** What is wrong with the block device itself: the image behind a loop device deleted. */
export async function deviceProblem(n: DeviceNumber, sysfs = '/sys'): Promise<string | undefined> {
  const backing = await readSysfsValue(`${sysfs}/dev/block/${n.major}:${n.minor}/loop/backing_file`);
  if (backing?.endsWith(DELETED_SUFFIX)) {
    const name = (await kernelName(sysfs, n)) ?? `${n.major}:${n.minor}`;
    return `the disk image behind this volume (${name}) was deleted while the volume is in use: its data goes when the volume is unstaged; copy what you need now`;
  }
  return undefined;
}

/** A mounted volume's condition: its filesystem as the kernel reports it, then its device. */
export async function filesystemCondition(m: MountEntry, sysfs = '/sys'): Promise<VolumeCondition> {
  const problems: string[] = [];
  const name = (await kernelName(sysfs, m)) ?? `${m.major}:${m.minor}`;
  const wentReadOnly = m.superOptions.includes('emergency_ro') || (m.superOptions.includes('ro') && !m.options.includes('ro'));
  if (wentReadOnly) problems.push(`the ${m.fsType} filesystem on this volume (${name}) went read-only after IO errors`);
  if (m.fsType === 'ext4' || m.fsType === 'ext3') {
    const errors = await ext4ErrorCount(sysfs, name);
    if (errors > 0) problems.push(`ext4 has recorded ${errors} error${errors === 1 ? '' : 's'} on it since its last check`);
  }
  const device = await deviceProblem(m, sysfs);
  if (device) problems.push(device);
  if (problems.length === 0) return NORMAL;
  if (device === undefined) problems.push('copy the data off and move the workload to another volume');
  return { abnormal: true, message: `${problems.join('; ')}.` };
}

/** A published block volume's condition, from its device's number. */
export async function blockCondition(n: DeviceNumber, sysfs = '/sys'): Promise<VolumeCondition> {
  const device = await deviceProblem(n, sysfs);
  return device ? { abnormal: true, message: `${device}.` } : NORMAL;
}
