// Reservation markers: `<disk>.img.reserved` containing "reserved\n".
// Written atomically and durably (exclusive no-follow temp file, fsync, rename, fsync of the dir) and
// never through a symlink: a marker path that is a link or a directory is reported, not touched.
//
// The disk dir is not trusted: a marker is never read whole (a few bytes decide, and a marker of the wrong
// size is not read at all), and nothing that is not a regular file is read from. The path is looked at
// with lstat first, then opened O_NONBLOCK|O_NOFOLLOW|O_NOCTTY and checked again with fstat, so an entry
// swapped in between (a FIFO, a link) can neither block the worker nor be followed. A wrong marker that a
// rename can replace (wrong content or size, a FIFO, a socket, a device node) still counts as the
// reservation and is put right by one atomic rename: at no moment is there no marker.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { DISK_SUFFIX, MARKER_CONTENT, MARKER_SUFFIX } from '../api/constants.ts';
import { isDriveId } from '../api/names.ts';
import { fileTypeOf, type FileType } from './discover.ts';
import { fsyncDir } from '../lib/runtime/fsync-dir.ts';

/**
 * The marker file's name: `<disk>.img.reserved` beside a disk image; a drive has no directory of its own,
 * so its marker is `drive-<identity>.reserved` in the disk dir (ADR 44), where a person on the node sees
 * every reservation with one `ls`.
 */
export function markerName(diskID: string): string {
  return isDriveId(diskID) ? `${diskID}${MARKER_SUFFIX}` : `${diskID}${DISK_SUFFIX}${MARKER_SUFFIX}`;
}

export type MarkerState =
  | { kind: 'absent' }
  /** Something holds the marker path, so the disk is reserved; `wrong` says what a rewrite puts right. */
  | { kind: 'present'; wrong?: string }
  /** Something the agent will not touch or cannot inspect (a link, a directory): a person fixes it. */
  | { kind: 'invalid'; reason: string };

type StatLike = { size: number } & FileType;

/** The file-system calls that look at a marker (tests swap an entry between two of them, or count reads). */
export interface MarkerFs {
  lstat(path: string): Promise<StatLike>;
  open(
    path: string,
    flags: number,
  ): Promise<{
    stat(): Promise<StatLike>;
    read(buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }>;
    close(): Promise<void>;
  }>;
}

const realFs: MarkerFs = { lstat: fsp.lstat, open: (path, flags) => fsp.open(path, flags) };

/** The most a marker check ever reads: the content plus one byte, to tell "reserved\n" from a longer file. */
export const MARKER_READ_LIMIT = Buffer.byteLength(MARKER_CONTENT) + 1;
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

