import test from 'ava';
import { AUTO_RESERVE_VALUE, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import { notFreeBecause, notFreeKind } from '../../api/free-disk.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';

function disk(change: (nd: NodeDisk) => void): NodeDisk {
  const nd = newNodeDisk('node-a', 'disk1');
  nd.status = { node: { phase: 'Available', capacityBytes: 1024 } };
  change(nd);
  return nd;
}

const cases: [string, NodeDisk, ReturnType<typeof notFreeKind>][] = [
  ['free', disk(() => {}), undefined],
  ['being deleted', disk((nd) => (nd.metadata.deletionTimestamp = '2026-01-02T03:04:05Z')), 'deleting'],
  ['reserved', disk((nd) => (nd.spec.desired = { state: 'Reserved', owner: 'claim:a/b' })), 'reserved'],
  ['labelled', disk((nd) => (nd.metadata.labels = { [LABEL_AUTO_RESERVE]: AUTO_RESERVE_VALUE })), 'labelled'],
  ['not reported', disk((nd) => delete nd.status), 'unreported'],
  ['missing', disk((nd) => (nd.status!.node!.phase = 'Missing')), 'phase'],
  ['no size', disk((nd) => delete nd.status!.node!.capacityBytes), 'unsized'],
  ['empty', disk((nd) => (nd.status!.node!.capacityBytes = 0)), 'unsized'],
];

for (const [name, nd, kind] of cases) {
  test(`notFreeKind names the reason notFreeBecause gives, and only when it gives one: ${name}`, (t) => {
    t.is(notFreeKind(nd), kind);
    t.is(notFreeKind(nd) === undefined, notFreeBecause(nd) === undefined);
  });
}
