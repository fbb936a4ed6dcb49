// The CSI node side's record of a staged drive: `drive-<identity>.staged` in the disk dir, written before
// anything touches the device at a stage, removed at unstage. As an image's record is (./staged-record.ts),
// it is how the agent, which has no device access, knows a drive serves a volume and must not be wiped: a
// Block volume's bind of the device node is no mount the agent can tie to the drive.
//
// A record is live only in the boot it was made in, while the device it names still has the device number
// and disk sequence number it had then: a drive pulled and another plugged in its place is a new device.
import { join } from 'node:path';
import { readSmallFile } from '../lib/runtime/atomic-file.ts';
import { bootId, diskSeq, SYS_BLOCK } from './staged-record.ts';

export const DRIVE_STAGED_SUFFIX = '.staged';

export interface DriveStagedRecord {
  stagingPath: string;
  /** `/dev/<kernel name>` and its `major:minor`. */
  device: string;
  rdev: string;
  diskseq: string | undefined;
  bootId: string;
}

export function driveStagedRecordName(diskID: string): string {
  return `${diskID}${DRIVE_STAGED_SUFFIX}`;
}

export function formatDriveStagedRecord(r: DriveStagedRecord): string {
  return `${JSON.stringify({ stagingPath: r.stagingPath, device: r.device, rdev: r.rdev, diskseq: r.diskseq ?? null, bootId: r.bootId })}\n`;
}

export function parseDriveStagedRecord(text: string): DriveStagedRecord | undefined {
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    if (typeof v.stagingPath !== 'string' || !v.stagingPath.startsWith('/')) return undefined;
    if (typeof v.device !== 'string' || !/^\/dev\/[A-Za-z0-9._-]+$/.test(v.device)) return undefined;
    if (typeof v.rdev !== 'string' || !/^\d+:\d+$/.test(v.rdev) || typeof v.bootId !== 'string') return undefined;
    const diskseq = typeof v.diskseq === 'string' ? v.diskseq : undefined;
    return { stagingPath: v.stagingPath, device: v.device, rdev: v.rdev, diskseq, bootId: v.bootId };
  } catch {
    return undefined;
  }
}

/** The drive's record in the disk dir, if there is one that can be read. */
export async function readDriveStagedRecord(diskDir: string, diskID: string): Promise<DriveStagedRecord | undefined> {
  const text = await readSmallFile(join(diskDir, driveStagedRecordName(diskID))).catch(() => undefined);
  return text === undefined ? undefined : parseDriveStagedRecord(text);
}

/** Whether the record still describes a device of this boot, unchanged since the stage. */
export async function isDriveRecordLive(r: DriveStagedRecord, o: { sysBlock?: string; bootIdFile?: string } = {}): Promise<boolean> {
  if (r.bootId !== (await bootId(o.bootIdFile))) return false;
  const name = r.device.slice('/dev/'.length);
  const sysBlock = o.sysBlock ?? SYS_BLOCK;
  const dev = await readSmallFile(join(sysBlock, name, 'dev')).catch(() => undefined);
  if (dev?.trim() !== r.rdev) return false;
  return r.diskseq === undefined || (await diskSeq(name, sysBlock)) === r.diskseq;
}
