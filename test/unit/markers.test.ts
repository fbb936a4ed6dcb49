import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { discover } from '../../agent/discover.ts';
import { ensureMarker, markerState, removeMarker } from '../../agent/markers.ts';

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
});
