import test from 'ava';
import { CLAIM_OWNER_PREFIX, CORDONED_VALUE, LABEL_AUTO_RESERVE, LABEL_CORDONED } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { disksFitLine, misfitCountsOf, tenantPendingLine } from '../../api/claim-fit.ts';
import { type Misfit, misfit } from '../../api/claim-fit.ts';
import { matchesSelector } from '../../api/label-selector.ts';
import { boundStatus, lostStatus, pendingStatus, sameClaimStatus } from '../../controller/claim-phase.ts';
import { parseLimit } from '../../controller/namespace-limits.ts';
import { newClaim, newNodeDisk } from '../../hack/lib/nodedisks.ts';

const now = Date.parse('2026-01-02T03:04:05Z');
const ctx = { now, staleAfterMs: 60_000 };

function disk(node: string, id: string, o: { bytes?: number; owner?: string; seen?: number; labels?: Record<string, string> } = {}): NodeDisk {
  const nd = newNodeDisk(node, id);
  nd.metadata.labels = { ...nd.metadata.labels, ...o.labels };
  if (o.owner) nd.spec.desired = { state: 'Reserved', owner: o.owner };
  nd.status = { node: { phase: o.owner ? 'Reserved' : 'Available', capacityBytes: o.bytes ?? 64 * 2 ** 20, lastSeenTime: new Date(o.seen ?? now).toISOString() } };
  return nd;
}

test('a free disk that is big enough fits; each reason it would not is told apart', (t) => {
  const claim = newClaim('team-a', 'db', { minCapacity: '32Mi' });
  t.is(misfit(claim, disk('n1', 'd1'), ctx), undefined);
  t.is(misfit(claim, disk('n1', 'd2', { owner: 'alice' }), ctx), 'reserved');
  t.is(misfit(claim, disk('n1', 'd3', { bytes: 2 ** 20 }), ctx), 'too-small');
  t.is(misfit(claim, disk('n1', 'd4', { seen: now - 120_000 }), ctx), 'stale');
  t.is(misfit(claim, disk('n1', 'd5', { labels: { [LABEL_AUTO_RESERVE]: 'true' } }), ctx), 'labelled');
  t.is(misfit(claim, disk('n1', 'd6'), { ...ctx, liveness: () => ({ kind: 'stale', lease: 'l', renewTime: 'r', durationSeconds: 1 }) }), 'stale');
  t.is(misfit(claim, disk('n1', 'd7', { seen: now - 120_000 }), { ...ctx, liveness: () => ({ kind: 'alive' }) }), undefined, 'a fresh heartbeat outweighs an old report');
  t.is(misfit(newClaim('a', 'b', { nodeName: 'n2' }), disk('n1', 'd1'), ctx), 'other-node');
  t.is(misfit(newClaim('a', 'b', { diskName: nodeDiskName('n1', 'd9') }), disk('n1', 'd1'), ctx), 'other-disk');
  t.is(misfit(newClaim('a', 'b', { selector: { matchLabels: { tier: 'fast' } } }), disk('n1', 'd1'), ctx), 'selector');
  t.is(misfit(newClaim('a', 'b', { selector: { matchLabels: { tier: 'fast' } } }), disk('n1', 'd1', { labels: { tier: 'fast' } }), ctx), undefined);
});

test('label selectors: matchLabels and the four operators, all must hold', (t) => {
  const l = { a: '1', b: '2' };
  t.true(matchesSelector(undefined, l));
  t.true(matchesSelector({}, l));
  t.true(matchesSelector({ matchLabels: { a: '1' }, matchExpressions: [{ key: 'b', operator: 'In', values: ['2', '3'] }] }, l));
  t.false(matchesSelector({ matchLabels: { a: '2' } }, l));
  t.false(matchesSelector({ matchExpressions: [{ key: 'b', operator: 'NotIn', values: ['2'] }] }, l));
  t.true(matchesSelector({ matchExpressions: [{ key: 'c', operator: 'NotIn', values: ['2'] }] }, l));
  t.true(matchesSelector({ matchExpressions: [{ key: 'a', operator: 'Exists' }] }, l));
  t.false(matchesSelector({ matchExpressions: [{ key: 'c', operator: 'Exists' }] }, l));
  t.true(matchesSelector({ matchExpressions: [{ key: 'c', operator: 'DoesNotExist' }] }, l));
  t.false(matchesSelector({ matchExpressions: [{ key: 'c', operator: 'In', values: ['1'] }] }, l));
});

test("the cluster-wide line is the scheduler's: all disks, then the counts by reason, the largest first", (t) => {
  const claim = newClaim('team-a', 'db', { minCapacity: '32Mi' });
  const counts = new Map<Misfit, number>([
    ['stale', 2],
    ['reserved', 4],
    ['too-small', 3],
  ]);
  t.is(disksFitLine(claim, 9, counts), '0/9 disks fit: 4 reserved, 3 smaller than 32Mi, 2 on nodes whose agent is stale');
  t.is(disksFitLine(claim, 0, new Map()), '0/0 disks fit: there are no NodeDisks');
  t.is(disksFitLine(newClaim('a', 'b', { nodeName: 'n2' }), 3, new Map([['other-node', 3]])), '0/3 disks fit: 3 on other nodes than n2');
});

