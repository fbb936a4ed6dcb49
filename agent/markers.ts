// Reservation markers: `<disk>.img.reserved` containing "reserved\n".
// Written atomically and durably (exclusive no-follow temp file, fsync, rename, fsync of the dir) and
// never through a symlink: a marker path that is a link or a directory is reported, not touched.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { MARKER_CONTENT } from '../api/constants.ts';
import { markerName } from './discover.ts';

export type MarkerState =
  | { kind: 'absent' }
  | { kind: 'present' }
  | { kind: 'invalid'; reason: string };

export async function markerState(diskDir: string, diskID: string): Promise<MarkerState> {
  const path = join(diskDir, markerName(diskID));
  let st;
  try {
    st = await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent' };
    return { kind: 'invalid', reason: `cannot inspect marker ${markerName(diskID)}: ${(err as Error).message}` };
  }
  if (st.isSymbolicLink()) return { kind: 'invalid', reason: `marker ${markerName(diskID)} is a symbolic link; remove it by hand (it is never followed)` };
  if (st.isDirectory()) return { kind: 'invalid', reason: `marker ${markerName(diskID)} is a directory; remove it by hand` };
  if (!st.isFile()) return { kind: 'invalid', reason: `marker ${markerName(diskID)} is not a regular file; remove it by hand` };
  return { kind: 'present' };
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Makes the marker exist with the right content. Returns whether anything was written. */
export async function ensureMarker(diskDir: string, diskID: string): Promise<boolean> {
  const state = await markerState(diskDir, diskID);
  if (state.kind === 'invalid') throw new Error(state.reason);
  const target = join(diskDir, markerName(diskID));
  if (state.kind === 'present') {
    const content = await readFile(target, { encoding: 'utf8', flag: constants.O_RDONLY | constants.O_NOFOLLOW }).catch(() => '');
    if (content === MARKER_CONTENT) return false;
  }
  const tmp = join(diskDir, `.${markerName(diskID)}.tmp-${randomBytes(6).toString('hex')}`);
  // O_EXCL|O_NOFOLLOW: never reuse or follow anything someone placed at the temp path.
  const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  try {
    await fh.writeFile(MARKER_CONTENT);
    await fh.sync();
  } catch (err) {
    await fh.close();
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await fh.close();
  try {
    // Re-check right before the rename: a link or directory that appeared meanwhile is not replaced.
    const again = await markerState(diskDir, diskID);
    if (again.kind === 'invalid') throw new Error(again.reason);
    await rename(tmp, target);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await fsyncDir(diskDir);
  return true;
}

/** Makes the marker not exist. Returns whether anything was removed. */
export async function removeMarker(diskDir: string, diskID: string): Promise<boolean> {
  const state = await markerState(diskDir, diskID);
  if (state.kind === 'invalid') throw new Error(state.reason);
  if (state.kind === 'absent') return false;
  await unlink(join(diskDir, markerName(diskID)));
  await fsyncDir(diskDir);
  return true;
}
