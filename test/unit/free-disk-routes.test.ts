// One notion of "may this disk go to a new holder" (api/free-disk.ts, docs/adr/0043-one-notion-of-free.md):
// every state a disk can be in, asked of every route that hands out a disk it was not named, through each
// route's own code: `reserve --node` (the plugin's choice), a NodeDiskClaim (the binder's decision), a
// PersistentVolume (the CSI controller's GetCapacity, whose count CreateVolume's choice shares). Each row
// says whether the disk may go and, where not, the reason every route gives. A route's own filters (a
// PV's blank disk, a claim's size) are rows of their own below the table.
import test from 'ava';
import { AUTO_RESERVE_VALUE, CLAIM_FINALIZER, CONDITION, CORDONED_VALUE, CSI_TOPOLOGY_KEY, LABEL_AUTO_RESERVE, LABEL_CORDONED } from '../../api/constants.ts';
import { type AgentView, type NotFreeKind, notFree } from '../../api/free-disk.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { Allocator } from '../../controller/allocator.ts';
import { decideClaim } from '../../controller/claim-decision.ts';
import { ControllerService } from '../../csi/controller-service.ts';
import { newClaim, newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { Informer } from '../../lib/kube/informer.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { PluginError } from '../../plugin/errors.ts';
import { chooseFree } from '../../plugin/reserve/plan.ts';
import { claimFacts } from './_claim-facts.ts';

const NODE = 'node-a';
const MiB = 2 ** 20;
const now = Date.parse('2026-12-04T10:00:00Z');
const seen = (msAgo: number) => new Date(now - msAgo).toISOString().replace(/\.\d+Z$/, 'Z');
const readyBecause = (reason: string) => [{ type: CONDITION.ready, status: 'False' as const, reason, message: '', lastTransitionTime: seen(0) }];

/** A free 64 MiB disk of NODE as its agent reports it a second ago, then changed. */
function disk(change: (nd: NodeDisk) => void = () => {}): NodeDisk {
  const nd = newNodeDisk(NODE, 'disk1');
  nd.metadata.resourceVersion = '7';
  nd.status = { node: { phase: 'Available', capacityBytes: 64 * MiB, lastSeenTime: seen(1000) } };
  change(nd);
  return nd;
}

type Liveness = 'alive' | 'stale' | 'none';

/** The agents as a program that watches their heartbeat Leases sees them (the binder, the CSI controller). */
function agents(lease: Liveness): AgentView {
  return { now, staleAfterMs: 15 * 60_000, liveness: () => ({ kind: lease }) };
}

const STATES: { state: string; nd: NodeDisk; lease?: Liveness; kind: NotFreeKind | undefined }[] = [
  { state: 'free, its agent alive', nd: disk(), kind: undefined },
  { state: 'free, no heartbeat Lease but a fresh report', nd: disk(), lease: 'none', kind: undefined },
  { state: 'reserved by a person', nd: disk((nd) => (nd.spec.desired = { state: 'Reserved', owner: 'team-db' })), kind: 'reserved' },
  { state: 'reserved by a PV', nd: disk((nd) => (nd.spec.desired = { state: 'Reserved', owner: 'pv:pvc-1', ownerUID: 'u' })), kind: 'reserved' },
  { state: 'being deleted', nd: disk((nd) => (nd.metadata.deletionTimestamp = seen(0))), kind: 'deleting' },
  { state: 'labelled for the label policy', nd: disk((nd) => (nd.metadata.labels = { ...nd.metadata.labels, [LABEL_AUTO_RESERVE]: AUTO_RESERVE_VALUE })), kind: 'labelled' },
  { state: 'cordoned', nd: disk((nd) => (nd.metadata.labels = { ...nd.metadata.labels, [LABEL_CORDONED]: CORDONED_VALUE })), kind: 'cordoned' },
  { state: 'being wiped', nd: disk((nd) => (nd.spec.desired = { state: 'Available', wipe: 'claim-1' })), kind: 'wiping' },
  {
    state: 'wiped since its release',
    nd: disk((nd) => {
      nd.spec.desired = { state: 'Available', wipe: 'claim-1' };
      nd.status!.node!.wipedFor = 'claim-1';
    }),
    kind: undefined,
  },
  { state: 'on a node that is gone', nd: disk((nd) => (nd.status!.conditions = readyBecause('NodeGone'))), kind: 'node-gone' },
  { state: 'on a machine replaced since', nd: disk((nd) => (nd.status!.conditions = readyBecause('NodeReplaced'))), kind: 'node-replaced' },
  { state: 'its agent judged stale by the controller', nd: disk((nd) => (nd.status!.conditions = readyBecause('AgentStale'))), kind: 'stale' },
  { state: 'its heartbeat Lease expired (not yet on the disk)', nd: disk(), lease: 'stale', kind: 'stale' },
  { state: 'no heartbeat Lease and an hour-old report', nd: disk((nd) => (nd.status!.node!.lastSeenTime = seen(3600_000))), lease: 'none', kind: 'stale' },
  { state: 'not reported yet', nd: disk((nd) => delete nd.status), kind: 'unreported' },
  { state: 'missing on its node', nd: disk((nd) => (nd.status!.node!.phase = 'Missing')), kind: 'phase' },
  { state: 'of no reported size', nd: disk((nd) => delete nd.status!.node!.capacityBytes), kind: 'unsized' },
];

/** `reserve --node NODE`: the plugin's choice among the node's disks as listed. */
function byReserve(nd: NodeDisk): boolean {
  try {
    return chooseFree([nd], { node: NODE }) === nd;
  } catch (err) {
    if (err instanceof PluginError) return false;
    throw err;
  }
}

/** A claim of the namespace, with its finalizer, that asks for nothing in particular: the binder's decision. */
function byClaim(nd: NodeDisk, view: AgentView): boolean {
  const claim = newClaim('team-a', 'db');
  claim.metadata.uid = 'claim-uid';
  claim.metadata.finalizers = [CLAIM_FINALIZER];
  const d = decideClaim(claimFacts(claim, view, { candidates: [{ disk: nd, busy: false }] }));
  if (d.kind !== 'bind' && d.kind !== 'pending') throw new Error(`the binder decided ${d.kind}`);
  return d.kind === 'bind';
}

/** The CSI controller: GetCapacity for NODE counts the disk only when a volume may get it. */
async function byVolume(nd: NodeDisk, view: AgentView, parameters: Record<string, string> = {}): Promise<boolean> {
  const log = createLogger('test', { write: () => {} });
  // Never run: the cache is filled here, as a synced informer's would be.
  const informer = new Informer<NodeDisk>({ list: () => Promise.reject(new Error('not listed')), watch: () => (async function* () {})() }, {}, { log });
  informer.cache.set(nd.metadata.name!, nd);
  const allocator = new Allocator({ disks: undefined as never, diskInformer: informer, fieldManager: 'test', log });
  allocator.index.rebuild(informer.cache);
  const service = new ControllerService({ allocator, disks: undefined as never, log, notReady: () => undefined, agents: () => view });
  const capacity = await service.handlers.GetCapacity({
    volume_capabilities: [{ access_mode: { mode: 'SINGLE_NODE_WRITER' }, access_type: 'mount', mount: { fs_type: 'ext4', mount_flags: [], volume_mount_group: '' } }],
    parameters,
    accessible_topology: { segments: { [CSI_TOPOLOGY_KEY]: NODE } },
  });
  return capacity.available_capacity === 64 * MiB;
}

for (const s of STATES) {
  test(`every route gives the same answer for a disk ${s.state}: ${s.kind === undefined ? 'it may go' : s.kind}`, async (t) => {
    const view = agents(s.lease ?? 'alive');
    t.is(notFree(s.nd, view)?.kind, s.kind, 'the predicate');
    const mayGo = s.kind === undefined;
    t.is(byClaim(s.nd, view), mayGo, 'a NodeDiskClaim');
    t.is(await byVolume(s.nd, view), mayGo, 'a PersistentVolume');
    // The plugin reads the disks, not the Leases: an expired Lease reaches it as the Ready condition the
    // controller writes on the node's disks (the row above with AgentStale).
    if (s.lease === undefined) t.is(byReserve(s.nd), mayGo, 'reserve --node');
  });
}

test("reserve --node says why a disk may not go in the predicate's words", (t) => {
  const cordoned = disk((nd) => (nd.metadata.labels = { ...nd.metadata.labels, [LABEL_CORDONED]: CORDONED_VALUE }));
  const err = t.throws(() => chooseFree([cordoned], { node: NODE }));
  t.is(err.message, `node ${NODE} has no free disk: disk1 ${notFree(cordoned)!.why}`);
});

test("a disk whose earlier owner's bytes were kept on purpose (release without --wipe) goes to a person or a claim as it is, never to a PV, which needs a blank disk", async (t) => {
  const kept = disk((nd) => (nd.status!.node!.holdsData = true));
  const view = agents('alive');
  t.is(notFree(kept, view), undefined);
  t.true(byReserve(kept));
  t.true(byClaim(kept, view));
  t.false(await byVolume(kept, view));
});

test('a free drive goes to a person or a claim; to a PV only once wiped, as the node side formats only a blank disk', async (t) => {
  const drive = disk((nd) => {
    nd.spec.diskID = 'drive-wwn-5000c500a1b2c3d4';
    nd.spec.path = '/dev/disk/by-id/wwn-0x5000c500a1b2c3d4';
    nd.status!.node!.wipedFor = 'w1';
    nd.status!.node!.drive = { device: 'sdb', media: 'hdd', transport: 'sata', logicalBlockSize: 512, physicalBlockSize: 4096 };
  });
  const view = agents('alive');
  t.is(notFree(drive, view), undefined);
  t.true(byReserve(drive));
  t.true(byClaim(drive, view));
  t.true(await byVolume(drive, view));
  const neverWiped = structuredClone(drive);
  delete neverWiped.status!.node!.wipedFor;
  neverWiped.status!.node!.holdsData = true;
  t.true(byClaim(neverWiped, view));
  t.false(await byVolume(neverWiped, view));
});

test("a class's diskSelector is the PV route's own filter, over the one predicate: a free disk outside the class counts for none of its capacity", async (t) => {
  const fast = disk((nd) => (nd.metadata.labels = { ...nd.metadata.labels, tier: 'fast' }));
  const view = agents('alive');
  t.true(await byVolume(fast, view, { diskSelector: 'tier=fast' }));
  t.false(await byVolume(disk(), view, { diskSelector: 'tier=fast' }));
  t.false(
    await byVolume(
      disk((nd) => (nd.metadata.labels = { ...nd.metadata.labels, tier: 'fast', [LABEL_CORDONED]: CORDONED_VALUE })),
      view,
      { diskSelector: 'tier=fast' },
    ),
  );
});
