import { execFileSync } from 'node:child_process';
import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { discover } from '../../agent/discover.ts';
import { ensureMarker, MARKER_READ_LIMIT, markerState, removeMarker, type MarkerFs } from '../../agent/markers.ts';

const made: string[] = [];
const dir = async () => {
  const d = await mkdtemp(join(tmpdir(), 'nodedisks-markers-'));
  made.push(d);
  return d;
};
test.after.always(async () => {
  for (const d of made) await rm(d, { recursive: true, force: true });
});

test('ensureMarker writes "reserved\\n" once, leaves no temp files, and removeMarker removes it', async (t) => {
  const d = await dir();
  t.true(await ensureMarker(d, 'disk1'));
  t.is(readFileSync(join(d, 'disk1.img.reserved'), 'utf8'), 'reserved\n');
  t.is(lstatSync(join(d, 'disk1.img.reserved')).mode & 0o777, 0o644);
  t.false(await ensureMarker(d, 'disk1'), 'idempotent');
  t.deepEqual(readdirSync(d), ['disk1.img.reserved']);
  t.true(await removeMarker(d, 'disk1'));
  t.false(await removeMarker(d, 'disk1'));
  t.deepEqual(readdirSync(d), []);
});

test('a marker with wrong content is rewritten', async (t) => {
  const d = await dir();
  writeFileSync(join(d, 'disk1.img.reserved'), 'junk');
  t.true(await ensureMarker(d, 'disk1'));
  t.is(readFileSync(join(d, 'disk1.img.reserved'), 'utf8'), 'reserved\n');
});

test('a symlink marker is never followed nor replaced', async (t) => {
  const d = await dir();
  const victim = join(d, 'victim');
  writeFileSync(victim, 'precious');
  symlinkSync(victim, join(d, 'disk1.img.reserved'));
  await t.throwsAsync(ensureMarker(d, 'disk1'), { message: /is a symbolic link/ });
  await t.throwsAsync(removeMarker(d, 'disk1'), { message: /is a symbolic link/ });
  t.is(readFileSync(victim, 'utf8'), 'precious');
  t.is(readlinkSync(join(d, 'disk1.img.reserved')), victim);
  t.like(await markerState(d, 'disk1'), { kind: 'invalid' });
});

test('a directory marker is reported', async (t) => {
  const d = await dir();
  mkdirSync(join(d, 'disk1.img.reserved'));
  await t.throwsAsync(ensureMarker(d, 'disk1'), { message: /is a directory/ });
});

test('an unwritable disk dir gives a clear error and leaves nothing behind', async (t) => {
  if (process.getuid?.() === 0) {
    // root ignores directory permissions; prove the same path with a dir that does not exist instead.
    await t.throwsAsync(ensureMarker(join(await dir(), 'missing'), 'disk1'), { message: /ENOENT/ });
    return;
  }
  const d = await dir();
  chmodSync(d, 0o555);
  await t.throwsAsync(ensureMarker(d, 'disk1'), { message: /EACCES/ });
  chmodSync(d, 0o755);
  t.deepEqual(readdirSync(d), []);
});

test('discovery keeps regular images and explains everything else', async (t) => {
  const d = await dir();
  writeFileSync(join(d, 'disk1.img'), Buffer.alloc(1024));
  writeFileSync(join(d, 'disk1.img.reserved'), 'reserved\n');
  writeFileSync(join(d, 'notes.txt'), 'x');
  symlinkSync(join(d, 'disk1.img'), join(d, 'link.img'));
  mkdirSync(join(d, 'dir.img'));
  writeFileSync(join(d, '..hidden.img'), 'x');
  writeFileSync(join(d, 'disk_2.img'), 'x');
  writeFileSync(join(d, 'disk-2.img'), 'x');
  const found = await discover(d, 'node-a');
  t.deepEqual([...found.disks.keys()].sort(), ['disk-2', 'disk1']);
  t.is(found.disks.get('disk1')?.sizeBytes, 1024);
  const reasons = Object.fromEntries(found.ignored.map((i) => [i.name, i.reason]));
  t.regex(reasons['link.img'] ?? '', /symbolic link/);
  t.regex(reasons['dir.img'] ?? '', /directory/);
  t.regex(reasons['..hidden.img'] ?? '', /cannot become a diskID/);
  t.regex(reasons['disk_2.img'] ?? '', /already used by disk-2\.img/);
  t.like(
    found.ignored.find((i) => i.name === 'disk_2.img'),
    { collidesWith: 'disk-2' },
  );
});

/** Real file-system calls, counting every byte read from an opened marker. */
function counting(): { fs: MarkerFs; read: () => number } {
  let read = 0;
  return {
    read: () => read,
    fs: {
      lstat: fsp.lstat,
      open: async (path, flags) => {
        const fh = await fsp.open(path, flags);
        return {
          stat: () => fh.stat(),
          read: async (buffer, offset, length, position) => {
            const r = await fh.read(buffer, offset, length, position);
            read += r.bytesRead;
            return r;
          },
          close: () => fh.close(),
        };
      },
    },
  };
}

