// The node side's records of what it staged (api/staged-record.ts): written right after a stage attaches
// an image's loop device, before anything is formatted or mounted, and removed once unstage has detached
// it. They are the agent's only way to know an image is in use, and the node side's way to find a device
// whose image was removed or renamed since it was staged (the image's name no longer leads to it).
//
// The disk dir is not trusted: a record is written to an exclusive, no-follow temp file and renamed over
// the entry (a link there is replaced, never followed); a record read back only counts while its device
// is live and still serves the inode it names (the caller checks that against losetup's list).
import * as fsp from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { DISK_SUFFIX } from '../api/constants.ts';
import { bootId, deviceNumberText, diskSeq, formatStagedRecord, isLive, readStagedRecords, type StagedRecord, stagedRecordName } from '../api/staged-record.ts';
import type { ImageRef } from './loop.ts';
import { NodeVolumeError } from './node-errors.ts';
import { writeFileAtomic } from '../lib/runtime/atomic-file.ts';
import { fsyncDir } from '../lib/runtime/fsync-dir.ts';

/** The record a stage of `image` on `device` at `stagingPath` leaves: the device's number and sequence read now. */
export async function stagedRecordOf(image: ImageRef, device: string, stagingPath: string): Promise<StagedRecord> {
  if (image.identity === undefined) throw new NodeVolumeError('not-found', `disk image ${image.path} does not exist on this node`);
  const st = await fsp.stat(device, { bigint: true });
  return {
    stagingPath,
    device,
    rdev: deviceNumberText(st.rdev),
    diskseq: await diskSeq(basename(device)),
    bootId: await bootId(),
    image: { ino: image.identity.ino.toString(), dev: `${image.identity.major}:${image.identity.minor}` },
  };
}

/** Writes the record beside the image, unless the same one is there already. */
export async function writeStagedRecord(image: ImageRef, record: StagedRecord): Promise<void> {
  const dir = dirname(image.path);
  const name = stagedRecordName(basename(image.path).slice(0, -DISK_SUFFIX.length));
  const text = formatStagedRecord(record);
  const existing = (await readStagedRecords(dir)).find((f) => f.name === name);
  if (existing && formatStagedRecord(existing.record) === text) return;
  try {
    await writeFileAtomic(dir, name, text);
  } catch (err) {
    throw new NodeVolumeError('internal', `cannot write the staged record ${name} beside ${image.path}: ${(err as Error).message}`, { cause: err });
  }
}

/** The records of volumes staged at `stagingPath` whose device is still the attachment they recorded. */
export async function liveRecordsAt(diskDir: string, stagingPath: string): Promise<StagedRecord[]> {
  const boot = await bootId();
  const out: StagedRecord[] = [];
  for (const { record } of await readStagedRecords(diskDir)) {
    if (record.stagingPath === stagingPath && (await isLive(record, { bootId: boot }))) out.push(record);
  }
  return out;
}

/** Removes the records of `stagingPath` (its devices are detached); returns how many went. */
export async function removeStagedRecords(diskDir: string, stagingPath: string): Promise<number> {
  let removed = 0;
  for (const { name, record } of await readStagedRecords(diskDir)) {
    if (record.stagingPath !== stagingPath) continue;
    await fsp.unlink(join(diskDir, name)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw new NodeVolumeError('internal', `cannot remove the staged record ${name}: ${err.message}`, { cause: err });
    });
    removed++;
  }
  if (removed) await fsyncDir(diskDir);
  return removed;
}

/**
 * Removes the records whose device is no longer what they recorded (detached, or gone with a reboot):
 * run at start, before any call is served, so nothing is staging meanwhile. Returns their names.
 */
export async function pruneStaleRecords(diskDir: string): Promise<string[]> {
  const boot = await bootId();
  const gone: string[] = [];
  for (const { name, record } of await readStagedRecords(diskDir)) {
    if (await isLive(record, { bootId: boot })) continue;
    await fsp.unlink(join(diskDir, name)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
    gone.push(name);
  }
  return gone;
}
