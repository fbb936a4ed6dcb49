// Wiping a disk image before it changes hands (docs/adr/0038-wipe-before-a-disk-changes-hands.md).
//
// A disk image is a sparse file: cutting it to 0 bytes frees every block it had, and extending it again to
// the same size gives back a file that reads as zeros everywhere, at once, whatever its size. The size is
// kept (the NodeDisk's capacity is what its next owner was promised). The file is opened with no-follow
// and non-blocking flags and checked with fstat to be a regular file, as the markers are (ADR 29): a link
// or a FIFO swapped in for the image is refused, never followed or written through. fsync makes the wipe
// durable before it is reported done, so a reboot right after cannot bring the old blocks back.
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { DISK_SUFFIX } from '../api/constants.ts';

const WIPE_FLAGS = constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

/** The file-system call a wipe starts with (tests count it, or hand it something that is not a file). */
export interface WipeFs {
  open(
    path: string,
    flags: number,
  ): Promise<{
    stat(): Promise<{ size: number; isFile(): boolean }>;
    truncate(len: number): Promise<void>;
    sync(): Promise<void>;
    close(): Promise<void>;
  }>;
}

const realFs: WipeFs = { open: (path, flags) => fsp.open(path, flags) };

/** Wipes `<diskDir>/<diskID>.img` in place, keeping its size; returns that size. Throws, in words, when it cannot. */
export async function wipeImage(diskDir: string, diskID: string, fs: WipeFs = realFs): Promise<number> {
  const name = `${diskID}${DISK_SUFFIX}`;
  let fh;
  try {
    fh = await fs.open(join(diskDir, name), WIPE_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw new Error(`${name} is a symbolic link: it is never followed, so it is not wiped (replace it with the image itself)`);
    if (code === 'ENXIO') throw new Error(`${name} is not a regular file (a FIFO or socket): not wiped`);
    throw new Error(`cannot open ${name} to wipe it: ${(err as Error).message}`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new Error(`${name} is not a regular file: not wiped`);
    await fh.truncate(0);
    await fh.truncate(st.size);
    await fh.sync();
    return st.size;
  } finally {
    await fh.close();
  }
}
