import test from 'ava';
import { diskIdFromFileName, diskIdProblem, diskPath, labelValue, nodeDiskName, nodeNameProblem, normalizeNamePart, DNS_SUBDOMAIN_PATTERN } from '../../api/names.ts';

const dns = new RegExp(DNS_SUBDOMAIN_PATTERN);

test('names match the seed for ordinary nodes and disks', (t) => {
  t.is(nodeDiskName('node-disks-dev-m02', 'disk1'), 'node-disk-node-disks-dev-m02-disk1');
  t.is(nodeDiskName('ip-10-0-0-1.ec2.internal', 'Data_Disk.2'), 'node-disk-ip-10-0-0-1-ec2-internal-data-disk-2');
});

test('normalization lowercases, maps other characters to dashes, collapses and trims them', (t) => {
  t.is(normalizeNamePart('__A..b--C__'), 'a-b-c');
  t.is(normalizeNamePart('___'), 'unknown');
});

test('names longer than 253 characters stay valid and distinct', (t) => {
  const node = `n${'x'.repeat(240)}`;
  const a = nodeDiskName(node, `disk-${'a'.repeat(100)}-1`);
  const b = nodeDiskName(node, `disk-${'a'.repeat(100)}-2`);
  t.true(a.length <= 253, `length ${a.length}`);
  t.true(b.length <= 253);
  t.not(a, b, 'the seed truncated both to the same name');
  t.regex(a, dns);
  t.regex(b, dns);
  t.is(nodeDiskName(node, `disk-${'a'.repeat(100)}-1`), a, 'stable across calls');
});

test('a truncated name never ends in a dash before its hash', (t) => {
  // Place a dash exactly where the cut falls.
  for (let i = 0; i < 20; i++) {
    const name = nodeDiskName(`${'a'.repeat(230 + i)}-b`, 'disk-1-2-3-4-5-6-7-8-9');
    t.regex(name, dns);
    t.false(name.includes('--'));
  }
});

test('label values are kept verbatim when valid and hashed when too long', (t) => {
  t.is(labelValue('node-disks-dev-m02'), 'node-disks-dev-m02');
  t.is(labelValue('Disk_1.a'), 'Disk_1.a');
  const long = `${'n'.repeat(100)}.example.com`;
  const v = labelValue(long);
  t.true(v.length <= 63);
  t.regex(v, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
  t.not(labelValue(`${long}x`), v);
});

test('diskID rules reject paths, dot-dot and odd characters with a reason', (t) => {
  t.is(diskIdProblem('disk1'), undefined);
  t.is(diskIdProblem('Disk_1.a-b'), undefined);
  t.regex(diskIdProblem('../etc/passwd') ?? '', /contains '\/'/);
  t.regex(diskIdProblem('a..b') ?? '', /contains '\.\.'/);
  t.regex(diskIdProblem('.hidden') ?? '', /must start with a letter or digit/);
  t.regex(diskIdProblem('sp ace') ?? '', /only letters, digits/);
  t.regex(diskIdProblem('x'.repeat(129)) ?? '', /longer than 128/);
  t.is(diskIdProblem(''), 'diskID is empty');
});

test('node name rule is the DNS subdomain rule', (t) => {
  t.is(nodeNameProblem('node-disks-dev-m02'), undefined);
  t.regex(nodeNameProblem('Node_A') ?? '', /not a DNS subdomain/);
  t.regex(nodeNameProblem('') ?? '', /empty/);
});

test('disk image file names map to diskIDs and back to host paths', (t) => {
  t.is(diskIdFromFileName('disk1.img'), 'disk1');
  t.is(diskIdFromFileName('disk1.img.reserved'), undefined);
  t.is(diskIdFromFileName('.img'), undefined);
  t.is(diskPath('/var/lib/node-disks-manager/disks', 'disk1'), '/var/lib/node-disks-manager/disks/disk1.img');
});
