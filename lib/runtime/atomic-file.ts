// Small files two programs hand each other in a directory neither trusts (the disk dir): written whole or
// not at all, durably, never through a link; read only when they are a regular file of a few KiB, without
// following a link or blocking on a FIFO swapped in between.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir } from './fsync-dir.ts';

/** Writes `text` as `dir/name`: an exclusive, no-follow temp file, synced, renamed over the entry, the dir synced. */
export async function writeFileAtomic(dir: string, name: string, text: string): Promise<void> {
  const tmp = join(dir, `.${name}.tmp-${randomBytes(6).toString('hex')}`);
  try {
    const fh = await fsp.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
    try {
      await fh.writeFile(text);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fsp.rename(tmp, join(dir, name));
    await fsyncDir(dir);
  } catch (err) {
    await fsp.unlink(tmp).catch(() => undefined);
    throw err;
  }
}

/** `dir/name` as text when it is a regular file of at most `limit` bytes; undefined when absent; an error naming it otherwise. */
export async function readSmallFile(path: string, limit = 4096): Promise<string | undefined> {
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw new Error(`${path} is a symbolic link, not a file: not read`);
    throw err;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new Error(`${path} is not a regular file: not read`);
    if (st.size > limit) throw new Error(`${path} is ${st.size} bytes, more than the ${limit} it may have: not read`);
    return await fh.readFile('utf8');
  } finally {
    await fh.close();
  }
}

/** Removes `dir/name` if it is there. */
export async function removeFile(path: string): Promise<boolean> {
  try {
    await fsp.unlink(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}
