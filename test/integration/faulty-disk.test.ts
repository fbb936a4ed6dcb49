// The failing disk the health tests stand on (hack/faultydisk): a loop device attached over its FUSE file
// returns real IO errors when told to and works again when healed, and ext4 on it reacts as the kernel does
// to a failing disk (errors counted, the filesystem remounted read-only). Root only: FUSE and loop devices.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { ensureFaultyDisk, FaultyDisk } from '../../hack/faultydisk/faultydisk.ts';
import { parseMountInfo } from '../../lib/runtime/mountinfo.ts';

const run = promisify(execFile);
const MiB = 2 ** 20;

let work = '';
let bin = '';
const loops: string[] = [];
const mounts: string[] = [];
const disks: FaultyDisk[] = [];

test.before(async () => {
  if (process.getuid?.() !== 0) throw new Error('the failing disk needs root (FUSE, loop devices): run the integration tests as root, as .ci/run does');
  bin = await ensureFaultyDisk();
  work = await mkdtemp(join(tmpdir(), 'nodedisks-faulty-'));
});

test.after.always(async () => {
  for (const m of mounts.splice(0).reverse()) await run('umount', [m]).catch(() => undefined);
  for (const l of loops.splice(0)) await run('losetup', ['--detach', l]).catch(() => undefined);
  for (const d of disks.splice(0)) await d.close().catch(() => undefined);
  if (work) await rm(work, { recursive: true, force: true });
});

async function failingDisk(name: string, size: number): Promise<{ disk: FaultyDisk; device: string }> {
  const image = join(work, `${name}.backing`);
  const mnt = join(work, name);
  await mkdir(mnt);
  await run('truncate', ['-s', String(size), image]);
  const disk = await FaultyDisk.serve(bin, image, mnt);
  disks.push(disk);
  const { stdout } = await run('losetup', ['--find', '--show', '--direct-io=on', disk.path]);
  const device = stdout.trim();
  loops.push(device);
  return { disk, device };
}

/** dd's exit and what it said, reading or writing 64 KiB at the start of the device with direct I/O. */
async function dd(direction: 'read' | 'write', device: string): Promise<{ ok: boolean; said: string }> {
  const args = direction === 'read' ? [`if=${device}`, 'of=/dev/null', 'iflag=direct'] : ['if=/dev/zero', `of=${device}`, 'oflag=direct'];
  try {
    await run('dd', [...args, 'bs=64k', 'count=1', 'status=none']);
    return { ok: true, said: '' };
  } catch (err) {
    return { ok: false, said: String((err as { stderr?: string }).stderr ?? err) };
  }
}

test('a loop device over the failing disk fails reads, then writes, on command, and works again when healed', async (t) => {
  const { disk, device } = await failingDisk('rw', 16 * MiB);
  t.deepEqual(await dd('read', device), { ok: true, said: '' });
  t.deepEqual(await dd('write', device), { ok: true, said: '' });

  t.regex(await disk.set('fail reads'), /^ok failing reads/);
  const read = await dd('read', device);
  t.false(read.ok);
  t.regex(read.said, /Input\/output error/);
  t.true((await dd('write', device)).ok, 'writes still work while only reads fail');

  t.regex(await disk.set('fail writes'), /^ok failing writes/);
  const write = await dd('write', device);
  t.false(write.ok);
  t.regex(write.said, /Input\/output error/);
  t.true((await dd('read', device)).ok, 'reads work again while only writes fail');

  // The answer counts the requests refused: the IO above reached the program, not a cache.
  const healed = await disk.set('heal');
  t.regex(healed, /^ok healthy \((\d+) requests refused so far\)$/);
  t.true(Number(/\((\d+) requests/.exec(healed)?.[1]) >= 2);
  t.deepEqual(await dd('read', device), { ok: true, said: '' });
  t.deepEqual(await dd('write', device), { ok: true, said: '' });
});

test('ext4 on the failing disk counts the errors and goes read-only, as on a failing drive', async (t) => {
  const { disk, device } = await failingDisk('fs', 64 * MiB);
  await run('mkfs.ext4', ['-q', '-F', device]);
  const mnt = join(work, 'fs-mounted');
  await mkdir(mnt);
  await run('mount', ['-t', 'ext4', '-o', 'errors=remount-ro', device, mnt]);
  mounts.push(mnt);
  const counter = `/sys/fs/ext4/${basename(device)}/errors_count`;
  t.is((await readFile(counter, 'utf8')).trim(), '0');

  await disk.set('fail writes');
  // A file's data, then the journal's commit: both writes fail, and ext4 aborts the journal.
  await run('dd', ['if=/dev/zero', `of=${join(mnt, 'data')}`, 'bs=64k', 'count=4', 'conv=fsync', 'status=none']).catch(() => undefined);
  await run('sync', ['-f', mnt]).catch(() => undefined);

  // The filesystem goes read-only, not the mount: the superblock's options say so, as `ro` on older
  // kernels and `emergency_ro` on this machine's 6.18.
  const options = async () => parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8')).find((m) => m.mountPoint === mnt)?.superOptions ?? [];
  let ro = false;
  for (let i = 0; i < 50 && !ro; i++) {
    ro = (await options()).some((o) => o === 'ro' || o === 'emergency_ro');
    if (!ro) await new Promise((r) => setTimeout(r, 100));
  }
  t.true(ro, `the filesystem's options: ${(await options()).join(',')}`);
  t.true(Number((await readFile(counter, 'utf8')).trim()) > 0, 'ext4 counted the errors');
  await disk.set('heal');
});
