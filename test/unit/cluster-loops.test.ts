// Which loop devices the local cluster's teardown detaches (hack/cluster/loops.ts): those backed by a
// file of a node dir, told by the file's device and inode (the path the kernel reports is the attaching
// namespace's, e.g. /disks/a.img once that namespace is gone) or by a reported path in a node dir;
// never another's. The input is `losetup -J -l -O NAME,BACK-FILE,BACK-INO,BACK-MAJ:MIN` as util-linux
// 2.38 prints it (padded maj:min).
import test from 'ava';
import { fileKey, majorMinor, ourLoops, parseLosetup } from '../../hack/cluster/loops.ts';

const LOSETUP = `{
   "loopdevices": [
      {"name": "/dev/loop0", "back-file": "/disks/a.img", "back-ino": 9978674, "back-maj:min": "     254:0  "},
      {"name": "/dev/loop1", "back-file": "/var/lib/node-disks-manager/disks/b.img", "back-ino": 9978675, "back-maj:min": "   254:0"},
      {"name": "/dev/loop2", "back-file": "/srv/data/c.img", "back-ino": 4242, "back-maj:min": "   254:0"},
      {"name": "/dev/loop3", "back-file": "/work/.nodedisks-cluster/nodes/m03/node-disks-manager/disks/d.img (deleted)", "back-ino": 77, "back-maj:min": "   8:1"},
      {"name": "/dev/loop4", "back-file": "/work/.nodedisks-cluster/nodes-old/e.img", "back-ino": 78, "back-maj:min": "   8:1"},
      {"name": "/dev/loop5", "back-file": "/disks/f.img", "back-ino": 9978674, "back-maj:min": "   8:1"}
   ]
}`;

test('parses losetup -J: names, backing paths, inodes, and the padded maj:min trimmed', (t) => {
  const devices = parseLosetup(LOSETUP);
  t.is(devices.length, 6);
  t.deepEqual(devices[0], { name: '/dev/loop0', backFile: '/disks/a.img', backIno: 9978674, backDev: '254:0' });
  t.deepEqual(parseLosetup(''), []);
  t.deepEqual(parseLosetup('{"loopdevices": []}'), []);
});

test('ours: a device backed by a node-dir file (same device and inode, whatever path it reports) or by a path in a node dir; never the same inode on another device, a sibling dir, or another path', (t) => {
  const files = new Set([fileKey('254:0', 9978674), fileKey('254:0', 9978675)]);
  const ours = ourLoops(parseLosetup(LOSETUP), { dirs: ['/work/.nodedisks-cluster/nodes/'], files });
  t.deepEqual(
    ours.map((d) => d.name),
    ['/dev/loop0', '/dev/loop1', '/dev/loop3'],
  );
});

test('nothing is ours without node dirs or files', (t) => {
  t.deepEqual(ourLoops(parseLosetup(LOSETUP), { dirs: [], files: new Set() }), []);
});

test('a dev_t is split as the kernel encodes it (major in bits 8-19 and 32-43, minor in bits 0-7 and 20-31)', (t) => {
  t.is(majorMinor(65024n), '254:0');
  t.is(majorMinor(2049n), '8:1');
  // major 259, minor 1048575 (the large numbers of NVMe namespaces and device-mapper).
  t.is(majorMinor((259n << 8n) | 0xffn | (0xfffn << 20n)), '259:1048575');
});
