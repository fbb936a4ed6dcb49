// A binary built once per machine into a cache entry of its own (a folder named by what it is built
// from), for builds that gobuild.ts's wrapper modules cannot express (`go install pkg@version`, a
// module's own go.mod). Two rules:
// - One builder at a time per entry, across processes: a lock file beside the entry, created exclusively,
//   names the process that builds; another process waits for it, then finds the entry built. A lock whose
//   process is gone (a build that was killed) is stale and taken over.
// - The build goes to a temp dir beside the entry and is renamed into place: an interrupted build never
//   leaves a half entry. So the lock saves minutes of CPU, not correctness: two builders that both took
//   over one stale lock at the same moment each end with a whole entry.
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, open, readFile, rename, rm, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { isExecutable } from './gobuild.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The start time of a process (field 22 of /proc/<pid>/stat): a reused pid has another. */
function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** "<pid> <start time>" of the holder, if it still runs; undefined for a stale or unreadable lock. */
async function liveHolder(file: string): Promise<number | undefined> {
  const [pid, start] = (await readFile(file, 'utf8').catch(() => '')).trim().split(' ');
  const n = Number(pid);
  if (!Number.isInteger(n) || n <= 0 || !start) return undefined;
  return processStart(n) === start ? n : undefined;
}

export interface LockOptions {
  /** What is built, for the waiting message: "csi-provisioner v6.4.0". */
  what: string;
  log: (line: string) => void;
  /** How long to wait for a live holder before giving up; 30 minutes by default. */
  waitMs?: number;
  pollMs?: number;
}

/** Runs `fn` holding the lock `file`; waits while another live process holds it. */
export async function withBuildLock<T>(file: string, opts: LockOptions, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + (opts.waitMs ?? 30 * 60_000);
  let told = false;
  for (;;) {
    try {
      const fh = await open(file, 'wx');
      await fh.writeFile(`${process.pid} ${processStart(process.pid) ?? ''}\n`);
      await fh.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = await liveHolder(file);
    if (holder === undefined) {
      // Stale (its builder is gone) or just being written: take it over unless it changed meanwhile.
      await sleep(opts.pollMs ?? 1000);
      if ((await liveHolder(file)) === undefined) await unlink(file).catch(() => undefined);
      continue;
    }
    if (Date.now() > deadline) throw new Error(`gave up waiting for process ${holder}, which has been building ${opts.what} for too long (lock ${file}); stop it or remove the lock`);
    if (!told) {
      opts.log(`waiting for process ${holder}, which is building ${opts.what} (lock ${file})`);
      told = true;
    }
    await sleep(opts.pollMs ?? 1000);
  }
  try {
    return await fn();
  } finally {
    // Only our own lock: one taken over meanwhile (see above) is the other builder's.
    const [pid] = (await readFile(file, 'utf8').catch(() => '')).split(' ');
    if (Number(pid) === process.pid) await unlink(file).catch(() => undefined);
  }
}

export interface CachedBuild {
  /** What is built, for messages: "csi-provisioner v6.4.0 (the local cluster's CSI sidecar)". */
  what: string;
  /** How long a cold build takes, for the first progress line: "about 3 minutes on 2 cores". */
  takes: string;
  /** The cache entry: a folder that holds the binary once built. */
  dir: string;
  /** File name of the binary in the entry. */
  name: string;
  /** Writes the executable `out`; throws with what failed. */
  build: (out: string) => Promise<void>;
  log?: (line: string) => void;
}

/** The path of the binary, built first (under the lock, renamed into place whole) when the entry lacks it. */
export async function ensureCachedBuild(b: CachedBuild): Promise<string> {
  const binary = join(b.dir, b.name);
  if (await isExecutable(binary)) return binary;
  const log = b.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  await mkdir(dirname(b.dir), { recursive: true });
  await withBuildLock(`${b.dir}.lock`, { what: b.what, log }, async () => {
    // Built by the process we waited for.
    if (await isExecutable(binary)) return;
    log(`building ${b.what} into ${b.dir} (first use on this machine, ${b.takes}; cached afterwards)`);
    const started = Date.now();
    const tmp = await mkdtemp(`${b.dir}.tmp-`);
    try {
      await b.build(join(tmp, b.name));
      if (!(await isExecutable(join(tmp, b.name)))) throw new Error(`building ${b.what} wrote no executable ${b.name}`);
      // A whole entry that appeared meanwhile is another builder's (see above), perhaps in use: it stays.
      // An entry without the binary is an incomplete one: replaced.
      if (!(await isExecutable(binary))) {
        await rm(b.dir, { recursive: true, force: true });
        await rename(tmp, b.dir);
      }
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
    log(`built ${b.name} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  });
  return binary;
}
