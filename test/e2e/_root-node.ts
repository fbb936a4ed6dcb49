// What the root-only node tests share (real loop devices, real mounts, in temp dirs): a refusal that
// names the reason when not root, a temp dir whose every mount and loop device is undone in teardown
// whatever the test did, and a look at what is left that does not use the code under test (the raw
// mountinfo text and sysfs), so that a leak the node code cannot see is still caught.
import { execFileSync, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExecutionContext } from 'ava';

/** Thrown by the file's before hook: the tests fail, naming why, rather than skip. */
export function requireRoot(): void {
  if (process.getuid?.() !== 0) {
    throw new Error('these tests attach loop devices and mount filesystems, which needs root: run them as root (sudo npm run test:e2e, or sudo npx ava <file>)');
  }
}

/** Backing files of the attached loop devices, read from sysfs: device → path. */
export async function loopBackingFiles(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const name of await readdir('/sys/block')) {
    if (!/^loop\d+$/.test(name)) continue;
    try {
      out.set(`/dev/${name}`, (await readFile(`/sys/block/${name}/loop/backing_file`, 'utf8')).replace(/\n$/, ''));
    } catch {
      // Not attached: sysfs has no backing_file for it.
    }
  }
  return out;
}

/** Mount points of this process's mount namespace under `dir`, from the raw mountinfo text. */
export async function mountsUnder(dir: string): Promise<string[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  return text
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => p !== undefined && (p === dir || p.startsWith(`${dir}/`)));
}

/** What is left under `dir`: mounts, and loop devices over its files (a removed file's shows " (deleted)"). */
export async function leftovers(dir: string): Promise<{ mounts: string[]; loops: string[] }> {
  const loops = [...(await loopBackingFiles())].filter(([, f]) => f.startsWith(`${dir}/`)).map(([d, f]) => `${d} ${f}`);
  return { mounts: await mountsUnder(dir), loops };
}

/** Undoes every mount under `dir` (deepest and latest first) and every loop device over its files. */
export async function forceCleanup(dir: string): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const mounts = await mountsUnder(dir);
    if (mounts.length === 0) break;
    const last = mounts.at(-1)!;
    try {
      execFileSync('umount', [last], { stdio: 'ignore' });
    } catch {
      execFileSync('umount', ['--lazy', last], { stdio: 'ignore' });
    }
  }
  for (const [device, file] of await loopBackingFiles()) {
    if (file.startsWith(`${dir}/`)) execFileSync('losetup', ['--detach', device], { stdio: 'ignore' });
  }
  await rm(dir, { recursive: true, force: true });
}

/** A temp dir (its real path, as the kernel reports it) cleaned up in teardown, even after a failure. */
export async function rootTempDir(t: ExecutionContext, prefix: string): Promise<string> {
  const d = await realpath(await mkdtemp(join(tmpdir(), prefix)));
  t.teardown(() => forceCleanup(d));
  return d;
}

/**
 * Another node of a kernel shared by several (the local cluster): its own `<diskID>.img` at the very path
 * of this node's, attached from its own mount namespace and held open as a pod's reads hold it; its bytes
 * begin with `mark`. Stopped and detached in teardown. Returns the device.
 */
export async function otherNodesDevice(t: ExecutionContext, o: { dir: string; diskDir: string; diskID: string; bytes: number; mark: string }): Promise<string> {
  const otherDisks = join(o.dir, 'other-node-disks');
  await mkdir(otherDisks);
  const file = join(otherDisks, `${o.diskID}.img`);
  await writeFile(file, o.mark);
  await truncate(file, o.bytes);
  const child = spawn(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-ec',
      'mount --bind "$1" "$2"; d=$(losetup --find --show "$2/$3"); exec 3<"$d"; echo "$d"; exec sleep 600 <&3',
      'sh',
      otherDisks,
      o.diskDir,
      `${o.diskID}.img`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise((r) => child.once('exit', r));
  const device = await new Promise<string>((resolve, reject) => {
    child.stdout.once('data', (b: Buffer) => resolve(b.toString().trim()));
    child.once('exit', (code) => reject(new Error(`the other node's process exited (${code}) before it attached its disk`)));
  });
  t.teardown(async () => {
    child.kill('SIGKILL');
    await exited;
    if ((await loopBackingFiles()).get(device)?.endsWith(`/${o.diskID}.img`)) execFileSync('losetup', ['--detach', device]);
  });
  return device;
}
