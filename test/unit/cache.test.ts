// The controller's cache keeps a lean copy of each NodeDisk (controller/cache.ts). Whatever the policy,
// the Ready condition verdict, the status and the writes' identity read must come out the same from the lean
// copy as from the whole object; what nothing reads (managedFields first) must be gone.
import test from 'ava';
import { ANNOTATION_WIPE_ON_RELEASE, AUTO_OWNER, LABEL_AUTO_RESERVE, LABEL_DISK, LABEL_NODE } from '../../api/constants.ts';
import type { NodeDiskClaimSpec } from '../../api/v1alpha1/claim-types.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { leanNodeDisk } from '../../controller/cache.ts';
import { misfit } from '../../api/claim-fit.ts';
import { boundStatus } from '../../controller/claim-phase.ts';
import { controllerStatus, readyCondition } from '../../controller/conditions.ts';
import { decide } from '../../controller/policy.ts';
import { fullNodeDisk, newClaim } from '../../hack/lib/nodedisks.ts';

/** A whole object as the API server returns it: managedFields of three managers, annotations, labels. */
function asServed(change: (nd: NodeDisk) => void = () => {}): NodeDisk {
  const nd: NodeDisk = structuredClone(fullNodeDisk('node-a', 'disk1'));
  nd.metadata = {
    ...nd.metadata,
    uid: '0b7e5c1a-1111-2222-3333-444455556666',
    resourceVersion: '4711',
    generation: 3,
    creationTimestamp: '2026-01-02T03:00:00Z',
    annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"a":1}'.repeat(50) },
    managedFields: ['node-disks-agent', 'node-disks-operator', 'kubectl'].map((manager) => ({
      manager,
      operation: 'Apply',
      apiVersion: 'localtest.example.com/v1alpha1',
      fieldsType: 'FieldsV1',
      fieldsV1: { 'f:spec': { 'f:desired': {} } },
      time: '2026-01-02T03:04:05Z',
    })),
  };
  change(nd);
  return nd;
}

const variants: [string, NodeDisk][] = [
  ['reserved by hand', asServed()],
  ['labelled, free', asServed((nd) => ((nd.metadata.labels![LABEL_AUTO_RESERVE] = 'true'), (nd.spec.desired = { state: 'Available' })))],
  ['labelled, reserved by hand', asServed((nd) => (nd.metadata.labels![LABEL_AUTO_RESERVE] = 'true'))],
  ['label removed, reserved for auto', asServed((nd) => (nd.spec.desired = { state: 'Reserved', owner: AUTO_OWNER }))],
  [
    'label removed, reserved for auto, to be wiped on release',
    asServed((nd) => ((nd.spec.desired = { state: 'Reserved', owner: AUTO_OWNER }), (nd.metadata.annotations![ANNOTATION_WIPE_ON_RELEASE] = 'true'))),
  ],
  ['released with a wipe request the agent has not done', asServed((nd) => ((nd.spec.desired = { state: 'Available', wipe: 'w-1' }), (nd.status!.node!.wipedFor = 'w-0')))],
  ['label of a bad value', asServed((nd) => ((nd.metadata.labels![LABEL_AUTO_RESERVE] = 'yes'), delete nd.spec.desired))],
  ['not reported yet', asServed((nd) => delete nd.status)],
  ['agent stale', asServed((nd) => (nd.status!.node!.lastSeenTime = '2020-01-01T00:00:00Z'))],
  ['disk missing', asServed((nd) => ((nd.status!.node!.phase = 'Missing'), (nd.status!.node!.message = 'gone')))],
];

const claimSpecs: NodeDiskClaimSpec[] = [
  {},
  { selector: { matchLabels: { [LABEL_NODE]: 'node-a' } } },
  { selector: { matchExpressions: [{ key: LABEL_DISK, operator: 'NotIn', values: ['disk1'] }] } },
  { nodeName: 'node-a', minCapacity: '32Mi' },
  { diskName: 'node-disk-node-a-disk1' },
];

for (const [name, full] of variants) {
  test(`the lean copy decides, reports and identifies its writes as the whole object does: ${name}`, (t) => {
    const lean = leanNodeDisk(full);
    const now = Date.parse('2026-01-02T03:05:00Z');
    t.deepEqual(decide(lean), decide(full));
    const ready = readyCondition(full, now, 15 * 60_000);
    t.deepEqual(readyCondition(lean, now, 15 * 60_000), ready);
    t.deepEqual(controllerStatus(lean, decide(lean), ready, new Date(now)), controllerStatus(full, decide(full), ready, new Date(now)));
    // What the writes and Events carry: name and resourceVersion (conditional apply), uid (Event regarding),
    // creationTimestamp (the first-report grace), generation (observedGeneration).
    for (const k of ['name', 'uid', 'resourceVersion', 'generation', 'creationTimestamp'] as const) t.is(lean.metadata[k], full.metadata[k], k);
    t.is(lean.spec.nodeName, full.spec.nodeName);
    t.is(lean.spec.path, full.spec.path);
    t.deepEqual(lean.status, full.status);
    // A claim's fit, its selector over any label above all, and the status it would get.
    const ctx = { now, staleAfterMs: 15 * 60_000 };
    for (const spec of claimSpecs) {
      const claim = newClaim('team-a', 'db', spec);
      t.is(misfit(claim, lean, ctx), misfit(claim, full, ctx), JSON.stringify(spec));
      t.deepEqual(boundStatus(claim, lean, ctx, new Date(now)), boundStatus(claim, full, ctx, new Date(now)));
    }
  });
}

test('the lean copy drops managedFields and every annotation but wipe-on-release', (t) => {
  const full = asServed((nd) => (nd.metadata.labels![LABEL_AUTO_RESERVE] = 'true'));
  const lean = leanNodeDisk(full);
  t.is(lean.metadata.managedFields, undefined);
  t.is(lean.metadata.annotations, undefined);
  const annotated = asServed((nd) => (nd.metadata.annotations![ANNOTATION_WIPE_ON_RELEASE] = 'true'));
  t.deepEqual(leanNodeDisk(annotated).metadata.annotations, { [ANNOTATION_WIPE_ON_RELEASE]: 'true' });
  t.deepEqual(lean.metadata.labels, full.metadata.labels);
  // What is kept is at most the object without its managedFields and annotations (the fields read, spec.diskID
  // for the CSI driver's volume context among them, are all that stays).
  const { managedFields: _m, annotations: _a, ...metadata } = full.metadata;
  const bound = JSON.stringify({ ...full, metadata }).length;
  t.true(JSON.stringify(lean).length <= bound, `${JSON.stringify(lean).length} of ${bound} bytes kept`);
  t.true(JSON.stringify(lean).length < JSON.stringify(full).length * 0.6, `${JSON.stringify(lean).length} of ${JSON.stringify(full).length} bytes kept`);
});
