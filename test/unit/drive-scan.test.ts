// The node's drives from sysfs and /dev/disk/by-id (agent/drive-scan.ts, agent/drive-select.ts), on trees
// laid out as the kernel lays them out for real drives. The layouts follow the kernel's sysfs ABI
// (Documentation/ABI/stable/sysfs-block: dev, size, ro, queue/*, holders/, partitions with a `partition`
// file; sysfs-class-nvme and the SCSI device's wwid, model, vendor) and where each bus puts its devices
// (/sys/block/<name> a link into /sys/devices/…: an NVMe namespace under its controller, a SATA disk under
// ataN/hostN/targetN, a SAS disk under port-/end_device-, a virtio disk under virtioN). The by-id names are
// those udev's 60-persistent-storage rules make (nvme-<model>_<serial>, nvme-eui.…, ata-<model>_<serial>,
// wwn-0x…, virtio-<serial>, -partN for partitions).
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import test from 'ava';
import { byIdLinks, type Drive, identityOf, scanDrives, transportOf, whyNotTaken } from '../../agent/drive-scan.ts';
import { parseDriveSelector, selectDrives } from '../../agent/drive-select.ts';

const GiB = 2 ** 30;

interface Dev {
  name: string;
  /** Under /sys/devices, the bus path of the device the block device hangs off. */
  parent: string;
  dev: string;
  bytes: number;
  rotational?: 0 | 1;
  /** Files of the block device itself (wwid of an NVMe namespace, serial of a virtio disk). */
  own?: Record<string, string>;
  /** Files of the parent device (the NVMe controller's or the SCSI device's model, serial, wwid). */
  device?: Record<string, string>;
  partitions?: { name: string; dev: string }[];
  holders?: string[];
  ro?: boolean;
  byId?: string[];
}

async function tree(devs: Dev[], extraLinks: Record<string, string> = {}): Promise<{ sysRoot: string; byIdDir: string; done: () => Promise<void> }> {
  const root = await mkdtemp(join(tmpdir(), 'nodedisks-sysfs-'));
  const sysRoot = join(root, 'sys');
  const byIdDir = join(root, 'dev', 'disk', 'by-id');
  await mkdir(join(sysRoot, 'block'), { recursive: true });
  await mkdir(byIdDir, { recursive: true });
  const file = async (path: string, content: string) => {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, `${content}\n`);
  };
  for (const d of devs) {
    const parent = join(sysRoot, 'devices', d.parent);
    const dir = join(parent, 'block', d.name);
    await file(join(dir, 'dev'), d.dev);
    await file(join(dir, 'size'), String(d.bytes / 512));
    await file(join(dir, 'ro'), d.ro ? '1' : '0');
    await file(join(dir, 'queue', 'rotational'), String(d.rotational ?? 0));
    await file(join(dir, 'queue', 'logical_block_size'), '512');
    await file(join(dir, 'queue', 'physical_block_size'), '4096');
    await mkdir(join(dir, 'holders'), { recursive: true });
    for (const h of d.holders ?? []) await mkdir(join(dir, 'holders', h));
    for (const [k, v] of Object.entries(d.own ?? {})) await file(join(dir, k), v);
    for (const [k, v] of Object.entries(d.device ?? {})) await file(join(parent, k), v);
    await symlink(relative(dir, parent), join(dir, 'device'));
    for (const p of d.partitions ?? []) {
      await file(join(dir, p.name, 'partition'), p.name.replace(/^\D+|^.*p/, ''));
      await file(join(dir, p.name, 'dev'), p.dev);
    }
    await symlink(relative(join(sysRoot, 'block'), dir), join(sysRoot, 'block', d.name));
    for (const id of d.byId ?? []) await symlink(`../../${d.name}`, join(byIdDir, id));
  }
  for (const [id, target] of Object.entries(extraLinks)) await symlink(`../../${target}`, join(byIdDir, id));
  return { sysRoot, byIdDir, done: () => rm(root, { recursive: true, force: true }) };
}

