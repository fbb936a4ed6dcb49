// A volume's ID names the NodeDisk and the CreateVolume request (the PV's name) together: the NodeDisk
// alone would let a DeleteVolume repeated after the disk went to another PV release the new owner's disk.
// Both halves are Kubernetes names (no '/'), so the first '/' splits them.
import { nodeNameProblem } from '../api/names.ts';

export function volumeId(nodeDisk: string, volumeName: string): string {
  return `${nodeDisk}/${volumeName}`;
}

/** The two halves of a volume ID, or undefined when it is not one of ours. */
export function parseVolumeId(id: string): { nodeDisk: string; volumeName: string } | undefined {
  const slash = id.indexOf('/');
  if (slash <= 0) return undefined;
  const nodeDisk = id.slice(0, slash);
  const volumeName = id.slice(slash + 1);
  if (nodeNameProblem(nodeDisk) !== undefined || volumeName === '' || volumeName.includes('/') || volumeName.length > 253) return undefined;
  return { nodeDisk, volumeName };
}
