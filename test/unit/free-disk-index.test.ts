import test from 'ava';
import { CLAIM_OWNER_PREFIX, CORDONED_VALUE, LABEL_CORDONED } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDiskClaimSpec } from '../../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { misfitCountsOf } from '../../api/claim-fit.ts';
import { filterKey, type Misfit, misfit } from '../../api/claim-fit.ts';
import { misfitCounts } from '../../controller/claim-misfit-counts.ts';
import { FreeDiskIndex } from '../../controller/free-disk-index.ts';
import { newClaim, newNodeDisk } from '../../hack/lib/nodedisks.ts';

const MiB = 2 ** 20;
const now = Date.parse('2026-01-02T03:04:05Z');
const ctx = { now, staleAfterMs: 60_000 };

let version = 0;
function disk(node: string, id: string, o: { mib?: number; owner?: string; seen?: number; labels?: Record<string, string>; unreported?: boolean } = {}): NodeDisk {
  const nd = newNodeDisk(node, id);
  nd.metadata.resourceVersion = String(++version);
  nd.metadata.labels = { ...nd.metadata.labels, ...o.labels };
  if (o.owner) nd.spec.desired = { state: 'Reserved', owner: o.owner };
  if (!o.unreported) nd.status = { node: { phase: o.owner ? 'Reserved' : 'Available', capacityBytes: (o.mib ?? 64) * MiB, lastSeenTime: new Date(o.seen ?? now).toISOString() } };
  return nd;
}

function indexOf(disks: NodeDisk[]): FreeDiskIndex {
  const index = new FreeDiskIndex();
  for (const nd of disks) index.update(nd.metadata.name!, nd);
  return index;
}

const names = (xs: Iterable<NodeDisk>) => [...xs].map((nd) => nd.metadata.name);

test('an added free disk is a candidate; a disk that is not free is counted by why, not offered', (t) => {
  const index = indexOf([disk('n1', 'd1'), disk('n1', 'd2', { owner: 'alice' }), disk('n1', 'd3', { labels: { [LABEL_CORDONED]: CORDONED_VALUE } })]);
  t.deepEqual(names(index.candidates(0)), [nodeDiskName('n1', 'd1')]);
  t.is(index.count(), 3);
  t.deepEqual([...index.notFreeCounts()].sort(), [
    ['cordoned', 1],
    ['reserved', 1],
  ]);
});

test('candidates come smallest first, ties by name, and none smaller than asked for', (t) => {
  const index = indexOf([disk('n2', 'big', { mib: 512 }), disk('n1', 'b', { mib: 64 }), disk('n1', 'tiny', { mib: 1 }), disk('n3', 'a', { mib: 64 }), disk('n1', 'mid', { mib: 128 })]);
  t.deepEqual(names(index.candidates(32 * MiB)), [nodeDiskName('n1', 'b'), nodeDiskName('n3', 'a'), nodeDiskName('n1', 'mid'), nodeDiskName('n2', 'big')]);
  t.deepEqual(names(index.candidates(64 * MiB)), [nodeDiskName('n1', 'b'), nodeDiskName('n3', 'a'), nodeDiskName('n1', 'mid'), nodeDiskName('n2', 'big')], 'exactly the size asked for fits');
  t.deepEqual(names(index.candidates(65 * MiB)), [nodeDiskName('n1', 'mid'), nodeDiskName('n2', 'big')]);
  t.deepEqual(names(index.candidates(0)), [nodeDiskName('n1', 'tiny'), nodeDiskName('n1', 'b'), nodeDiskName('n3', 'a'), nodeDiskName('n1', 'mid'), nodeDiskName('n2', 'big')]);
  t.deepEqual(names(index.candidates(1024 * MiB)), []);
  t.is(index.freeSmallerThan(32 * MiB), 1);
  t.is(index.freeSmallerThan(129 * MiB), 4);
});

test("a node's candidates are that node's only, in the same order", (t) => {
  const index = indexOf([disk('n1', 'd2', { mib: 64 }), disk('n2', 'd1', { mib: 64 }), disk('n1', 'd1', { mib: 256 }), disk('n1', 'd3', { mib: 64 })]);
  t.deepEqual(names(index.candidates(32 * MiB, 'n1')), [nodeDiskName('n1', 'd2'), nodeDiskName('n1', 'd3'), nodeDiskName('n1', 'd1')]);
  t.deepEqual(names(index.candidates(0, 'n2')), [nodeDiskName('n2', 'd1')]);
  t.deepEqual(names(index.candidates(0, 'nowhere')), []);
  t.is(index.count('n1'), 3);
  t.is(index.count('nowhere'), 0);
});

