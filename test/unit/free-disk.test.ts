import test from 'ava';
import { ANNOTATION_HEALTH_REVIEWED, AUTO_RESERVE_VALUE, CONDITION, CORDONED_VALUE, LABEL_AUTO_RESERVE, LABEL_CORDONED, REASON_NODE_GONE, REASON_NODE_REPLACED } from '../../api/constants.ts';
import { notFree, notFreeBecause } from '../../api/free-disk.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';

function disk(change: (nd: NodeDisk) => void): NodeDisk {
  const nd = newNodeDisk('node-a', 'disk1');
  nd.status = { node: { phase: 'Available', capacityBytes: 1024 } };
  change(nd);
  return nd;
}

const ready = (reason: string) => [{ type: CONDITION.ready, status: 'False' as const, reason, message: '', lastTransitionTime: '2026-01-02T03:04:05Z' }];
const FAILED = {
  status: 'False' as const,
  reason: 'FilesystemErrors',
  message: 'ext4 on the volume staged from it (loop3) has recorded 1 error since it was last checked',
  since: '2026-01-02T03:04:05Z',
};
const cases: [string, NodeDisk, NonNullable<ReturnType<typeof notFree>>['kind'] | undefined][] = [
  ['free', disk(() => {}), undefined],
  ['being deleted', disk((nd) => (nd.metadata.deletionTimestamp = '2026-01-02T03:04:05Z')), 'deleting'],
  ['reserved', disk((nd) => (nd.spec.desired = { state: 'Reserved', owner: 'claim:a/b' })), 'reserved'],
  ['labelled', disk((nd) => (nd.metadata.labels = { [LABEL_AUTO_RESERVE]: AUTO_RESERVE_VALUE })), 'labelled'],
  ['cordoned', disk((nd) => (nd.metadata.labels = { [LABEL_CORDONED]: CORDONED_VALUE })), 'cordoned'],
  ['failing', disk((nd) => (nd.status!.node!.health = FAILED)), 'failing'],
  [
    'failing, checked by a person before it failed',
    disk((nd) => ((nd.status!.node!.health = FAILED), (nd.metadata.annotations = { [ANNOTATION_HEALTH_REVIEWED]: '2026-01-02T03:04:04Z' }))),
    'failing',
  ],
  ['failing, checked by a person since', disk((nd) => ((nd.status!.node!.health = FAILED), (nd.metadata.annotations = { [ANNOTATION_HEALTH_REVIEWED]: '2026-01-02T03:05:00Z' }))), undefined],
  ['its node gone', disk((nd) => (nd.status!.conditions = ready(REASON_NODE_GONE))), 'node-gone'],
  ['its machine replaced', disk((nd) => (nd.status!.conditions = ready(REASON_NODE_REPLACED))), 'node-replaced'],
  ['not reported', disk((nd) => delete nd.status), 'unreported'],
  ['missing', disk((nd) => (nd.status!.node!.phase = 'Missing')), 'phase'],
  ['no size', disk((nd) => delete nd.status!.node!.capacityBytes), 'unsized'],
  ['empty', disk((nd) => (nd.status!.node!.capacityBytes = 0)), 'unsized'],
];

for (const [name, nd, kind] of cases) {
  test(`a disk that is not free is counted by the kind of the reason it is given: ${name}`, (t) => {
    t.is(notFree(nd)?.kind, kind);
    t.is(notFree(nd)?.why, notFreeBecause(nd));
  });
}
