// `kubectl nodedisks status NAME` says who holds a disk in words (plugin/cmd/status.ts): a disk the CSI
// driver reserved for a PersistentVolume (owner pv:<PV name>, the PVC's UID) is named as the volume's, not
// taken for a manual reservation of a person called "pv:…".
import test from 'ava';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { describe } from '../../plugin/cmd/status.ts';

const disk = (desired: NodeDisk['spec']['desired']): NodeDisk => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDisk',
  metadata: { name: 'node-disk-node-a-disk1', generation: 1 },
  spec: { nodeName: 'node-a', diskID: 'disk1', path: '/var/lib/node-disks-manager/disks/disk1.img', ...(desired ? { desired } : {}) },
  status: { node: { phase: 'Reserved', capacityBytes: 67108864, lastSeenTime: '2026-01-01T00:00:00Z' } },
});
const desiredLine = (nd: NodeDisk) =>
  describe(nd, Date.parse('2026-01-01T00:01:00Z'))
    .split('\n')
    .find((l) => l.startsWith('  Desired:'));

test("a PersistentVolume's disk is the volume's, with its PVC's UID; another owner is still a manual reservation", (t) => {
  const uid = '0b6f7a52-6a0e-4c43-9d41-58a8e8b0f0aa';
  t.is(
    desiredLine(disk({ state: 'Reserved', owner: `pv:pvc-${uid}`, ownerUID: uid })),
    `  Desired:  Reserved: reserved for PersistentVolume pvc-${uid} (PVC UID ${uid}) by the CSI driver: released, wiped first, when the volume is deleted`,
  );
  t.is(
    desiredLine(disk({ state: 'Reserved', owner: 'pv:pvc-x' })),
    '  Desired:  Reserved: reserved for PersistentVolume pvc-x by the CSI driver: released, wiped first, when the volume is deleted',
  );
  t.is(desiredLine(disk({ state: 'Reserved', owner: 'alice' })), '  Desired:  Reserved: reserved by alice (manual)');
  t.is(desiredLine(disk({ state: 'Reserved', owner: 'pvx' })), '  Desired:  Reserved: reserved by pvx (manual)');
});

test("a drive's status says what it is, how it is attached and its kernel name now", (t) => {
  const nd = disk(undefined);
  nd.spec.diskID = 'drive-eui-0025385b71b07e2f';
  nd.spec.path = '/dev/disk/by-id/nvme-eui.0025385b71b07e2f';
  nd.status!.node!.drive = {
    device: 'nvme0n1',
    model: 'Samsung SSD 970 EVO Plus 1TB',
    serial: 'S4EWNX0R123456',
    media: 'nvme',
    transport: 'nvme',
    logicalBlockSize: 512,
    physicalBlockSize: 4096,
  };
  const line = describe(nd, Date.parse('2026-01-01T00:01:00Z'))
    .split('\n')
    .find((l) => l.startsWith('  Drive:'));
  t.is(line, '  Drive:    nvme over nvme: Samsung SSD 970 EVO Plus 1TB (serial S4EWNX0R123456), nvme0n1 now, blocks of 512 B (4096 B physical)');
  t.false(describe(disk(undefined), 0).includes('Drive:'), 'an image has no drive line');
});
