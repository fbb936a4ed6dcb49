// The files the agent and the node side hand each other to wipe a drive (api/drive-wipe.ts,
// lib/runtime/atomic-file.ts): a request that is not exactly one is never acted on, and nothing is read
// through a link, from a FIFO, or past a few KiB.
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { formatWipeAnswer, formatWipeProgress, formatWipeRequest, parseWipeAnswer, parseWipeProgress, parseWipeRequest } from '../../api/drive-wipe.ts';
import { readSmallFile, writeFileAtomic } from '../../lib/runtime/atomic-file.ts';

test('a wipe request reads back as written; anything else is named, never guessed', (t) => {
  const r = { token: '3f1e0c2a-drive-wipe', byIdName: 'nvme-eui.0025385b71b07e2f', device: '259:0' };
  t.deepEqual(parseWipeRequest(formatWipeRequest(r)), r);
  t.is(parseWipeRequest('{"token":'), 'not JSON');
  t.is(parseWipeRequest(JSON.stringify({ ...r, token: '$(reboot)' })), 'no valid token');
  for (const byIdName of ['../../sda', 'sub/sda', '', '.hidden', 'a\nb']) t.is(parseWipeRequest(JSON.stringify({ ...r, byIdName })), 'no valid by-id name', byIdName);
  t.is(parseWipeRequest(JSON.stringify({ ...r, device: '8' })), 'no valid device number');
});

test('a wipe answer reads back as written; its message reaches status as printable text', (t) => {
  const done = { token: 't1', ok: true as const, bytes: 1024, ms: 3, method: 'BLKZEROOUT (blkdiscard --zeroout)' };
  t.deepEqual(parseWipeAnswer(formatWipeAnswer(done)), done);
  t.deepEqual(parseWipeAnswer(formatWipeAnswer({ token: 't1', ok: false, message: 'busy\u001b[2J' })), { token: 't1', ok: false, message: 'busy?[2J' });
  t.is(parseWipeAnswer('{"token":"t1","ok":true}'), undefined);
  t.is(parseWipeAnswer(''), undefined);
});

test("a wipe's progress reads back as written; one that could make a resume skip bytes is no progress at all", (t) => {
  const p = { token: 't1', device: '259:0', doneBytes: 2 ** 30, totalBytes: 4 * 2 ** 30 };
  t.deepEqual(parseWipeProgress(formatWipeProgress(p)), p);
  for (const bad of [
    { ...p, doneBytes: 5 * 2 ** 30 },
    { ...p, doneBytes: -1 },
    { ...p, doneBytes: 1.5 },
    { ...p, doneBytes: '1073741824' },
    { ...p, totalBytes: 0 },
    { ...p, device: '259' },
    { ...p, token: '../x' },
  ])
    t.is(parseWipeProgress(JSON.stringify(bad)), undefined, JSON.stringify(bad));
  t.is(parseWipeProgress('{"token":'), undefined);
});

test('small files: written whole, read only when a regular file of a few KiB, never through a link or from a FIFO', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'nodedisks-atomic-'));
  try {
    await writeFileAtomic(dir, 'a.wipe', 'hello\n');
    t.is(await readSmallFile(join(dir, 'a.wipe')), 'hello\n');
    t.is(await readSmallFile(join(dir, 'absent')), undefined);
    await symlink('/etc/hostname', join(dir, 'link.wipe'));
    await t.throwsAsync(readSmallFile(join(dir, 'link.wipe')), { message: /is a symbolic link, not a file: not read/ });
    execFileSync('mkfifo', [join(dir, 'fifo.wipe')]);
    await t.throwsAsync(readSmallFile(join(dir, 'fifo.wipe')), { message: /is not a regular file: not read/ });
    await writeFile(join(dir, 'big.wipe'), Buffer.alloc(8192));
    await t.throwsAsync(readSmallFile(join(dir, 'big.wipe')), { message: /8192 bytes, more than the 4096/ });
    // A link where the file goes is replaced, not written through.
    await symlink(join(dir, 'victim'), join(dir, 'b.wipe'));
    await writeFileAtomic(dir, 'b.wipe', 'x');
    t.is(await readSmallFile(join(dir, 'b.wipe')), 'x');
    await t.throwsAsync(
      readSmallFile(join(dir, 'victim')).then((v) => (v === undefined ? Promise.reject(new Error('absent')) : v)),
      { message: 'absent' },
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