const NVME: Dev = {
  name: 'nvme0n1',
  parent: 'pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0',
  dev: '259:0',
  bytes: 1000 * GiB,
  own: { wwid: 'eui.0025385b71b07e2f' },
  device: { model: 'Samsung SSD 970 EVO Plus 1TB            ', serial: 'S4EWNX0R123456      ', transport: 'pcie' },
  byId: ['nvme-Samsung_SSD_970_EVO_Plus_1TB_S4EWNX0R123456', 'nvme-eui.0025385b71b07e2f'],
};
const SATA_SSD: Dev = {
  name: 'sda',
  parent: 'pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0',
  dev: '8:0',
  bytes: 500 * GiB,
  device: { model: 'Samsung SSD 860 ', vendor: 'ATA     ', wwid: 'naa.5002538e40a1b2c3' },
  byId: ['ata-Samsung_SSD_860_EVO_500GB_S3Z1NB0K123456', 'wwn-0x5002538e40a1b2c3'],
};
const HDD: Dev = {
  name: 'sdb',
  parent: 'pci0000:00/0000:00:17.0/ata4/host3/target3:0:0/3:0:0:0',
  dev: '8:16',
  bytes: 4000 * GiB,
  rotational: 1,
  device: { model: 'ST4000NM0035-1V4', vendor: 'ATA     ', wwid: 'naa.5000c500a1b2c3d4' },
  byId: ['ata-ST4000NM0035-1V4107_ZC1ABCDE', 'wwn-0x5000c500a1b2c3d4'],
};
const SAS: Dev = {
  name: 'sdc',
  parent: 'pci0000:00/0000:00:01.0/0000:01:00.0/host0/port-0:0/end_device-0:0/target0:0:0/0:0:0:0',
  dev: '8:32',
  bytes: 1800 * GiB,
  rotational: 1,
  device: { model: 'AL15SEB18EQ', vendor: 'TOSHIBA ', wwid: 'naa.50000398a8b9c0d1' },
  byId: ['scsi-350000398a8b9c0d1', 'wwn-0x50000398a8b9c0d1'],
};
const VIRTIO: Dev = {
  name: 'vdb',
  parent: 'pci0000:00/0000:00:05.0/virtio2',
  dev: '253:16',
  bytes: 20 * GiB,
  rotational: 1,
  own: { serial: 'vol-0abc123' },
  byId: ['virtio-vol-0abc123'],
};
const ROOT: Dev = {
  name: 'vda',
  parent: 'pci0000:00/0000:00:04.0/virtio1',
  dev: '253:0',
  bytes: 40 * GiB,
  rotational: 1,
  partitions: [
    { name: 'vda1', dev: '253:1' },
    { name: 'vda15', dev: '253:15' },
  ],
};
const ROOT_MOUNTS = [
  { major: 253, minor: 1, mountPoint: '/' },
  { major: 253, minor: 15, mountPoint: '/boot/efi' },
];

async function scan(devs: Dev[], mounts = ROOT_MOUNTS, extraLinks: Record<string, string> = {}): Promise<{ drives: Drive[]; links: Map<string, string[]> }> {
  const t = await tree(devs, extraLinks);
  try {
    return { drives: await scanDrives({ sysRoot: t.sysRoot, byIdDir: t.byIdDir, mounts }), links: await byIdLinks(t.byIdDir) };
  } finally {
    await t.done();
  }
}

const byName = (drives: Drive[], name: string) => drives.find((d) => d.kernelName === name)!;

test('NVMe, SATA SSD, HDD, SAS and virtio drives: identity, media, transport and the facts people select by', async (t) => {
  const { drives } = await scan([NVME, SATA_SSD, HDD, SAS, VIRTIO, ROOT]);
  t.like(byName(drives, 'nvme0n1'), {
    identity: 'eui-0025385b71b07e2f',
    model: 'Samsung SSD 970 EVO Plus 1TB',
    serial: 'S4EWNX0R123456',
    media: 'nvme',
    transport: 'nvme',
    sizeBytes: 1000 * GiB,
    logicalBlockSize: 512,
    physicalBlockSize: 4096,
    byId: ['nvme-Samsung_SSD_970_EVO_Plus_1TB_S4EWNX0R123456', 'nvme-eui.0025385b71b07e2f'],
    refusals: [],
  });
  t.like(byName(drives, 'sda'), { identity: 'wwn-5002538e40a1b2c3', media: 'ssd', transport: 'sata', refusals: [] });
  t.like(byName(drives, 'sdb'), { identity: 'wwn-5000c500a1b2c3d4', media: 'hdd', transport: 'sata', model: 'ST4000NM0035-1V4' });
  t.like(byName(drives, 'sdc'), { identity: 'wwn-50000398a8b9c0d1', media: 'hdd', transport: 'sas' });
  t.like(byName(drives, 'vdb'), { identity: 'serial-vol-0abc123', transport: 'virtio', refusals: [] });
});

