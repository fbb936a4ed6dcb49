// One demo per state directory: `npm start` wipes .nodedisks-dev/, so a second start while one runs
// would pull the running demo's cluster out from under it. A pid file, created exclusively, says who
// runs there; a pid file whose process is gone (a demo that was killed) is stale and removed.
import { readFileSync, unlinkSync } from 'node:fs';
import { open, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';

export class DemoRunning extends Error {
  override name = 'DemoRunning';
}

/** Is `pid` a live demo? A live process with another command line is a reused pid, so not ours. */
async function isDemo(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: alive but someone else's: still not a demo we could have started, but do not guess.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  return cmdline === undefined || cmdline.includes('demo.ts');
}

/**
 * Takes `dir`/demo.pid for this process, or throws DemoRunning naming the demo that holds it.
 * Returns the path, for releaseDemoLock() when the demo exits.
 */
export async function acquireDemoLock(dir: string, say: (line: string) => void): Promise<string> {
  const file = join(dir, 'demo.pid');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fh = await open(file, 'wx');
      await fh.writeFile(`${process.pid}\n`);
      await fh.close();
      return file;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const pid = Number((await readFile(file, 'utf8').catch(() => '')).trim());
    if (Number.isInteger(pid) && pid > 0 && (await isDemo(pid))) {
      throw new DemoRunning(`a demo is already running (pid ${pid}) in ${dir}; stop it with Ctrl-C in its terminal (or kill ${pid}) first`);
    }
    say(`removed a stale lock of pid ${Number.isInteger(pid) && pid > 0 ? pid : '(unreadable)'} (that demo is no longer running)`);
    await unlink(file).catch(() => undefined);
  }
  throw new DemoRunning(`another demo is starting in ${dir} at this very moment; wait for it or stop it first`);
}

/** Removes the lock if it is still ours. Synchronous, so it can run in a process 'exit' handler. */
export function releaseDemoLock(file: string): void {
  try {
    if (Number(readFileSync(file, 'utf8').trim()) === process.pid) unlinkSync(file);
  } catch {
    // Already gone.
  }
}