test('a cordoned disk and the disks of a gone node are counted as such in the cluster-wide line, not as "not free"; one that fits is counted as fitting', (t) => {
  const claim = newClaim('team-a', 'db');
  const cordoned = disk('n1', 'd1', { labels: { [LABEL_CORDONED]: CORDONED_VALUE } });
  const gone = disk('n2', 'd1');
  gone.status!.conditions = [{ type: 'Ready', status: 'False', reason: 'NodeGone', message: '', lastTransitionTime: '2026-01-02T03:04:05Z' }];
  const { total, counts } = misfitCountsOf(claim, [cordoned, gone, disk('n2', 'd2')], ctx);
  t.is(disksFitLine(claim, total, counts), '1/3 disks fit: 1 cordoned, 1 on nodes that are gone');
});

test("a team's Pending line says what its own filters ask and nothing of the other disks; a named disk reads the same whatever keeps it", (t) => {
  t.is(tenantPendingLine(newClaim('a', 'b')), 'no free disk');
  t.is(tenantPendingLine(newClaim('a', 'b', { minCapacity: '1Gi', nodeName: 'm02' })), 'no free disk of at least 1Gi on node m02');
  t.is(
    tenantPendingLine(newClaim('a', 'b', { nodeName: 'm02', selector: { matchLabels: { tier: 'fast' }, matchExpressions: [{ key: 'zone', operator: 'In', values: ['a', 'b'] }] } })),
    'no free disk on node m02 matches the selector tier=fast,zone in (a,b)',
  );
  t.is(tenantPendingLine(newClaim('a', 'b', { selector: {} })), 'no free disk', 'an empty selector asks nothing');
  t.is(tenantPendingLine(newClaim('a', 'b', { diskName: 'node-disk-n1-d1', minCapacity: '1Gi' })), 'disk node-disk-n1-d1 is not free for this claim');
});

test('a disk reserved for another claim is reserved', (t) => {
  t.is(misfit(newClaim('a', 'b'), disk('n1', 'd1', { owner: `${CLAIM_OWNER_PREFIX}a/c` }), ctx), 'reserved');
});

const types = (s: { conditions?: { type: string; status: string; reason: string }[] }) => (s.conditions ?? []).map((c) => `${c.type}=${c.status}/${c.reason}`);

test('the conditions kstatus reads: Pending has Ready False, Lost and a Missing disk have Stalled True, a healthy or waiting claim none', (t) => {
  const claim = newClaim('team-a', 'db');
  claim.metadata.generation = 1;
  const at = new Date(now);
  t.deepEqual(types(pendingStatus(claim, '0/1 disks fit: 1 reserved', at)), ['Bound=False/NoDiskFits', 'Ready=False/NoDiskFits']);
  const nd = disk('n1', 'd1', { owner: 'claim:team-a/db' });
  t.deepEqual(types(boundStatus(claim, nd, ctx, at)), ['Bound=True/Bound', 'Ready=True/MarkerOnNode']);
  nd.status!.node!.phase = 'Available';
  t.deepEqual(types(boundStatus(claim, nd, ctx, at)), ['Bound=True/Bound', 'Ready=False/WaitingForMarker']);
  nd.status!.node!.phase = 'Missing';
  t.deepEqual(types(boundStatus(claim, nd, ctx, at)), ['Bound=True/Bound', 'Ready=False/DiskMissing', 'Stalled=True/DiskMissing']);
  t.deepEqual(types(lostStatus(claim, 'NodeDisk x is gone', at)), ['Bound=False/DiskGone', 'Ready=False/DiskGone', 'Stalled=True/DiskGone']);
});

test("a Bound claim whose disk's node is gone or another machine now is not Ready, says why, and is Stalled: a new machine's heartbeat does not make it Ready", (t) => {
  const claim = newClaim('team-a', 'db');
  claim.metadata.generation = 1;
  const at = new Date(now);
  const alive = { ...ctx, liveness: () => ({ kind: 'alive' as const }) };
  for (const reason of ['NodeGone', 'NodeReplaced']) {
    const nd = disk('n1', 'd1', { owner: 'claim:team-a/db' });
    nd.status!.conditions = [{ type: 'Ready', status: 'False', reason, message: 'x', lastTransitionTime: '2026-01-02T03:04:05Z' }];
    const s = boundStatus(claim, nd, alive, at);
    t.deepEqual(types(s), ['Bound=True/Bound', `Ready=False/${reason}`, `Stalled=True/${reason}`]);
    t.is(s.phase, 'Bound');
    t.regex(s.message ?? '', reason === 'NodeGone' ? /^node n1 is gone \(no Node object\): the disk went with its machine/ : /^node n1 is another machine now \(another Node UID\)/);
  }
});

test('a Pending claim whose line does not change is not written again, and keeps its transition times', (t) => {
  const claim = newClaim('team-a', 'db');
  claim.metadata.generation = 1;
  claim.status = pendingStatus(claim, '0/1 disks fit: 1 reserved', new Date(now));
  const later = pendingStatus(claim, '0/1 disks fit: 1 reserved', new Date(now + 60_000));
  t.true(sameClaimStatus(claim.status, later));
  t.false(sameClaimStatus(claim.status, pendingStatus(claim, '0/2 disks fit: 2 reserved', new Date(now + 60_000))));
});

test("a namespace's max-disks annotation is a whole number of disks; anything else is said, not guessed", (t) => {
  t.deepEqual(parseLimit(undefined), { kind: 'none' });
  t.deepEqual(parseLimit('3'), { kind: 'max', disks: 3 });
  t.deepEqual(parseLimit(' 0 '), { kind: 'max', disks: 0 });
  for (const bad of ['', '-1', '1.5', 'ten', '1e3', '9999999999']) t.deepEqual(parseLimit(bad), { kind: 'invalid', value: bad }, bad);
});