/** Fails instead of hanging when a marker operation blocks (on a FIFO nobody writes to). */
function withinDeadline<T>(p: Promise<T>, ms = 5000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`blocked for ${ms} ms`)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

test('a 300 MB marker is never read: it is reported by its size and put right by one rename', async (t) => {
  const d = await dir();
  const path = join(d, 'disk1.img.reserved');
  writeFileSync(path, '');
  truncateSync(path, 300 * 1024 * 1024); // sparse: costs no disk, only what a reader would load
  const c = counting();
  t.like(await markerState(d, 'disk1', c.fs), { kind: 'present', wrong: 'is 314572800 bytes, not the 9 of "reserved\\n"' });
  const replaced: string[] = [];
  t.true(await ensureMarker(d, 'disk1', { fs: c.fs, replaced: (w) => replaced.push(w) }));
  t.is(c.read(), 0, 'nothing read from a marker of the wrong size');
  t.deepEqual(replaced, ['is 314572800 bytes, not the 9 of "reserved\\n"']);
  t.is(readFileSync(path, 'utf8'), 'reserved\n');
  t.deepEqual(readdirSync(d), ['disk1.img.reserved'], 'no temp file left');
});

test('a marker of the right size is judged on at most MARKER_READ_LIMIT bytes', async (t) => {
  const d = await dir();
  writeFileSync(join(d, 'disk1.img.reserved'), 'RESERVED\n');
  const c = counting();
  t.like(await markerState(d, 'disk1', c.fs), { kind: 'present', wrong: 'does not hold "reserved\\n"' });
  t.true(c.read() <= MARKER_READ_LIMIT && MARKER_READ_LIMIT <= 16, `read ${c.read()} bytes`);
  t.true(await ensureMarker(d, 'disk1', { fs: c.fs }));
  t.deepEqual(await markerState(d, 'disk1'), { kind: 'present' });
});

test('a FIFO marker never blocks: it counts as the reservation, is put right, and removal removes it', async (t) => {
  const d = await dir();
  const path = join(d, 'disk1.img.reserved');
  execFileSync('mkfifo', [path]);
  t.like(await withinDeadline(markerState(d, 'disk1')), { kind: 'present', wrong: 'is a FIFO (named pipe), not a regular file' });
  t.true(await withinDeadline(ensureMarker(d, 'disk1')));
  t.true(lstatSync(path).isFile());
  t.is(readFileSync(path, 'utf8'), 'reserved\n');
  execFileSync('mkfifo', [join(d, 'disk2.img.reserved')]);
  t.true(await withinDeadline(removeMarker(d, 'disk2')));
  t.deepEqual(readdirSync(d), ['disk1.img.reserved']);
});

test('a FIFO swapped in between lstat and open is neither blocked on nor read', async (t) => {
  const d = await dir();
  const path = join(d, 'disk1.img.reserved');
  writeFileSync(path, 'reserved\n');
  const c = counting();
  const swapping: MarkerFs = {
    ...c.fs,
    lstat: async (p) => {
      const st = await fsp.lstat(p);
      unlinkSync(p);
      execFileSync('mkfifo', [p]);
      return st;
    },
  };
  t.like(await withinDeadline(markerState(d, 'disk1', swapping)), { kind: 'present', wrong: 'is a FIFO (named pipe), not a regular file' });
  t.is(c.read(), 0);
});

test('a socket marker is put right too', async (t) => {
  const d = await dir();
  const path = join(d, 'disk1.img.reserved');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(path, resolve));
  try {
    t.like(await withinDeadline(markerState(d, 'disk1')), { kind: 'present', wrong: 'is a socket, not a regular file' });
    t.true(await withinDeadline(ensureMarker(d, 'disk1')));
    t.is(readFileSync(path, 'utf8'), 'reserved\n');
  } finally {
    server.close();
  }
});

test('a marker that cannot be opened (EACCES) is still the reservation, and is put right', async (t) => {
  const d = await dir();
  const path = join(d, 'disk1.img.reserved');
  writeFileSync(path, 'reserved\n');
  // As the agent sees a marker of mode 000 when it does not run as root (tests run as either).
  const denied: MarkerFs = {
    lstat: fsp.lstat,
    open: () => Promise.reject(Object.assign(new Error(`EACCES: permission denied, open '${path}'`), { code: 'EACCES' })),
  };
  t.like(await markerState(d, 'disk1', denied), { kind: 'present', wrong: `cannot be read (EACCES: permission denied, open '${path}')` });
  t.true(await ensureMarker(d, 'disk1', { fs: denied }));
  t.is(readFileSync(path, 'utf8'), 'reserved\n');
  t.deepEqual(await markerState(d, 'disk1'), { kind: 'present' });
});
