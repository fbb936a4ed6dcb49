// A disk's health as the kernel has seen it, for status.node.health: the agent reads it from sysfs, which
// anyone may read (it has no device access, ADR 10), at every reconcile of a drive and of an image a volume
// may be staged from (./reconcile-disk.ts), and reports it only when it changed.
//
// The devices are found by what they are, never by a path: an image's loop devices from the node side's live
// staged records (./loop-attached.ts: the image's inode, the device's sequence number, this boot), a drive's
// device from the number its by-id name led to. What counts as failing:
// - ext4 on the device has recorded errors (its superblock's error count: IO errors under a mounted
//   filesystem, or a corrupted one), shown in sysfs while it is mounted;
// - a SCSI or SATA drive's own count of commands that ended in an IO error (`device/ioerr_cnt`).
// Nothing here can say a disk is healthy: that takes the drive's own report (SMART), which is not read yet.
// So no error seen is no report at all (no write for it on any disk), never "True".
//
// A failure is kept after its evidence goes (an image's loop device is detached when its volume goes, and
// the filesystem's count with it): a disk that failed under one tenant is not handed to the next. It ends
// when a person marks it checked (the annotation `health-reviewed`, which `kubectl nodedisks uncordon`
// writes) at or after the failure's `since`; evidence still there is reported again, marked as reviewed.
import { HEALTH_REASON } from '../api/constants.ts';
import type { DiskHealth } from '../api/v1alpha1/types.ts';
import { blockDeviceName, ext4ErrorCount, readSysfsValue } from '../lib/runtime/sysfs.ts';
import { loopDevicesHolding } from './loop-attached.ts';

/** One thing the kernel has seen go wrong on a device of the disk. */
export interface KernelProblem {
  reason: (typeof HEALTH_REASON)['filesystemErrors' | 'ioErrors'];
  text: string;
}

/** What the kernel has seen go wrong on one block device, by its kernel name (`what` names it in words). */
export async function deviceProblems(kernelName: string, what: string, sysRoot: string): Promise<KernelProblem[]> {
  // A kernel name from sysfs or a staged record; anything else is not looked up.
  if (!/^[a-z][a-z0-9]*$/.test(kernelName)) return [];
  const out: KernelProblem[] = [];
  const fsErrors = await ext4ErrorCount(sysRoot, kernelName);
  if (fsErrors > 0) {
    out.push({ reason: HEALTH_REASON.filesystemErrors, text: `ext4 on ${what} has recorded ${fsErrors} error${fsErrors === 1 ? '' : 's'} since it was last checked` });
  }
  // SCSI and SATA drives count the commands that failed with an IO error, in hex.
  const ioErrors = Number.parseInt((await readSysfsValue(`${sysRoot}/block/${kernelName}/device/ioerr_cnt`)) ?? '', 16);
  if (Number.isSafeInteger(ioErrors) && ioErrors > 0) {
    out.push({ reason: HEALTH_REASON.ioErrors, text: `the kernel counted ${ioErrors} IO command${ioErrors === 1 ? '' : 's'} that failed on ${what}` });
  }
  return out;
}

export interface HealthSource {
  /** The disk dir as this process sees it, and the disk's ID: an image's loop devices are found by its records. */
  diskDir: string;
  diskID: string;
  /** A drive's device number (`major:minor`, what its by-id name led to); undefined for an image. */
  driveDevice?: string | undefined;
  sysRoot: string;
  bootIdFile?: string | undefined;
}

/** What the kernel has seen go wrong on the disk's devices now. Throws when the staged records cannot be read. */
export async function kernelProblems(s: HealthSource): Promise<KernelProblem[]> {
  if (s.driveDevice !== undefined) {
    const name = await blockDeviceName(s.sysRoot, s.driveDevice);
    return name ? deviceProblems(name, `the drive (${name})`, s.sysRoot) : [];
  }
  const loops = await loopDevicesHolding(s.diskDir, s.diskID, { sysBlock: `${s.sysRoot}/block`, bootIdFile: s.bootIdFile });
  const out: KernelProblem[] = [];
  for (const l of loops) {
    const name = l.device.replace(/^\/dev\//, '');
    out.push(...(await deviceProblems(name, `the volume staged from it (${name})`, s.sysRoot)));
  }
  return out;
}

export interface HealthJudgement {
  /** What the kernel shows now. */
  problems: KernelProblem[];
  /** What the agent reported last. */
  previous: DiskHealth | undefined;
  /** When a person last marked the disk's failure checked (the annotation), in ms; undefined if never. */
  reviewedAt: number | undefined;
  /** The disk's NodeDisk name, for the command the message suggests. */
  name: string;
  now: () => string;
}

/** The report: a failure now, or one not yet reviewed, is False; otherwise there is none (nothing here can tell healthy). */
export function judgeHealth(j: HealthJudgement): DiskHealth | undefined {
  const before = j.previous?.status === 'False' ? j.previous : undefined;
  const reviewed = (since: string | undefined) => j.reviewedAt !== undefined && since !== undefined && j.reviewedAt >= Date.parse(since);
  if (j.problems.length > 0) {
    const seen = j.problems.map((p) => p.text).join('; ');
    // The same failure keeps its start; a new or grown one starts again, and needs a new review.
    const since = before?.message.startsWith(seen) ? before.since : j.now();
    const after = reviewed(since)
      ? '; a person marked it checked since, so it may be handed out again'
      : `; it is not handed out until a person checks it and runs kubectl nodedisks uncordon ${j.name}`;
    return { status: 'False', reason: j.problems[0]!.reason, message: `${seen}${after}`, ...(since ? { since } : {}) };
  }
  // The evidence went (the volume was unstaged, the drive's count reset by a reboot); the failure stays as reported.
  if (before && !reviewed(before.since)) return before;
  return undefined;
}

/** Whether two reports say the same (the API server may give fields back in another order). */
export function sameHealth(a: DiskHealth | undefined, b: DiskHealth | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.status === b.status && a.reason === b.reason && a.message === b.message && (a.since ?? '') === (b.since ?? '');
}