test('an update that changes the capacity moves the disk to its new place, once', (t) => {
  const index = indexOf([disk('n1', 'a', { mib: 64 }), disk('n1', 'b', { mib: 128 })]);
  index.update(nodeDiskName('n1', 'a'), disk('n1', 'a', { mib: 256 }));
  t.deepEqual(names(index.candidates(0)), [nodeDiskName('n1', 'b'), nodeDiskName('n1', 'a')]);
  t.deepEqual(names(index.candidates(0, 'n1')), [nodeDiskName('n1', 'b'), nodeDiskName('n1', 'a')]);
  t.is(index.count(), 2);
});

test('a disk that leaves free is no candidate and counted as not free; back to free it is a candidate again and the count goes', (t) => {
  const name = nodeDiskName('n1', 'd1');
  const index = indexOf([disk('n1', 'd1'), disk('n1', 'd2')]);
  const before = index.generation;
  index.update(name, disk('n1', 'd1', { owner: `${CLAIM_OWNER_PREFIX}team/db` }));
  t.true(index.generation > before, 'a change is a new generation');
  t.deepEqual(names(index.candidates(0)), [nodeDiskName('n1', 'd2')]);
  t.deepEqual(names(index.candidates(0, 'n1')), [nodeDiskName('n1', 'd2')]);
  t.deepEqual([...index.notFreeCounts()], [['reserved', 1]]);
  t.deepEqual([...index.notFreeCounts('n1')], [['reserved', 1]]);
  t.deepEqual([...index.reservedFor(`${CLAIM_OWNER_PREFIX}team/db`)], [name]);

  index.update(name, disk('n1', 'd1'));
  t.deepEqual(names(index.candidates(0)), [name, nodeDiskName('n1', 'd2')]);
  t.deepEqual(names(index.candidates(0, 'n1')), [name, nodeDiskName('n1', 'd2')]);
  t.deepEqual([...index.notFreeCounts()], []);
  t.deepEqual([...index.notFreeCounts('n1')], []);
  t.deepEqual([...index.reservedFor(`${CLAIM_OWNER_PREFIX}team/db`)], []);
  t.is(index.count(), 2);
});

test('a deleted disk is gone from the candidates, the counts and its owner', (t) => {
  const index = indexOf([disk('n1', 'free'), disk('n1', 'taken', { owner: 'alice' }), disk('n2', 'other')]);
  index.update(nodeDiskName('n1', 'free'), undefined);
  index.update(nodeDiskName('n1', 'taken'), undefined);
  t.deepEqual(names(index.candidates(0)), [nodeDiskName('n2', 'other')]);
  t.deepEqual(names(index.candidates(0, 'n1')), []);
  t.deepEqual([...index.notFreeCounts()], []);
  t.deepEqual([...index.reservedFor('alice')], []);
  t.is(index.count(), 1);
  t.is(index.count('n1'), 0);
  t.is(index.size, 1);
  t.is(index.disk(nodeDiskName('n1', 'free')), undefined);
});

test('a disk that moves to another node (same name) is counted on its new node only', (t) => {
  const index = indexOf([disk('n1', 'd1')]);
  const moved = disk('n2', 'd9');
  moved.metadata.name = nodeDiskName('n1', 'd1');
  index.update(nodeDiskName('n1', 'd1'), moved);
  t.deepEqual(names(index.candidates(0, 'n1')), []);
  t.deepEqual(names(index.candidates(0, 'n2')), [nodeDiskName('n1', 'd1')]);
  t.is(index.count('n1'), 0);
  t.is(index.count('n2'), 1);
});

test('rebuilding from a cache drops what the cache no longer holds and keeps the rest', (t) => {
  const index = indexOf([disk('n1', 'a'), disk('n1', 'b'), disk('n1', 'c', { owner: 'bob' })]);
  const keep = disk('n1', 'b');
  index.rebuild(new Map([[nodeDiskName('n1', 'b'), keep]]));
  t.is(index.size, 1);
  t.deepEqual(names(index.candidates(0)), [nodeDiskName('n1', 'b')]);
  t.deepEqual([...index.notFreeCounts()], []);
  t.deepEqual([...index.reservedFor('bob')], []);
});

/** What the Pending counts are by definition: every disk judged by misfit, one by one. */
function judgedOneByOne(spec: NodeDiskClaimSpec, disks: NodeDisk[]): Map<Misfit, number> {
  const claim = newClaim('team', 'db', spec);
  const counts = new Map<Misfit, number>();
  for (const nd of disks) {
    const m = misfit(claim, nd, ctx);
    if (m) counts.set(m, (counts.get(m) ?? 0) + 1);
  }
  return counts;
}

