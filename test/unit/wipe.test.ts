// agent/wipe-image.ts on real files: the bytes go, the size stays, and nothing but the regular image is touched.
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, open, readFile, rm, stat, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { wipeImage } from '../../agent/wipe-image.ts';

const MiB = 2 ** 20;

async function dir(): Promise<string> {
  return await mkdtemp(join(tmpdir(), 'nodedisks-wipe-'));
}

/** A sparse image of `size` with `secret` written at `at`. */
async function imageWith(path: string, size: number, secret: string, at: number): Promise<void> {
  await writeFile(path, '');
  await truncate(path, size);
  const fh = await open(path, 'r+');
  await fh.write(Buffer.from(secret), 0, secret.length, at);
  await fh.sync();
  await fh.close();
}

test('a wiped image reads as zeros everywhere, keeps its size, and holds no blocks', async (t) => {
  const d = await dir();
  try {
    const img = join(d, 'disk1.img');
    await imageWith(img, 8 * MiB, 'team-x secret', 3 * MiB + 17);
    t.true((await readFile(img)).includes('team-x secret'));
    t.is(await wipeImage(d, 'disk1'), 8 * MiB);
    const after = await readFile(img);
    t.is(after.length, 8 * MiB);
    t.false(after.includes('team-x secret'));
    t.true(after.every((b) => b === 0));
    // Sparse again: the old blocks are freed, not merely overwritten (st_blocks counts 512-byte units).
    t.is((await stat(img)).blocks, 0);
    // Wiping again (an agent restarted half way) is harmless.
    t.is(await wipeImage(d, 'disk1'), 8 * MiB);
  } finally {
    await rm(d, { recursive: true, force: true });
  }
});

test('an image that is a symbolic link is refused, and its target is left as it was', async (t) => {
  const d = await dir();
  const outside = await dir();
  try {
    const target = join(outside, 'precious');
    await writeFile(target, 'do not touch');
    await symlink(target, join(d, 'disk1.img'));
    const err = await t.throwsAsync(wipeImage(d, 'disk1'));
    t.regex(err.message, /disk1\.img is a symbolic link: it is never followed/);
    t.is(await readFile(target, 'utf8'), 'do not touch');
  } finally {
    await rm(d, { recursive: true, force: true });
    await rm(outside, { recursive: true, force: true });
  }
});

test('an image that is a FIFO or a directory is refused without blocking', async (t) => {
  const d = await dir();
  try {
    execFileSync('mkfifo', [join(d, 'disk1.img')]);
    const fifo = await t.throwsAsync(wipeImage(d, 'disk1'));
    t.regex(fifo.message, /disk1\.img is not a regular file/);
    await mkdir(join(d, 'disk2.img'));
    const directory = await t.throwsAsync(wipeImage(d, 'disk2'));
    t.regex(directory.message, /disk2\.img/);
    const missing = await t.throwsAsync(wipeImage(d, 'disk3'));
    t.regex(missing.message, /cannot open disk3\.img to wipe it/);
  } finally {
    await rm(d, { recursive: true, force: true });
  }
});
