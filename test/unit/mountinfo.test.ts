// lib/runtime/mountinfo.ts and csi/loop.ts, the parts that read what the kernel says: mountinfo lines (optional
// fields, octal escapes in paths), device numbers, and losetup's JSON list (a removed backing file, paths
// that only start alike).
import { readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, realpath, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { devicesOfImage, parseLosetupList } from '../../csi/loop.ts';
import { splitDeviceNumber } from '../../api/staged-record.ts';
import { canonicalPath, isReadOnly, mountsAt, parseMountInfo, topMountAt, unescapeMountField } from '../../lib/runtime/mountinfo.ts';

const SAMPLE = [
  '22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro',
  '45 22 7:0 / /var/lib/kubelet/plugins/kubernetes.io/csi/x/globalmount rw,relatime shared:30 master:2 - ext4 /dev/loop0 rw',
  '46 22 7:0 / /var/lib/kubelet/pods/a\\040b/volumes/kubernetes.io~csi/pvc-1/mount ro,relatime - ext4 /dev/loop0 rw',
  '47 22 0:6 /loop3 /tmp/with\\011tab\\012newline\\134backslash rw,nosuid - devtmpfs udev rw,size=1k,mode=755',
  '48 22 7:0 / /var/lib/kubelet/plugins/kubernetes.io/csi/x/globalmount rw - ext4 /dev/loop0 rw',
  'garbage line',
  '49 22 notdev / /x rw - ext4 /dev/loop0 rw',
  '50 22 7:1 / /y rw shared:1',
  '',
].join('\n');

test('mountinfo lines are parsed with any number of optional fields, and malformed lines are skipped', (t) => {
  const m = parseMountInfo(SAMPLE);
  t.deepEqual(
    m.map((e) => e.id),
    [22, 45, 46, 47, 48],
  );
  t.deepEqual(m[1], {
    id: 45,
    parentId: 22,
    major: 7,
    minor: 0,
    root: '/',
    mountPoint: '/var/lib/kubelet/plugins/kubernetes.io/csi/x/globalmount',
    options: ['rw', 'relatime'],
    fsType: 'ext4',
    source: '/dev/loop0',
    superOptions: ['rw'],
  });
  t.is(m[0]!.source, '/dev/vda1');
  t.deepEqual(m[0]!.superOptions, ['rw', 'errors=remount-ro']);
});

test("mountinfo's octal escapes (space, tab, newline, backslash) are undone in paths", (t) => {
  const m = parseMountInfo(SAMPLE);
  t.is(m[2]!.mountPoint, '/var/lib/kubelet/pods/a b/volumes/kubernetes.io~csi/pvc-1/mount');
  t.is(m[3]!.mountPoint, '/tmp/with\ttab\nnewline\\backslash');
  t.is(m[3]!.root, '/loop3');
  t.is(unescapeMountField('\\134040'), '\\040', 'an escaped backslash followed by digits is one backslash, not a second escape');
  t.is(unescapeMountField('no escapes'), 'no escapes');
});

test('the mounts at a path are listed bottom first; the top one is what the path shows; ro is read from the per-mount options', (t) => {
  const m = parseMountInfo(SAMPLE);
  const at = mountsAt(m, '/var/lib/kubelet/plugins/kubernetes.io/csi/x/globalmount');
  t.deepEqual(
    at.map((e) => e.id),
    [45, 48],
  );
  t.is(topMountAt(m, '/var/lib/kubelet/plugins/kubernetes.io/csi/x/globalmount')?.id, 48);
  t.is(topMountAt(m, '/var/lib/kubelet/plugins/kubernetes.io/csi/x'), undefined, 'a parent of a mount point is not one');
  t.true(isReadOnly(m[2]!));
  t.false(isReadOnly(m[1]!));
});

test("this process's own mountinfo parses whole: one entry per line, and / is among them", (t) => {
  const text = readFileSync('/proc/self/mountinfo', 'utf8');
  const lines = text.split('\n').filter(Boolean);
  const m = parseMountInfo(text);
  t.is(m.length, lines.length);
  t.true(m.some((e) => e.mountPoint === '/'));
});

test('device numbers are split as glibc does, small and large alike', (t) => {
  // glibc's makedev, written out independently of the code under test.
  const makedev = (major: bigint, minor: bigint) => ((major & 0xfffn) << 8n) | ((major & ~0xfffn) << 32n) | (minor & 0xffn) | ((minor & ~0xffn) << 12n);
  t.deepEqual(splitDeviceNumber(makedev(7n, 0n)), { major: 7, minor: 0 });
  t.deepEqual(splitDeviceNumber(makedev(259n, 3n)), { major: 259, minor: 3 });
  t.deepEqual(splitDeviceNumber(makedev(0x1234n, 0x12345n)), { major: 0x1234, minor: 0x12345 });
  t.deepEqual(splitDeviceNumber(statSync('/dev/null', { bigint: true }).rdev), { major: 1, minor: 3 }, '/dev/null is 1:3 on Linux');
});

test('a canonical path resolves links in its directories but never its last component', async (t) => {
  const d = await realpath(await mkdtemp(join(tmpdir(), 'nodedisks-canonical-')));
  t.teardown(() => rm(d, { recursive: true, force: true }));
  await mkdir(join(d, 'real'));
  await symlink(join(d, 'real'), join(d, 'link'));
  t.is(await canonicalPath(join(d, 'link', 'target')), join(d, 'real', 'target'));
  t.is(await canonicalPath(join(d, 'link')), join(d, 'link'), 'the last component, a link, is kept as it is');
  t.is(await canonicalPath(join(d, 'missing', 'deeper', 'x')), join(d, 'missing', 'deeper', 'x'));
  t.is(await canonicalPath('/'), '/');
});

const LOSETUP = `{
   "loopdevices": [
      {"name": "/dev/loop0", "back-file": "/disks/disk1.img", "back-ino": 12, "back-maj:min": "     254:0  ", "autoclear": false},
      {"name": "/dev/loop1", "back-file": "/disks/disk1.img.old", "back-ino": 13, "back-maj:min": "254:0", "autoclear": false},
      {"name": "/dev/loop2", "back-file": "/disks/disk1.img (deleted)", "back-ino": 11, "back-maj:min": "254:0", "autoclear": true},
      {"name": "/dev/loop3", "back-file": "/disks/sp ace/a\\"b.img", "back-ino": 18446744073709551557, "back-maj:min": "0:42", "autoclear": false},
      {"name": "/dev/loop4", "back-file": null, "autoclear": false},
      {"name": "/dev/loop5", "back-file": "/disk1.img", "back-ino": 12, "back-maj:min": "254:0", "autoclear": true},
      {"name": "/dev/loop6", "back-file": "/disks/disk1.img", "back-ino": 12, "back-maj:min": "254:1", "autoclear": false}
   ]
}`;

test("losetup's JSON list is parsed: the backing file's path, whether it was removed, its inode (exact, even past 2^53) and device", (t) => {
  const list = parseLosetupList(LOSETUP);
  t.deepEqual(
    list.map((d) => d.device),
    ['/dev/loop0', '/dev/loop1', '/dev/loop2', '/dev/loop3', '/dev/loop5', '/dev/loop6'],
    'a device with no backing file is not listed',
  );
  t.deepEqual(list[0], { device: '/dev/loop0', backingFile: '/disks/disk1.img', deleted: false, autoclear: false, backing: { ino: 12n, major: 254, minor: 0 } });
  t.deepEqual(list[2], { device: '/dev/loop2', backingFile: '/disks/disk1.img', deleted: true, autoclear: true, backing: { ino: 11n, major: 254, minor: 0 } });
  t.is(list[3]!.backingFile, '/disks/sp ace/a"b.img');
  t.is(list[3]!.backing?.ino, 18446744073709551557n);
});

test('an image is served by the devices over its very file (inode and device), whatever path the kernel names it by, and never by its path alone', (t) => {
  const list = parseLosetupList(LOSETUP);
  const image = { path: '/disks/disk1.img', identity: { ino: 12n, major: 254, minor: 0 } };
  // loop5 was attached by a program whose mount namespace is gone: the kernel names the file from the
  // detached mount's root. loop2 has the path of an earlier file (removed), loop6 the path and inode on
  // another filesystem (another node's, on a shared kernel): neither is this image's.
  t.deepEqual(
    devicesOfImage(list, image).map((d) => d.device),
    ['/dev/loop0', '/dev/loop5'],
  );
  t.deepEqual(devicesOfImage(list, { path: '/disks/disk1.img', identity: undefined }), [], 'a missing image is served by nothing, whatever has its path');
});

test('losetup with no loop device at all prints nothing or an empty list: no device', (t) => {
  t.deepEqual(parseLosetupList(''), []);
  t.deepEqual(parseLosetupList('{\n   "loopdevices": [\n\n   ]\n}\n'), []);
  t.throws(() => parseLosetupList('not json'));
});