const sorted = (m: Map<Misfit, number>) => [...m].sort(([a], [b]) => a.localeCompare(b));

test("the counts read off the index are those of judging every disk (the plugin's way), for each kind of filter", (t) => {
  const disks = [
    disk('n1', 'd1', { owner: 'alice' }),
    disk('n1', 'd2', { mib: 1 }),
    disk('n1', 'd3', { seen: now - 3600_000 }),
    disk('n1', 'd4', { labels: { tier: 'fast' }, owner: 'bob' }),
    disk('n2', 'd1', { mib: 1, labels: { tier: 'fast' } }),
    disk('n2', 'd2', { unreported: true }),
    disk('n2', 'd3', { labels: { [LABEL_CORDONED]: CORDONED_VALUE } }),
    disk('n3', 'd1', { seen: now - 3600_000, labels: { tier: 'fast' } }),
  ];
  const index = indexOf(disks);
  const specs: NodeDiskClaimSpec[] = [
    { minCapacity: '32Mi' },
    {},
    { nodeName: 'n1', minCapacity: '32Mi' },
    { nodeName: 'n2' },
    { nodeName: 'nowhere' },
    { selector: { matchLabels: { tier: 'fast' } }, minCapacity: '32Mi' },
    { selector: { matchLabels: { tier: 'fast' } }, nodeName: 'n2' },
    { diskName: nodeDiskName('n1', 'd1') },
    { diskName: nodeDiskName('n2', 'd1'), minCapacity: '32Mi' },
    { diskName: nodeDiskName('n9', 'none') },
    { diskName: nodeDiskName('n1', 'd2'), nodeName: 'n3' },
  ];
  for (const spec of specs) {
    const { total, counts } = misfitCounts(newClaim('team', 'db', spec), index, ctx);
    t.is(total, disks.length, JSON.stringify(spec));
    t.deepEqual(sorted(counts), sorted(judgedOneByOne(spec, disks)), JSON.stringify(spec));
    t.deepEqual(sorted(misfitCountsOf(newClaim('team', 'db', spec), disks, ctx).counts), sorted(counts), JSON.stringify(spec));
  }
});

test("a namespace's disks are those reserved for its claims, bound or retained, and nobody else's; each change counted once", (t) => {
  const index = indexOf([
    disk('n1', 'd1', { owner: `${CLAIM_OWNER_PREFIX}team-a/db` }),
    disk('n1', 'd2', { owner: `${CLAIM_OWNER_PREFIX}team-a/kept` }),
    disk('n1', 'd3', { owner: `${CLAIM_OWNER_PREFIX}team-ab/db` }),
    disk('n1', 'd4', { owner: 'team-a' }),
    disk('n1', 'd5'),
  ]);
  t.is(index.reservedForNamespace('team-a'), 2);
  t.is(index.reservedForNamespace('team-ab'), 1);
  t.is(index.reservedForNamespace('team-b'), 0);
  // The same disk again (a status change) counts once; released, it no longer counts; taken, it does.
  index.update(nodeDiskName('n1', 'd1'), disk('n1', 'd1', { owner: `${CLAIM_OWNER_PREFIX}team-a/db` }));
  t.is(index.reservedForNamespace('team-a'), 2);
  index.update(nodeDiskName('n1', 'd2'), disk('n1', 'd2'));
  t.is(index.reservedForNamespace('team-a'), 1);
  index.update(nodeDiskName('n1', 'd5'), disk('n1', 'd5', { owner: `${CLAIM_OWNER_PREFIX}team-a/new` }));
  t.is(index.reservedForNamespace('team-a'), 2);
  index.update(nodeDiskName('n1', 'd1'), undefined);
  t.is(index.reservedForNamespace('team-a'), 1);
});

test('claims share a Pending line only when they ask the same: node, selector, minCapacity and disk name each tell them apart', (t) => {
  const key = (spec: NodeDiskClaimSpec, name = 'db') => filterKey(newClaim('team', name, spec));
  t.is(key({ minCapacity: '32Mi' }, 'a'), key({ minCapacity: '32Mi' }, 'b'), 'the name of the claim is not part of it');
  const specs: NodeDiskClaimSpec[] = [
    {},
    { minCapacity: '32Mi' },
    { minCapacity: '64Mi' },
    { nodeName: 'n1' },
    { nodeName: 'n2' },
    { selector: { matchLabels: { tier: 'fast' } } },
    { selector: { matchLabels: { tier: 'slow' } } },
    { diskName: nodeDiskName('n1', 'd1') },
    { nodeName: 'n1', minCapacity: '32Mi' },
  ];
  t.is(new Set(specs.map((s) => key(s))).size, specs.length);
});