test("the node's root disk, partitioned and mounted, is never taken, and says why", async (t) => {
  const { drives } = await scan([ROOT]);
  t.deepEqual(whyNotTaken(byName(drives, 'vda')), [
    'reports no identity (no WWN, EUI or serial): it could not be told from another drive after a reboot',
    "holds the node's root or boot filesystem",
    'has partitions (vda1, vda15)',
    'is mounted at /, /boot/efi',
  ]);
});

test('a drive mounted whole, held by device-mapper or md, or read-only is refused with the reason', async (t) => {
  const { drives } = await scan(
    [
      { ...SATA_SSD, holders: ['dm-0'] },
      { ...HDD, ro: true },
      { ...SAS, partitions: [] },
    ],
    [{ major: 8, minor: 32, mountPoint: '/var/lib/data' }],
  );
  t.deepEqual(byName(drives, 'sda').refusals, ['is held by dm-0 (device-mapper, md or another layer)']);
  t.deepEqual(byName(drives, 'sdb').refusals, ['is read-only']);
  t.deepEqual(whyNotTaken(byName(drives, 'sdc')), ['is mounted at /var/lib/data']);
  // Its holder mounting it (the CSI node side staging a reserved drive) is use, not a refusal.
  t.deepEqual(whyNotTaken(byName(drives, 'sdc'), true), []);
});

test('a model or serial with control characters reaches status and logs as printable text', async (t) => {
  const { drives } = await scan([{ ...SATA_SSD, device: { ...SATA_SSD.device, model: 'Evil\u001b[31mSSD\u0007' } }]);
  t.is(byName(drives, 'sda').model, 'Evil?[31mSSD?');
});

test('sdb becoming sdc after a reboot is the same drive: identity never comes from the kernel name', async (t) => {
  const before = await scan([HDD]);
  const after = await scan([{ ...HDD, name: 'sdc', dev: '8:32' }]);
  t.is(byName(after.drives, 'sdc').identity, byName(before.drives, 'sdb').identity);
});

test('two drives reporting one serial (a cheap bridge) are both refused, each naming the other: never merged', async (t) => {
  const usb = (name: string, dev: string): Dev => ({
    name,
    parent: `pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host${name === 'sdd' ? 6 : 7}/target6:0:0/6:0:0:0`,
    dev,
    bytes: 2000 * GiB,
    rotational: 1,
    device: { model: 'External HDD', serial: '0000000000000000' },
  });
  const { drives } = await scan([usb('sdd', '8:48'), usb('sde', '8:64')]);
  t.is(byName(drives, 'sdd').transport, 'usb');
  t.deepEqual(byName(drives, 'sdd').refusals, ['reports the same identity serial-external-hdd-0000000000000000 as sde: not merged, not taken']);
  t.deepEqual(byName(drives, 'sde').refusals, ['reports the same identity serial-external-hdd-0000000000000000 as sdd: not merged, not taken']);
});

test('loop, RAM, zram, device-mapper, md and optical devices are not drives, unless given a by-id name (a loop device standing for a drive)', async (t) => {
  const other = (name: string, dev: string, byId: string[] = []): Dev => ({ name, parent: 'virtual', dev, bytes: GiB, byId });
  const { drives } = await scan([
    other('loop0', '7:0'),
    other('loop1', '7:1', ['wwn-0x5000ABCD00000001', 'nodedisks-test-m02-drive1']),
    other('ram0', '1:0'),
    other('zram0', '252:0'),
    other('dm-0', '254:0'),
    other('md127', '9:127'),
    other('sr0', '11:0'),
    NVME,
  ]);
  t.deepEqual(
    drives.map((d) => [d.kernelName, d.identity]),
    [
      ['loop1', 'wwn-5000abcd00000001'],
      ['nvme0n1', 'eui-0025385b71b07e2f'],
    ],
  );
});

