// The pure parts of the node lifecycle (ADR 35): what a gone node's disk says, what is kept, what is not
// free, what the label may not reserve, and that no node is judged gone before the Nodes are known.
import test from 'ava';
import nock from 'nock';
import { NodeDiskClient } from '../../api/client.ts';
import { FINALIZER, LABEL_AUTO_RESERVE, LABEL_CORDONED, REASON_NODE_GONE } from '../../api/constants.ts';
import { notFreeBecause } from '../../api/free-disk.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { tokenNodeIdentity } from '../../agent/node-identity.ts';
import { leanNodeDisk } from '../../controller/cache.ts';
import { goneBecause } from '../../plugin/cmd/prune.ts';
import { formatDuration, keptBecause, nodeGoneCondition, nodeReplacedCondition } from '../../controller/conditions.ts';
import { EventRecorder } from '../../controller/events.ts';
import { controllerMetrics } from '../../controller/metrics.ts';
import { Nodes } from '../../controller/nodes.ts';
import { decide } from '../../controller/policy.ts';
import { Reconciler } from '../../controller/reconciler.ts';
import { tokenAccess } from './_access.ts';

const SERVER = 'https://k8s.node-lifecycle.test:6443';
const silent = createLogger('test', { write: () => {} });

const disk = (o: { desired?: NodeDisk['spec']['desired']; labels?: Record<string, string>; finalizers?: string[]; ready?: string } = {}): NodeDisk => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDisk',
  metadata: { name: 'node-disk-n1-disk1', resourceVersion: '5', generation: 1, labels: o.labels ?? {}, ...(o.finalizers ? { finalizers: o.finalizers } : {}) },
  spec: { nodeName: 'n1', diskID: 'disk1', path: '/d/disk1.img', ...(o.desired ? { desired: o.desired } : {}) },
  status: {
    node: { phase: 'Available', capacityBytes: 1024 },
    ...(o.ready ? { conditions: [{ type: 'Ready', status: 'False', reason: o.ready, message: 'm', lastTransitionTime: '2026-01-01T00:00:00Z' }] } : {}),
  },
});

test.before(() => nock.disableNetConnect());
test.afterEach.always(() => nock.cleanAll());

test('formatDuration prints durations as Go does, shortest form', (t) => {
  t.is(formatDuration(3_600_000), '1h');
  t.is(formatDuration(90_000), '1m30s');
  t.is(formatDuration(3_661_000), '1h1m1s');
  t.is(formatDuration(3000), '3s');
  t.is(formatDuration(0), '0ms');
});

test('a disk of a gone node is not free; the same disk on a live node is', (t) => {
  t.is(notFreeBecause(disk()), undefined);
  t.is(notFreeBecause(disk({ ready: REASON_NODE_GONE })), 'is on node n1, which is gone (no Node object)');
  t.is(notFreeBecause(disk({ ready: 'DiskMissing' })), undefined, 'only NodeGone makes it not free here');
  t.is(notFreeBecause(disk({ ready: 'NodeReplaced' })), 'was found on another machine than node n1 is now (another Node UID)');
});

test('what keeps a disk of a gone node after the grace: a reservation of any owner, or the agent finalizer', (t) => {
  t.is(keptBecause(disk()), undefined);
  t.is(keptBecause(disk({ desired: { state: 'Available' } })), undefined);
  t.regex(keptBecause(disk({ desired: { state: 'Reserved', owner: 'team-db' } })) ?? '', /^it is reserved by team-db: it stays until a person releases it/);
  t.regex(keptBecause(disk({ desired: { state: 'Reserved', owner: 'auto' } })) ?? '', /reserved by auto/);
  t.regex(keptBecause(disk({ desired: { state: 'Reserved' } })) ?? '', /reserved with no owner/);
  t.regex(keptBecause(disk({ finalizers: [FINALIZER] })) ?? '', /finalizer localtest.example.com\/reservation-protection/);
});

test('Ready of a gone node names the node and says when the unreserved disk goes, or why a reserved one stays', (t) => {
  const since = Date.parse('2026-03-01T10:00:00Z');
  const free = nodeGoneCondition(disk(), since, 3_600_000);
  t.like(free, { status: 'False', reason: 'NodeGone', recheckAt: since + 3_600_000 });
  t.is(free.message, 'node n1 is gone: no Node object of that name (noticed at 2026-03-01T10:00:00Z); not reserved, it is deleted after the grace period of 1h, at 2026-03-01T11:00:00Z');
  const held = nodeGoneCondition(disk({ desired: { state: 'Reserved', owner: 'team-db' } }), since, 3_600_000);
  t.like(held, { status: 'False', reason: 'NodeGone' });
  t.is(held.recheckAt, undefined, 'nothing happens to it by itself');
  t.regex(held.message, /^node n1 is gone: .*; it is reserved by team-db: it stays until a person releases it/);
});

test('the label does not reserve a disk the controller refuses (its node is gone): Accepted False says why', (t) => {
  const labelled = disk({ labels: { [LABEL_AUTO_RESERVE]: 'true' } });
  t.like(decide(labelled), { action: 'reserve' });
  const refused = decide(labelled, { reason: REASON_NODE_GONE, message: 'its node n1 is gone (no Node object)' });
  t.deepEqual(refused, {
    action: 'none',
    note: { reason: 'NodeGone', message: `label ${LABEL_AUTO_RESERVE}=true has no effect: its node n1 is gone (no Node object)`, conflict: true },
  });
  // The label's own release still works on a gone node: only taking a disk is refused.
  t.like(decide(disk({ desired: { state: 'Reserved', owner: 'auto' } }), { reason: REASON_NODE_GONE, message: 'x' }), { action: 'release' });
  // Another owner's reservation is reported as before.
  t.like(decide(disk({ labels: { [LABEL_AUTO_RESERVE]: 'true' }, desired: { state: 'Reserved', owner: 'team-db' } }), { reason: REASON_NODE_GONE, message: 'x' }), {
    note: { reason: 'ReservedByOther' },
  });
});