export async function markerState(diskDir: string, diskID: string, fs: MarkerFs = realFs): Promise<MarkerState> {
  const marker = markerName(diskID);
  const path = join(diskDir, marker);
  let st;
  try {
    st = await fs.lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent' };
    return { kind: 'invalid', reason: `cannot inspect marker ${marker}: ${(err as Error).message}` };
  }
  // Anything else than a regular file is judged by its type alone: never opened, never read.
  if (!st.isFile()) return byType(marker, st);
  if (st.size !== MARKER_READ_LIMIT - 1) return wrongSize(st.size);
  let fh;
  try {
    fh = await fs.open(path, READ_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Replaced since lstat: removed, by a link (ELOOP), by a socket (ENXIO). Say what is there now.
    if (code === 'ENOENT') return { kind: 'absent' };
    if (code === 'ELOOP') return { kind: 'invalid', reason: `marker ${marker} is a symbolic link; remove it by hand (it is never followed)` };
    if (code === 'ENXIO') return { kind: 'present', wrong: 'is a socket, not a regular file' };
    // Unreadable (its mode, say): still a file at the marker path, so still the reservation; a rewrite fixes it.
    return { kind: 'present', wrong: `cannot be read (${(err as Error).message})` };
  }
  try {
    const now = await fh.stat();
    if (!now.isFile()) return byType(marker, now);
    if (now.size !== MARKER_READ_LIMIT - 1) return wrongSize(now.size);
    const buf = Buffer.alloc(MARKER_READ_LIMIT);
    let filled = 0;
    try {
      while (filled < buf.length) {
        const { bytesRead } = await fh.read(buf, filled, buf.length - filled, filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
    } catch (err) {
      return { kind: 'present', wrong: `cannot be read (${(err as Error).message})` };
    }
    if (filled !== MARKER_READ_LIMIT - 1) return wrongSize(filled);
    return buf.subarray(0, filled).toString('utf8') === MARKER_CONTENT ? { kind: 'present' } : { kind: 'present', wrong: `does not hold ${JSON.stringify(MARKER_CONTENT)}` };
  } finally {
    await fh.close();
  }
}

/** A marker path that is not a regular file: put right when a rename can replace it, reported otherwise. */
function byType(marker: string, st: StatLike): MarkerState {
  if (st.isSymbolicLink()) return { kind: 'invalid', reason: `marker ${marker} is a symbolic link; remove it by hand (it is never followed)` };
  if (st.isDirectory()) return { kind: 'invalid', reason: `marker ${marker} is a directory; remove it by hand` };
  if (st.isFile()) return { kind: 'present' };
  return { kind: 'present', wrong: `is ${fileTypeOf(st)}, not a regular file` };
}

function wrongSize(size: number): MarkerState {
  return { kind: 'present', wrong: `is ${size} bytes, not the ${MARKER_READ_LIMIT - 1} of ${JSON.stringify(MARKER_CONTENT)}` };
}

/**
 * Makes the marker exist with the right content. Returns whether anything was written; `replaced` is told
 * what a wrong marker was before it was put right.
 */
export async function ensureMarker(diskDir: string, diskID: string, o: { fs?: MarkerFs; replaced?: (wrong: string) => void } = {}): Promise<boolean> {
  const state = await markerState(diskDir, diskID, o.fs);
  if (state.kind === 'invalid') throw new Error(state.reason);
  if (state.kind === 'present' && state.wrong === undefined) return false;
  const target = join(diskDir, markerName(diskID));
  const tmp = join(diskDir, `.${markerName(diskID)}.tmp-${randomBytes(6).toString('hex')}`);
  // O_EXCL|O_NOFOLLOW: never reuse or follow anything someone placed at the temp path.
  const fh = await fsp.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  try {
    await fh.writeFile(MARKER_CONTENT);
    await fh.sync();
  } catch (err) {
    await fh.close();
    await fsp.unlink(tmp).catch(() => {});
    throw err;
  }
  await fh.close();
  try {
    // Re-check right before the rename: a link or directory that appeared meanwhile is not replaced.
    const again = await markerState(diskDir, diskID, o.fs);
    if (again.kind === 'invalid') throw new Error(again.reason);
    // rename replaces the entry itself (a wrong file, a FIFO, a device node), never what it might point to.
    await fsp.rename(tmp, target);
  } catch (err) {
    await fsp.unlink(tmp).catch(() => {});
    throw err;
  }
  await fsyncDir(diskDir);
  if (state.kind === 'present' && state.wrong !== undefined) o.replaced?.(state.wrong);
  return true;
}

/** Makes the marker not exist. Returns whether anything was removed. */
export async function removeMarker(diskDir: string, diskID: string, fs?: MarkerFs): Promise<boolean> {
  const state = await markerState(diskDir, diskID, fs);
  if (state.kind === 'invalid') throw new Error(state.reason);
  if (state.kind === 'absent') return false;
  // unlink removes the entry (a FIFO or device node included), never what it might stand for.
  await fsp.unlink(join(diskDir, markerName(diskID)));
  await fsyncDir(diskDir);
  return true;
}
