import test from 'ava';
import { controllerStatus, readyCondition, sameControllerStatus } from '../../controller/conditions.ts';
import { decide } from '../../controller/policy.ts';
import type { NodeDisk, NodeStatus } from '../../api/v1alpha1/types.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';

const NOW = Date.parse('2026-01-01T00:10:00Z');
const STALE = 15 * 60_000;

function withNode(node: NodeStatus | undefined, desired: 'Available' | 'Reserved' = 'Available'): NodeDisk {
  const nd = newNodeDisk('node-a', 'disk1');
  nd.metadata.generation = 3;
  nd.spec.desired = desired === 'Reserved' ? { state: 'Reserved', owner: 'alice' } : { state: 'Available' };
  if (node) nd.status = { node };
  return nd;
}
const fresh = '2026-01-01T00:09:00Z';

test('Ready reasons cover matching, progressing, missing, error, not reported and stale', (t) => {
  t.like(readyCondition(withNode({ phase: 'Available', lastSeenTime: fresh }), NOW, STALE), { status: 'True', reason: 'PhaseMatchesDesired' });
  t.like(readyCondition(withNode({ phase: 'Available', lastSeenTime: fresh }, 'Reserved'), NOW, STALE), { status: 'False', reason: 'Progressing' });
  t.like(readyCondition(withNode({ phase: 'Missing', lastSeenTime: fresh, message: 'gone' }), NOW, STALE), { status: 'False', reason: 'DiskMissing', message: 'gone' });
  t.like(readyCondition(withNode({ phase: 'Error', lastSeenTime: fresh, message: 'EACCES' }), NOW, STALE), { status: 'False', reason: 'AgentError', message: 'EACCES' });
  t.like(readyCondition(withNode(undefined), NOW, STALE), { status: 'Unknown', reason: 'WaitingForAgent' });
  const stale = readyCondition(withNode({ phase: 'Available', lastSeenTime: '2025-12-31T23:00:00Z' }), NOW, STALE);
  t.like(stale, { status: 'Unknown', reason: 'AgentStale' });
  t.regex(stale.message, /last reported at 2025-12-31T23:00:00Z/);
});

test('a fresh report asks to be looked at again when it would turn stale', (t) => {
  const v = readyCondition(withNode({ phase: 'Available', lastSeenTime: fresh }), NOW, STALE);
  t.is(v.recheckAt, Date.parse(fresh) + STALE + 1000);
});

test('lastTransitionTime moves only when a condition status changes', (t) => {
  const nd = withNode({ phase: 'Available', lastSeenTime: fresh }, 'Reserved');
  const first = controllerStatus(nd, decide(nd), readyCondition(nd, NOW, STALE), new Date(NOW));
  const ready1 = first.conditions?.find((c) => c.type === 'Ready');
  t.is(ready1?.status, 'False');
  t.is(ready1?.lastTransitionTime, '2026-01-01T00:10:00Z');
  t.is(first.observedGeneration, 3);

  // Same status, new message: the time stays.
  nd.status = { ...nd.status, ...first };
  nd.status.node = { phase: 'Error', lastSeenTime: fresh, message: 'boom' };
  const later = new Date(NOW + 60_000);
  const second = controllerStatus(nd, decide(nd), readyCondition(nd, later.getTime(), STALE), later);
  const ready2 = second.conditions?.find((c) => c.type === 'Ready');
  t.is(ready2?.reason, 'AgentError');
  t.is(ready2?.lastTransitionTime, '2026-01-01T00:10:00Z');

  // Status flips to True: the time moves.
  nd.status = { ...second, node: { phase: 'Reserved', lastSeenTime: '2026-01-01T00:11:00Z' } };
  const third = controllerStatus(nd, decide(nd), readyCondition(nd, later.getTime(), STALE), later);
  t.is(third.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime, '2026-01-01T00:11:00Z');
  t.true(sameControllerStatus(third, third));
  t.false(sameControllerStatus(second, third));
  // A status in the old shape (conditions under status.controller) is not the same: it gets rewritten.
  t.false(sameControllerStatus({ controller: { ...third.controller, conditions: third.conditions } as typeof third.controller }, third));
});

test('a conflicting label makes Accepted False with the policy reason', (t) => {
  const nd = withNode({ phase: 'Reserved', lastSeenTime: fresh }, 'Reserved');
  nd.metadata.labels = { 'localtest.example.com/auto-reserve': 'true' };
  const s = controllerStatus(nd, decide(nd), readyCondition(nd, NOW, STALE), new Date(NOW));
  t.false(s.controller.accepted);
  t.like(
    s.conditions?.find((c) => c.type === 'Accepted'),
    { status: 'False', reason: 'ReservedByOther' },
  );
});

test('with a heartbeat Lease, the Lease decides staleness, not the age of the report (ADR 24)', (t) => {
  const old = withNode({ phase: 'Available', lastSeenTime: '2025-12-01T00:00:00Z' });
  const alive = readyCondition(old, NOW, STALE, { kind: 'alive' });
  t.like(alive, { status: 'True', reason: 'PhaseMatchesDesired' });
  t.is(alive.recheckAt, undefined, "nothing to recheck: the Lease's expiry brings the next look");
  const stale = readyCondition(withNode({ phase: 'Reserved', lastSeenTime: fresh }, 'Reserved'), NOW, STALE, {
    kind: 'stale',
    lease: 'node-disks-system/node-disks-agent-node-a',
    renewTime: '2026-01-01T00:08:00.000000Z',
    durationSeconds: 240,
  });
  t.like(stale, { status: 'Unknown', reason: 'AgentStale' });
  t.is(
    stale.message,
    'the node agent on node-a has not renewed its heartbeat (Lease node-disks-system/node-disks-agent-node-a, last renewed 2026-01-01T00:08:00.000000Z, lasts 240 s); its phase Reserved may be out of date',
  );
  t.like(readyCondition(old, NOW, STALE, { kind: 'none' }), { status: 'Unknown', reason: 'AgentStale' }, "no Lease: the report's age, as before");
});
