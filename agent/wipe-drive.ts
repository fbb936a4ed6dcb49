// The agent's half of a drive's wipe (api/drive-wipe.ts): it has no device access, so it asks the node side
// (csi-node, privileged, in the same pod) with a request file in the disk dir and reads the answer there.
// A request is written only while the drive is not mounted anywhere the scan can see, and always for the
// device the drive's by-id name leads to now; the answer counts only for the token asked for.
import { join } from 'node:path';
import { isDriveRecordLive, readDriveStagedRecord } from '../api/drive-staged-record.ts';
import { formatWipeRequest, parseWipeAnswer, parseWipeProgress, wipeAnswerName, wipeProgressName, wipeRequestName } from '../api/drive-wipe.ts';
import { readSmallFile, removeFile, writeFileAtomic } from '../lib/runtime/atomic-file.ts';
import type { DriveInfo } from './discover.ts';

export type DriveWipeState =
  | { kind: 'wiped'; bytes: number; ms: number; method: string }
  /** Asked, or cannot be asked yet: phase Wiping, with this message. */
  | { kind: 'waiting'; message: string }
  /** The node side tried and could not: phase Error, with this message (it tries again at its next sweep). */
  | { kind: 'failed'; message: string };

/** One look at a drive's wipe: ask for it, or read how it went. */
export async function wipeDriveStep(diskDir: string, diskID: string, token: string, drive: DriveInfo, hostPath: string): Promise<DriveWipeState> {
  const answerPath = join(diskDir, wipeAnswerName(diskID));
  const answer = parseWipeAnswer((await readSmallFile(answerPath).catch(() => undefined)) ?? '');
  if (answer?.token === token && answer.ok) {
    await removeFile(join(diskDir, wipeRequestName(diskID)));
    await removeFile(join(diskDir, wipeProgressName(diskID)));
    await removeFile(answerPath);
    return { kind: 'wiped', bytes: answer.bytes, ms: answer.ms, method: answer.method };
  }
  // Staged by the node side (a Block volume's device node is bound where no mount names the drive).
  const staged = await readDriveStagedRecord(diskDir, diskID);
  if (staged !== undefined && (await isDriveRecordLive(staged))) {
    return {
      kind: 'waiting',
      message: `waiting to wipe drive ${hostPath} (wipe request ${token}): it is staged at ${staged.stagingPath} on this node (${staged.device}); it is wiped once it is unstaged`,
    };
  }
  if (drive.mountedAt.length) {
    return { kind: 'waiting', message: `waiting to wipe drive ${hostPath} (wipe request ${token}): it is mounted at ${drive.mountedAt.join(', ')}; it is wiped once nothing is mounted from it` };
  }
  const request = formatWipeRequest({ token, byIdName: drive.byIdName, device: drive.device });
  const requestName = wipeRequestName(diskID);
  if ((await readSmallFile(join(diskDir, requestName)).catch(() => undefined)) !== request) await writeFileAtomic(diskDir, requestName, request);
  const progress = parseWipeProgress((await readSmallFile(join(diskDir, wipeProgressName(diskID))).catch(() => undefined)) ?? '');
  const sofar = progress?.token === token && progress.device === drive.device ? progress : undefined;
  if (answer?.token === token && !answer.ok) {
    const resume = sofar ? `; it resumes at ${gib(sofar.doneBytes)} of ${gib(sofar.totalBytes)}` : '';
    return { kind: 'failed', message: `cannot wipe drive ${hostPath} (wipe request ${token}): ${answer.message}; the node side tries again${resume}, and the drive stays held until it is wiped` };
  }
  if (sofar) {
    const pct = Math.floor((100 * sofar.doneBytes) / sofar.totalBytes);
    return { kind: 'waiting', message: `wiping drive ${hostPath} (wipe request ${token}): ${pct}% zeroed (${gib(sofar.doneBytes)} of ${gib(sofar.totalBytes)}) by the node side` };
  }
  return { kind: 'waiting', message: `wiping drive ${hostPath} (wipe request ${token}): asked the node side (the csi-node container), which discards or zeroes it` };
}

/** Sizes as a person reads them in a status message: MiB below a GiB, GiB with one decimal above. */
const gib = (bytes: number) => (bytes < 2 ** 30 ? `${Math.round(bytes / 2 ** 20)} MiB` : `${(bytes / 2 ** 30).toFixed(1)} GiB`);

/** Drops a request and its answer once no wipe is wanted any more (the request was replaced, or done). */
export async function forgetDriveWipe(diskDir: string, diskID: string): Promise<void> {
  await removeFile(join(diskDir, wipeRequestName(diskID)));
  await removeFile(join(diskDir, wipeProgressName(diskID)));
  await removeFile(join(diskDir, wipeAnswerName(diskID)));
}
