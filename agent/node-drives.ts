// The drives the admin chose on this node (docs/adr/0044-real-drives.md), as disks the reconcile handles
// beside the disk images: each chosen drive with an identity becomes `drive-<identity>`, with its facts and
// why it must not be taken. A chosen drive with no identity cannot be named stably, so it is no NodeDisk:
// it is logged once and counted, as is a by-id name of a partition that a selector matched.
//
// Scanned at every full scan, when udev's by-id dir changes (a drive plugged or pulled), and before a drive
// named by a file event in the disk dir is reconciled (./agent.ts); sysfs is read, never a device.
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { DRIVE_ID_PREFIX } from '../api/constants.ts';
import { diskIdProblem } from '../api/names.ts';
import type { DriveFacts } from '../api/v1alpha1/types.ts';
import { readMounts } from '../lib/runtime/mountinfo.ts';
import type { Logger } from '../lib/runtime/log.ts';
import type { DiskFile } from './discover.ts';
import { byIdLinks, scanDrives, type Drive } from './drive-scan.ts';
import { selectDrives, type DriveSelector } from './drive-select.ts';

export interface NodeDrivesOptions {
  selectors: DriveSelector[];
  /** `/sys`. */
  sysRoot: string;
  /** udev's by-id dir as this process sees it (`/dev/disk/by-id`). */
  byIdDir: string;
  /** The same dir as a host path, for spec.path. */
  hostByIdDir: string;
  /** Where this process's mounts are listed. */
  mountInfo: string;
  log: Logger;
  /** A drive appeared or went (udev changed the by-id dir): a full scan is wanted. */
  onChange(): void;
}

/** The diskID of a drive of this identity. */
export function driveDiskId(identity: string): string {
  return `${DRIVE_ID_PREFIX}${identity}`;
}

/** A scanned drive as a disk: the by-id name it is reached by is the first of its names, sorted. */
export function driveAsDisk(d: Drive, byIdDir: string, hostByIdDir: string): DiskFile | undefined {
  if (d.identity === undefined) return undefined;
  const diskID = driveDiskId(d.identity);
  if (diskIdProblem(diskID) !== undefined) return undefined;
  const name = d.byId[0] ?? d.kernelName;
  const facts: DriveFacts = {
    device: d.kernelName,
    ...(d.model ? { model: d.model } : {}),
    ...(d.serial ? { serial: d.serial } : {}),
    media: d.media,
    transport: d.transport,
    logicalBlockSize: d.logicalBlockSize,
    physicalBlockSize: d.physicalBlockSize,
  };
  return {
    diskID,
    file: join(byIdDir, name),
    hostPath: `${hostByIdDir.replace(/\/+$/, '')}/${name}`,
    sizeBytes: d.sizeBytes,
    drive: { facts, refusals: d.refusals, mountedAt: d.mountedAt, byIdName: name, device: `${d.major}:${d.minor}` },
  };
}

export class NodeDrives {
  private readonly o: NodeDrivesOptions;
  private found = new Map<string, DiskFile>();
  /** What was last logged about drives that are no NodeDisk, so each is said once. */
  private said = new Set<string>();
  private watcher: FSWatcher | undefined;

  constructor(o: NodeDrivesOptions) {
    this.o = o;
  }

  /** Whether the admin chose any drive: with no selector, nothing is scanned. */
  get enabled(): boolean {
    return this.o.selectors.length > 0;
  }

  /** The chosen drive of that diskID in the last scan. */
  get(diskID: string): DiskFile | undefined {
    return this.found.get(diskID);
  }

  diskIDs(): Iterable<string> {
    return this.found.keys();
  }

  /** Watches the by-id dir: udev adds and removes its links as drives come and go. */
  start(): void {
    if (!this.enabled) return;
    try {
      this.watcher = fsWatch(this.o.byIdDir, { persistent: false }, () => this.o.onChange());
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = undefined;
      });
    } catch (err) {
      this.o.log.warn('cannot watch the by-id dir; drives are found at the periodic rescan', { byIdDir: this.o.byIdDir, error: (err as Error).message });
    }
  }

  close(): void {
    this.watcher?.close();
  }

  async scan(): Promise<void> {
    if (!this.enabled) return;
    const mounts = await readMounts(this.o.mountInfo).catch(() => []);
    const [drives, links] = await Promise.all([scanDrives({ sysRoot: this.o.sysRoot, byIdDir: this.o.byIdDir, mounts }), byIdLinks(this.o.byIdDir)]);
    const { chosen, notDrives } = selectDrives(drives, this.o.selectors, links);
    const found = new Map<string, DiskFile>();
    const unnamed: string[] = [...notDrives];
    for (const d of chosen) {
      const disk = driveAsDisk(d, this.o.byIdDir, this.o.hostByIdDir);
      if (disk) found.set(disk.diskID, disk);
      else unnamed.push(`drive ${d.kernelName} (${d.model || 'no model'}) is chosen but not taken: ${d.refusals.join('; ') || 'it reports no identity a NodeDisk can be named by'}`);
    }
    this.found = found;
    const now = new Set(unnamed);
    for (const line of now) if (!this.said.has(line)) this.o.log.warn(line);
    this.said = now;
  }
}
