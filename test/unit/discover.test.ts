// Discovery on a real directory, with a file removed at the worst moment of a scan: between the moment the
// scan sees its name and the moment it checks it. The removal is real; only its timing is forced.
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, truncate, unlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import * as fsp from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { discover, diskIdOfEntry, inspectDiskFile, type DiscoverFs } from '../../agent/discover.ts';
import { nodeDiskName } from '../../api/names.ts';

async function dirWith(...files: string[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'nodedisks-discover-'));
  for (const f of files) {
    await writeFile(join(dir, f), '');
    await truncate(join(dir, f), 4096);
  }
  return dir;
}

/** Real file-system calls, except that `victim` is unlinked right before the given step looks at it. */
function removingBefore(step: 'lstat' | 'access', victim: string): DiscoverFs {
  const removeFirst = async (path: string) => {
    if (path.endsWith(`/${victim}`)) await unlink(path).catch(() => {});
  };
  return {
    readdir: (dir) => fsp.readdir(dir),
    lstat: async (path) => {
      if (step === 'lstat') await removeFirst(path);
      return await fsp.lstat(path);
    },
    access: async (path, mode) => {
      if (step === 'access') await removeFirst(path);
      await fsp.access(path, mode);
    },
  };
}

for (const step of ['lstat', 'access'] as const) {
  test(`an image removed during a scan (before ${step}) is simply not there: not ignored, not unreadable`, async (t) => {
    const dir = await dirWith('disk1.img', 'disk2.img');
    try {
      const found = await discover(dir, 'node-a', removingBefore(step, 'disk1.img'));
      t.deepEqual([...found.disks.keys()], ['disk2']);
      t.deepEqual(found.ignored, [], 'a vanished file is Missing for the agent, never an Error');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
}

test('sizes come from the file itself; a 0-byte image is found with size 0', async (t) => {
  const dir = await dirWith('disk1.img');
  try {
    await writeFile(join(dir, 'empty.img'), '');
    const found = await discover(dir, 'node-a');
    t.is(found.disks.get('disk1')?.sizeBytes, 4096);
    t.is(found.disks.get('empty')?.sizeBytes, 0);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a file event is traced to its disk: the image and its marker, not our temp files', (t) => {
  t.is(diskIdOfEntry('disk1.img'), 'disk1');
  t.is(diskIdOfEntry('disk1.img.reserved'), 'disk1');
  t.is(diskIdOfEntry('.disk1.img.reserved.tmp-0a1b2c'), undefined);
  t.is(diskIdOfEntry('notes.txt'), undefined);
});

test('one disk file is judged on its own as a scan judges it: a disk, ignored with a reason, or gone', async (t) => {
  const dir = await dirWith('disk1.img', 'Bad Name.img');
  try {
    t.like(await inspectDiskFile(dir, 'disk1.img'), { kind: 'disk', disk: { diskID: 'disk1', sizeBytes: 4096 } });
    const bad = await inspectDiskFile(dir, 'Bad Name.img');
    t.is(bad.kind, 'ignored');
    t.deepEqual(bad, (await discover(dir, 'n')).ignored.map((ignored) => ({ kind: 'ignored', ignored }))[0]);
    await unlink(join(dir, 'disk1.img'));
    t.deepEqual(await inspectDiskFile(dir, 'disk1.img'), { kind: 'gone' });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the disk whose NodeDisk bears a name keeps it: a newcomer making the same name is the collision', async (t) => {
  // Disk1.img sorts before disk1.img: name order alone would hand it disk1's NodeDisk.
  const dir = await dirWith('disk1.img', 'Disk1.img');
  try {
    const held = nodeDiskName('node-a', 'disk1');
    const found = await discover(dir, 'node-a', undefined, (objectName) => (objectName === held ? 'disk1' : undefined));
    t.deepEqual([...found.disks.keys()], ['disk1']);
    t.deepEqual(found.ignored, [{ name: 'Disk1.img', reason: `its NodeDisk name ${held} is already used by disk1.img; rename Disk1.img`, collidesWith: 'disk1' }]);
    // With no NodeDisk yet, the first in name order keeps it (the same answer on every node restart).
    const fresh = await discover(dir, 'node-a');
    t.deepEqual([...fresh.disks.keys()], ['Disk1']);
    t.like(fresh.ignored[0], { name: 'disk1.img', collidesWith: 'Disk1' });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a name held by a NodeDisk whose file is gone is still not taken by another file', async (t) => {
  const dir = await dirWith('Disk1.img');
  try {
    const found = await discover(dir, 'node-a', undefined, () => 'disk1');
    t.deepEqual([...found.disks.keys()], []);
    t.like(found.ignored[0], { name: 'Disk1.img', collidesWith: 'disk1' });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a FIFO or a socket named *.img is named as such, and never opened', async (t) => {
  const dir = await dirWith();
  const server = createServer();
  try {
    execFileSync('mkfifo', [join(dir, 'pipe.img')]);
    await new Promise<void>((resolve) => server.listen(join(dir, 'sock.img'), resolve));
    const found = await discover(dir, 'node-a');
    t.deepEqual(found.ignored, [
      { name: 'pipe.img', reason: 'is a FIFO (named pipe); disk images must be regular files' },
      { name: 'sock.img', reason: 'is a socket; disk images must be regular files' },
    ]);
  } finally {
    server.close();
    await rm(dir, { recursive: true, force: true });
  }
});
