// Makes a directory's entries durable: after a rename into it (an atomic replace), the rename itself
// survives a crash only once the directory is synced too.
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';

export async function fsyncDir(dir: string): Promise<void> {
  const fh = await fsp.open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
