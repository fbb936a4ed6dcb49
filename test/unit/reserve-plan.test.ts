// The planning of reserve and release (plugin/reserve/plan.ts): from the disks as listed and the request
// to what is written, or why not. No API server: plans are plain data; carrying them out is tested in
// test/integration/reservations.test.ts and reservation-races.test.ts.
import test from 'ava';
import { API_VERSION, FIELD_MANAGER, KIND, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { EXIT, PluginError } from '../../plugin/errors.ts';
import { chooseFree, planEach, planRelease, planReserve, validateOwner, type Request } from '../../plugin/reserve/plan.ts';

const LABEL_PATH = `/metadata/labels/${LABEL_AUTO_RESERVE.replace('/', '~1')}`;

function disk(
  name: string,
  o: {
    desired?: NodeDisk['spec']['desired'];
    labels?: Record<string, string>;
    managed?: [string, Record<string, unknown>][];
    phase?: 'Available' | 'Reserved' | 'Missing';
    bytes?: number;
    deleting?: boolean;
  } = {},
): NodeDisk {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: {
      name,
      resourceVersion: '42',
      ...(o.labels ? { labels: o.labels } : {}),
      ...(o.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
      ...(o.managed ? { managedFields: o.managed.map(([manager, fieldsV1]) => ({ manager, operation: 'Apply' as const, fieldsV1 })) } : {}),
    },
    spec: { nodeName: 'node-a', diskID: name.replace(/^.*-/, ''), path: `/d/${name}.img`, ...(o.desired ? { desired: o.desired } : {}) },
    status: { node: { phase: o.phase ?? 'Available', capacityBytes: o.bytes ?? 1 << 30 } },
  };
}

const req = (r: Partial<Request> = {}): Request => ({ force: false, forceConflicts: false, ...r });
const gitOwnsDesired: [string, Record<string, unknown>] = [FIELD_MANAGER.argocd, { 'f:spec': { 'f:desired': { 'f:state': {} } } }];
const gitOwnsLabel: [string, Record<string, unknown>] = [FIELD_MANAGER.flux, { 'f:metadata': { 'f:labels': { [`f:${LABEL_AUTO_RESERVE}`]: {} } } }];

test('reserve without --owner plans the auto-reserve label; with --owner, spec.desired for that owner', (t) => {
  const nd = disk('node-disk-node-a-disk1');
  t.deepEqual(planReserve(nd, req()), {
    nd,
    steps: [{ body: { apiVersion: API_VERSION, kind: KIND, metadata: { name: 'node-disk-node-a-disk1', labels: { [LABEL_AUTO_RESERVE]: 'true' } } } }],
    verb: 'reserved (auto-reserve label set)',
  });
  t.deepEqual(planReserve(nd, req({ owner: 'team-db' })), {
    nd,
    steps: [{ body: { apiVersion: API_VERSION, kind: KIND, metadata: { name: 'node-disk-node-a-disk1' }, spec: { desired: { state: 'Reserved', owner: 'team-db' } } } }],
    verb: 'reserved for team-db',
  });
});

test('reserve of a disk already as asked plans nothing, and says why', (t) => {
  t.like(planReserve(disk('d-disk1', { desired: { state: 'Reserved', owner: 'team-db' } }), req({ owner: 'team-db' })), { steps: [], skip: 'already reserved by team-db' });
  t.like(planReserve(disk('d-disk1', { labels: { [LABEL_AUTO_RESERVE]: 'true' } }), req()), { steps: [], skip: 'already labelled for auto reservation' });
});

test("reserve refuses someone else's reservation unless --force, and names the holder", (t) => {
  const held = disk('d-disk1', { desired: { state: 'Reserved', owner: 'team-web' } });
  const e1 = t.throws(() => planReserve(held, req({ owner: 'team-db' })), {
    instanceOf: PluginError,
    message: 'd-disk1 is already reserved by team-web; release it first, or pass --force to take it over',
  });
  t.is(e1.exitCode, EXIT.conflict);
  t.like(planReserve(held, req({ owner: 'team-db', force: true })), { verb: 'reserved for team-db' });
  t.throws(() => planReserve(held, req()), { message: /^d-disk1 is reserved by team-web; the auto-reserve label would have no effect/ });
  t.throws(() => planReserve(disk('d-disk1', { desired: { state: 'Reserved' } }), req({ owner: 'x' })), { message: /already reserved by a manual reservation with no owner/ });
  // The label policy's own reservation (owner auto) is no one else's for the label path.
  t.like(planReserve(disk('d-disk1', { desired: { state: 'Reserved', owner: 'auto' } }), req()), { verb: 'reserved (auto-reserve label set)' });
});

test('a field git owns is not taken over without --force-conflicts, and the message points to gitops', (t) => {
  const e = t.throws(() => planReserve(disk('d-disk1', { managed: [gitOwnsDesired] }), req({ owner: 'team-db' })), {
    instanceOf: PluginError,
    message: /^spec\.desired of d-disk1 is managed from git by argocd-controller/,
  });
  t.is(e.exitCode, EXIT.conflict);
  t.like(planReserve(disk('d-disk1', { managed: [gitOwnsDesired] }), req({ owner: 'team-db', forceConflicts: true })), { verb: 'reserved for team-db' });
  t.throws(() => planReserve(disk('d-disk1', { managed: [gitOwnsLabel] }), req()), { message: new RegExp(`^label ${LABEL_AUTO_RESERVE} of d-disk1 is managed from git by kustomize-controller`) });
  // Taking an auto reservation over with --owner while git keeps its label would leave the two disagreeing.
  t.throws(() => planReserve(disk('d-disk1', { desired: { state: 'Reserved', owner: 'auto' }, managed: [gitOwnsLabel] }), req({ owner: 'team-db', force: true })), {
    message: new RegExp(`^the reservation \\(label ${LABEL_AUTO_RESERVE}\\) of d-disk1 is managed from git`),
  });
});

test('release is one JSON Patch that first tests the resourceVersion it was planned from', (t) => {
  const both = disk('d-disk1', { labels: { [LABEL_AUTO_RESERVE]: 'true' }, desired: { state: 'Reserved', owner: 'team-db' } });
  t.deepEqual(planRelease(both, req({ owner: 'team-db' })).steps, [
    {
      name: 'd-disk1',
      patch: [
        { op: 'test', path: '/metadata/resourceVersion', value: '42' },
        { op: 'remove', path: LABEL_PATH },
        { op: 'replace', path: '/spec/desired', value: { state: 'Available' } },
      ],
    },
  ]);
  t.is(planRelease(disk('d-disk1', { labels: { [LABEL_AUTO_RESERVE]: 'true' } }), req()).verb, 'released (auto-reserve label removed)');
  t.is(planRelease(disk('d-disk1', { desired: { state: 'Reserved', owner: 'team-db' } }), req({ owner: 'team-db' })).verb, 'released');
  t.like(planRelease(disk('d-disk1'), req()), { steps: [], skip: 'not reserved' });
  // The label policy's reservation is released through its label, not by rewriting spec.desired.
  t.like(planRelease(disk('d-disk1', { desired: { state: 'Reserved', owner: 'auto' } }), req()), { steps: [], skip: 'not reserved' });
});

test("release of someone else's reservation needs --force and says whose it was", (t) => {
  const held = disk('d-disk1', { desired: { state: 'Reserved', owner: 'team-web' } });
  t.throws(() => planRelease(held, req({ owner: 'team-db' })), { message: "d-disk1 is reserved by team-web, not team-db; pass --force to release someone else's reservation" });
  t.throws(() => planRelease(held, req()), { message: "d-disk1 is reserved by team-web; pass --force to release someone else's reservation" });
  t.is(planRelease(held, req({ force: true })).verb, 'released (it was reserved by team-web)');
  t.throws(() => planRelease(disk('d-disk1', { desired: { state: 'Reserved', owner: 'x' }, managed: [gitOwnsDesired] }), req({ owner: 'x' })), {
    message: /^spec\.desired of d-disk1 is managed from git/,
  });
  t.throws(() => planRelease(disk('d-disk1', { labels: { [LABEL_AUTO_RESERVE]: 'true' }, managed: [gitOwnsLabel] }), req()), { message: /is managed from git by kustomize-controller/ });
});

test("a claim's reservation is released only once the controller says its claim is gone (ClaimGone for this generation); otherwise the claim is to be deleted, --force or not", (t) => {
  const held = disk('d-disk1', { desired: { state: 'Reserved', owner: 'claim:team-a/db', ownerUID: 'u1' } });
  held.metadata.generation = 2;
  const refusal = {
    message:
      'd-disk1 is reserved for NodeDiskClaim team-a/db: release it by deleting the claim (kubectl delete ndc db -n team-a). Once the claim is gone the controller says ClaimGone on the NodeDisk (kubectl nodedisks status shows it), and it can be released here',
  };
  t.throws(() => planRelease(held, req()), refusal);
  t.throws(() => planRelease(held, req({ force: true })), refusal);
  const gone = (observedGeneration: number) => [
    { type: 'Accepted', status: 'True' as const, reason: 'ClaimGone', message: 'gone', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration },
  ];
  held.status = { ...held.status, conditions: gone(1) };
  t.throws(() => planRelease(held, req()), refusal, 'a ClaimGone of an older generation says nothing of this one');
  held.status = { ...held.status, conditions: gone(2) };
  // The gone claim's data is wiped first (the command's token), unless --keep-data (no token).
  const plan = planRelease(held, req({ claimWipe: 'w-1' }));
  t.is(plan.verb, 'released (it was reserved for NodeDiskClaim team-a/db, which is gone); its node agent wipes it before it is free again');
  t.deepEqual(plan.steps, [
    {
      name: 'd-disk1',
      patch: [
        { op: 'test', path: '/metadata/resourceVersion', value: '42' },
        { op: 'replace', path: '/spec/desired', value: { state: 'Available', wipe: 'w-1' } },
      ],
    },
  ]);
  const kept = planRelease(held, req());
  t.is(kept.verb, 'released (it was reserved for NodeDiskClaim team-a/db, which is gone); its data is kept (--keep-data)');
  t.deepEqual(kept.steps, [
    {
      name: 'd-disk1',
      patch: [
        { op: 'test', path: '/metadata/resourceVersion', value: '42' },
        { op: 'replace', path: '/spec/desired', value: { state: 'Available' } },
      ],
    },
  ]);
});

test('planEach plans every disk before anything is written: one refusal refuses all, none is not found', (t) => {
  const free = disk('d-disk1');
  const held = disk('d-disk2', { desired: { state: 'Reserved', owner: 'team-web' } });
  t.is(planEach([free, disk('d-disk3')], 'reserve', req({ owner: 'me' })).length, 2);
  t.throws(() => planEach([free, held], 'reserve', req({ owner: 'me' })), { message: /d-disk2 is already reserved by team-web/ });
  t.deepEqual(
    planEach([free, held], 'release', req({ force: true })).map((p) => p.skip ?? p.verb),
    ['not reserved', 'released (it was reserved by team-web)'],
  );
  const e = t.throws(() => planEach([], 'release', req()), { instanceOf: PluginError, message: 'no NodeDisk matches the selection' });
  t.is(e.exitCode, EXIT.notFound);
});

test('chooseFree takes the first free, usable disk by name; with none, every reason (by disk ID for --node)', (t) => {
  const disks = [disk('node-disk-node-a-disk3'), disk('node-disk-node-a-disk2', { bytes: 0 }), disk('node-disk-node-a-disk1', { desired: { state: 'Reserved', owner: 'team-db' } })];
  t.is(chooseFree(disks, { node: 'node-a' }).metadata.name, 'node-disk-node-a-disk3');
  const none = disks.slice(1).concat(disk('node-disk-node-a-disk4', { deleting: true }), disk('node-disk-node-a-disk5', { labels: { [LABEL_AUTO_RESERVE]: 'true' } }));
  const e = t.throws(() => chooseFree(none, { node: 'node-a' }), {
    instanceOf: PluginError,
    message: `node node-a has no free disk: disk1 is reserved by team-db, disk2 is an empty (0-byte) image, disk4 is being deleted, disk5 is labelled ${LABEL_AUTO_RESERVE}=true (being reserved by the label policy)`,
  });
  t.is(e.exitCode, EXIT.conflict);
  t.throws(() => chooseFree(none.slice(0, 2), { node: 'node-a', selector: 'x=y' }), {
    message: 'none of the 2 selected disks is free: node-disk-node-a-disk1 is reserved by team-db, node-disk-node-a-disk2 is an empty (0-byte) image',
  });
  t.is(t.throws(() => chooseFree([], { node: 'node-a' }), { instanceOf: PluginError, message: 'no NodeDisk matches the selection' }).exitCode, EXIT.notFound);
});

test('validateOwner refuses what the CRD would refuse, and the label policy’s own owner', (t) => {
  t.notThrows(() => validateOwner(undefined));
  t.notThrows(() => validateOwner('team-db@example.com/x'));
  t.throws(() => validateOwner('auto'), { message: /--owner auto is reserved for the label policy/ });
  t.throws(() => validateOwner('-team'), { message: /is not a valid owner/ });
  t.throws(() => validateOwner('a'.repeat(254)), { message: /at most 253 characters/ });
});