test('before the Nodes are known no node is judged gone: nothing is written, the disk is looked at again', async (t) => {
  const rest = new RestClient(tokenAccess(SERVER, 't'), { timeoutMs: 2000 });
  const r = new Reconciler({
    client: new NodeDiskClient(rest),
    events: new EventRecorder(rest, 'unit', silent),
    log: silent,
    metrics: controllerMetrics(() => true),
    staleAfterMs: 60_000,
    nodes: { hasSynced: false, exists: () => false, goneSince: () => 0, uid: () => undefined },
    nodeGoneGraceMs: 0,
  });
  // nock allows no request: a write or a delete here fails the test.
  const result = await r.reconcile(disk());
  t.deepEqual(result, { requeueAfterMs: 1000 });
});

test("the per-node state goes with a node's last NodeDisk: churn leaves nothing behind", (t) => {
  let now = 1000;
  const nodes = new Nodes({ rest: new RestClient(tokenAccess(SERVER, 't')), log: silent, onChange: () => {}, wall: () => now });
  for (let i = 0; i < 50; i++) {
    const node = `churn-${i}`;
    nodes.trackDisk(node, 1);
    nodes.trackDisk(node, 1);
    t.is(nodes.goneSince(node), now, 'gone since the first look');
    now += 10;
    t.is(nodes.goneSince(node), now - 10, 'and the same on the next look');
    nodes.trackDisk(node, -1);
    t.is(nodes.tracked.goneSince, 1);
    nodes.trackDisk(node, -1);
  }
  t.deepEqual(nodes.tracked, { nodes: 0, disksByNode: 0, goneSince: 0 });
  // A node no NodeDisk names is not remembered even when asked about.
  nodes.goneSince('never-tracked');
  t.is(nodes.tracked.goneSince, 0);
});

test('Ready of a disk found on the machine before: NodeReplaced, both UIDs, and what becomes of it', (t) => {
  const found = disk({ desired: { state: 'Reserved', owner: 'team-db' } });
  found.status = { node: { phase: 'Reserved', nodeUID: 'uid-old' } };
  const held = nodeReplacedCondition(found, 'uid-new');
  t.like(held, { status: 'False', reason: 'NodeReplaced' });
  t.is(
    held.message,
    'node n1 is another machine now (Node UID uid-new); this disk was found on the one before (Node UID uid-old); it is reserved by team-db: it stays until a person releases it (kubectl nodedisks release, or kubectl nodedisks prune)',
  );
  const free = disk();
  free.status = { node: { phase: 'Available', nodeUID: 'uid-old' } };
  t.regex(nodeReplacedCondition(free, 'uid-new').message, /; not reserved, the new machine's agent reports its own disk under this name$/);
});

test.serial("the agent learns its node's UID from its own token (a SelfSubjectReview), and none from a token not bound to a node", async (t) => {
  const rest = new RestClient(tokenAccess(SERVER, 't'), { timeoutMs: 2000 });
  const review = (extra: Record<string, string[]>) => ({
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'SelfSubjectReview',
    status: { userInfo: { username: 'system:serviceaccount:ns:node-disks-agent', extra } },
  });
  nock(SERVER)
    .post('/apis/authentication.k8s.io/v1/selfsubjectreviews', (b: { kind?: string }) => b.kind === 'SelfSubjectReview')
    .reply(201, review({ 'authentication.kubernetes.io/node-name': ['n1'], 'authentication.kubernetes.io/node-uid': ['uid-1'] }))
    .post('/apis/authentication.k8s.io/v1/selfsubjectreviews')
    .reply(201, review({}));
  t.deepEqual(await tokenNodeIdentity(rest), { uid: 'uid-1', node: 'n1' });
  t.deepEqual(await tokenNodeIdentity(rest), { uid: undefined, node: undefined });
  t.true(nock.isDone());
});

test('a cordoned disk is not free, whatever else it is; the controller keeps the label in its lean cache', (t) => {
  const cordoned = disk({ labels: { [LABEL_CORDONED]: 'true' } });
  t.is(notFreeBecause(cordoned), 'is cordoned (label localtest.example.com/cordoned=true; kubectl nodedisks uncordon puts it back)');
  t.is(notFreeBecause(disk({ labels: { [LABEL_CORDONED]: 'false' } })), undefined, 'only "true" cordons');
  t.is(notFreeBecause(disk({ labels: { [LABEL_CORDONED]: 'true' }, desired: { state: 'Reserved', owner: 'team-db' } })), 'is reserved by team-db');
  t.deepEqual(leanNodeDisk(cordoned).metadata.labels, { [LABEL_CORDONED]: 'true' });
  t.deepEqual(leanNodeDisk(disk({ finalizers: [FINALIZER] })).metadata.finalizers, [FINALIZER]);
});

test('prune acts on what the controller judged gone or replaced, nothing else', (t) => {
  t.is(goneBecause(disk({ ready: 'NodeGone' })), 'node n1 is gone');
  t.is(goneBecause(disk({ ready: 'NodeReplaced' })), 'node n1 is another machine now');
  t.is(goneBecause(disk({ ready: 'AgentStale' })), undefined);
  t.is(goneBecause(disk()), undefined);
});