test('identity: WWN and EUI as the kernel reads them, then model and serial; hostile characters never reach a name', (t) => {
  t.is(identityOf('naa.5000C500A1B2C3D4', 'm', 's'), 'wwn-5000c500a1b2c3d4');
  t.is(identityOf('eui.0025385B71B07E2F', '', ''), 'eui-0025385b71b07e2f');
  t.is(identityOf('nvme.144d-5334455758-53616d73756e67-00000001', '', ''), 'nvme-144d-5334455758-53616d73756e67-00000001');
  t.is(identityOf(undefined, 'Disk\x1b[31m/../x', 'A B\nC'), 'serial-disk-31m-..-x-a-b-c');
  t.is(identityOf('t10.ATA     QEMU HARDDISK                           QM00005', '', ''), 'serial-ata-qemu-harddisk-qm00005');
  t.is(identityOf('', '', ''), undefined);
  t.is(identityOf('', '', '', ['nvme-Samsung_SSD_970_S4EW', 'nvme-eui.0025385B71B07E2F']), 'eui-0025385b71b07e2f', 'by-id names when the kernel gives nothing');
  t.is(identityOf('', '', '', ['ata-QEMU_HARDDISK_QM00005']), 'serial-qemu-harddisk-qm00005');
  t.is(identityOf('', '', '', ['nodedisks']), undefined);
  t.is(transportOf('sda', '/sys/devices/platform/weird/block/sda'), 'other');
});

test('selectors: by-id globs and attributes all must hold; a chosen drive keeps its refusals; a by-id name of a partition is told, not taken', async (t) => {
  const { drives, links } = await scan([NVME, SATA_SSD, HDD, { ...ROOT, byId: [] }], ROOT_MOUNTS, { 'wwn-0x5000c500a1b2c3d4-part1': 'sdb1', 'virtio-root-part1': 'vda1' });
  const pick = (...sels: string[]) =>
    selectDrives(
      drives,
      sels.map((s) => parseDriveSelector(s)),
      links,
    );
  t.deepEqual(
    pick('by-id=nvme-*').chosen.map((d) => d.kernelName),
    ['nvme0n1'],
  );
  t.deepEqual(
    pick('media=ssd').chosen.map((d) => d.kernelName),
    ['sda'],
  );
  t.deepEqual(
    pick('transport=sata,min-size=1Ti').chosen.map((d) => d.kernelName),
    ['sdb'],
  );
  t.deepEqual(
    pick('model=Samsung*', 'media=hdd,transport=sata').chosen.map((d) => d.kernelName),
    ['nvme0n1', 'sda', 'sdb'],
  );
  t.deepEqual(pick('by-id=nothing-*').chosen, []);
  const root = pick('max-size=50Gi');
  t.deepEqual(
    root.chosen.map((d) => [d.kernelName, d.refusals.length > 0]),
    [['vda', true]],
  );
  t.deepEqual(pick('by-id=wwn-*').notDrives, [
    'by-id name wwn-0x5000c500a1b2c3d4-part1 (--drive by-id=wwn-*) points at sdb1, which is not a whole drive (a partition, or a device that is never one): not taken',
  ]);
});

test('a selector that cannot be understood is an error naming the term and what it takes', (t) => {
  t.throws(() => parseDriveSelector(''), { message: /--drive is empty/ });
  t.throws(() => parseDriveSelector('by-id=/dev/disk/by-id/nvme-x'), { message: /by-id takes a name in \/dev\/disk\/by-id/ });
  t.throws(() => parseDriveSelector('media=tape'), { message: /media is one of nvme, ssd, hdd, not "tape"/ });
  t.throws(() => parseDriveSelector('min-size=big'), { message: /min-size takes a quantity such as 100Gi/ });
  t.throws(() => parseDriveSelector('colour=red'), { message: /unknown term "colour"/ });
  t.throws(() => parseDriveSelector('model'), { message: /has no value/ });
  t.throws(() => parseDriveSelector('model=a\x1b[2Jb'), { message: /control character/ });
});

test('a filesystem mounted where the agent cannot see (the host, another container) refuses the drive: sysfs lists it for the whole kernel', async (t) => {
  const tr = await tree([HDD, SATA_SSD]);
  try {
    await mkdir(join(tr.sysRoot, 'fs', 'xfs', 'sdb'), { recursive: true });
    await mkdir(join(tr.sysRoot, 'fs', 'ext4', 'features'), { recursive: true });
    const drives = await scanDrives({ sysRoot: tr.sysRoot, byIdDir: tr.byIdDir, mounts: [] });
    t.deepEqual(whyNotTaken(byName(drives, 'sdb')), ["is mounted at a place this node's agent cannot see (sdb has a mounted xfs filesystem)"]);
    t.deepEqual(whyNotTaken(byName(drives, 'sda')), []);
  } finally {
    await tr.done();
  }
});
