// The CSI driver's share of the ownership split, enforced by the API server (kustomize/policies
// csi_controller_policy.yaml, csi_controller_leases_policy.yaml, pv_policy.yaml and the RBAC of
// kustomize/rbac/csi_controller_role.yaml), tried as an attacker would: the CSI controller's own token
// reaching past what it is for, and everyone else (an editor, the controller, a cluster admin, an account
// named like the CSI controller) reaching for a PersistentVolume's disk. Each rule is shown both ways.
import test from 'ava';
import { API_VERSION, FIELD_MANAGER, FINALIZER, KIND, LABEL_AUTO_RESERVE, PV_OWNER_PREFIX } from '../../api/constants.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { Allocator } from '../../controller/allocator.ts';
import type { ControlPlane } from '../../hack/controlplane/controlplane.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { Informer } from '../../lib/kube/informer.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { denied, heartbeatLease, nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const NS = 'node-disks-system';
const CSI_USER = `system:serviceaccount:${NS}:node-disks-csi-controller`;
const LEASES = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`;
/** The provisioner's leader-election Lease: the driver's name, its dots made dashes. */
const LEADER_LEASE = 'nodedisks-localtest-example-com';
const meta = (name: string, resourceVersion?: string) => ({ apiVersion: API_VERSION, kind: KIND, metadata: { name, ...(resourceVersion ? { resourceVersion } : {}) } }) as const;
const asCsi = { fieldManager: FIELD_MANAGER.csiController, force: true } as const;
const asController = { fieldManager: FIELD_MANAGER.controller, force: true } as const;
const asPerson = { fieldManager: FIELD_MANAGER.plugin, force: true } as const;
const forPV = (pv: string, uid: string) => ({ desired: { state: 'Reserved' as const, owner: `${PV_OWNER_PREFIX}${pv}`, ownerUID: uid } });

test.serial.before(async () => {
  const cp = controlPlane();
  await cp.kubectl(cp.admin(), ['create', 'clusterrolebinding', 'eddie-nodedisks-editor', '--clusterrole=nodedisks-editor', '--user=eddie']);
});

/** Disks of `node`, created and reported free by its agent; their names. */
async function freeDisks(cp: ControlPlane, node: string, ...ids: string[]): Promise<string[]> {
  const agent = nodeDisksFor(await cp.agent(node));
  const names: string[] = [];
  for (const id of ids) {
    const d = await agent.create(newNodeDisk(node, id), { fieldManager: FIELD_MANAGER.agent });
    const name = d.metadata.name!;
    await agent.applyStatus({ ...meta(name), status: { node: { phase: 'Available', capacityBytes: 64 << 20 } } }, { fieldManager: FIELD_MANAGER.agent });
    names.push(name);
  }
  return names;
}

/** The agent reports a wipe done (status.node.wipedFor), as it does once the image is zeroed. */
async function agentWiped(cp: ControlPlane, node: string, name: string, token: string): Promise<void> {
  await nodeDisksFor(await cp.agent(node)).applyStatus(
    { ...meta(name), status: { node: { phase: 'Available', capacityBytes: 64 << 20, wipedFor: token } } },
    { fieldManager: FIELD_MANAGER.agent },
  );
}

/** kubectl as `user` with every RBAC right (group system:masters): what is refused then is the admission policies' doing. */
async function kubectlAs(cp: ControlPlane, user: string, args: string[], stdin?: string): Promise<string> {
  return await cp.kubectl(cp.admin(), ['--as', user, '--as-group', 'system:masters', ...args], stdin);
}
async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as Error).message;
  }
  return 'allowed';
}

test('the CSI controller reserves a free disk for a PersistentVolume and releases it with a wipe; a retried write passes; nothing reserves it before the wipe is done', async (t) => {
  const cp = controlPlane();
  const csi = nodeDisksFor(await cp.csiController());
  const [name] = await freeDisks(cp, 'csi-node-a', 'disk1');
  const free = await csi.get(name!);
  const reserved = await csi.apply({ ...meta(name!, free.metadata.resourceVersion), spec: forPV('pvc-1111', '1111') }, asCsi);
  t.deepEqual(reserved.spec.desired, { state: 'Reserved', owner: 'pv:pvc-1111', ownerUID: '1111' });
  t.deepEqual((await csi.apply({ ...meta(name!), spec: forPV('pvc-1111', '1111') }, asCsi)).spec.desired, reserved.spec.desired, 'a retried CreateVolume');

  const released = await csi.apply({ ...meta(name!), spec: { desired: { state: 'Available', wipe: 'pv-1111' } } }, asCsi);
  t.deepEqual(released.spec.desired, { state: 'Available', wipe: 'pv-1111' });
  t.deepEqual((await csi.apply({ ...meta(name!), spec: { desired: { state: 'Available', wipe: 'pv-1111' } } }, asCsi)).spec.desired, released.spec.desired, 'a retried DeleteVolume');

  // Until the agent reports the wipe, the disk goes to no volume (the PV's bytes are on it).
  const early = await denied(t, csi.apply({ ...meta(name!), spec: forPV('pvc-2222', '2222') }, asCsi));
  t.is(early.statusCode, 403);
  t.regex(early.message, /is being wiped \(wipe request pv-1111\)/);
  await agentWiped(cp, 'csi-node-a', name!, 'pv-1111');
  const next = await csi.apply({ ...meta(name!), spec: forPV('pvc-2222', '2222') }, asCsi);
  t.deepEqual(next.spec.desired, { state: 'Reserved', owner: 'pv:pvc-2222', ownerUID: '2222' }, 'the request done is history: the next reservation drops it');

  // A release whose token the agent reported done already would free the disk unwiped.
  const stale = await denied(t, csi.apply({ ...meta(name!), spec: { desired: { state: 'Available', wipe: 'pv-1111' } } }, asCsi));
  t.regex(
    stale.message,
    /ValidatingAdmissionPolicy 'nodedisks-csi-controller\.localtest\.example\.com'.*wipe request pv-1111 is one its node agent reported done already \(status\.node\.wipedFor\); a release asks for a new one/,
  );
  const bare = await denied(t, csi.apply({ ...meta(name!), spec: { desired: { state: 'Available' } } }, asCsi));
  t.regex(bare.message, /a PersistentVolume's disk is released with a wipe request \(spec\.desired\.wipe\), so the next owner never reads its bytes/);
  t.deepEqual((await csi.get(name!)).spec.desired, next.spec.desired);
  t.deepEqual((await csi.apply({ ...meta(name!), spec: { desired: { state: 'Available', wipe: 'pv-2222' } } }, asCsi)).spec.desired, { state: 'Available', wipe: 'pv-2222' });
});

test("the allocator's own writes (controller/allocator.ts, with the CSI controller's token and field manager) pass: a reservation for a PV, its release with a wipe", async (t) => {
  const cp = controlPlane();
  const disks = nodeDisksFor(await cp.csiController());
  const [name] = await freeDisks(cp, 'csi-node-alloc', 'disk1');
  const informer = new Informer<NodeDisk>({ list: (o) => disks.list(o), watch: (o, s) => disks.watch(o, s) }, {}, { log: createLogger('test', { level: 'warn' }) });
  const stop = new AbortController();
  const running = informer.run(stop.signal);
  try {
    await eventually('the informer synced', async () => informer.hasSynced && informer.cache.has(name!), 30_000);
    const allocator = new Allocator({ disks, diskInformer: informer, fieldManager: FIELD_MANAGER.csiController, log: createLogger('test', { level: 'warn' }) });
    const out = await allocator.reserve({
      holder: { owner: `${PV_OWNER_PREFIX}pvc-3333`, ownerUID: '3333' },
      candidates: () => [informer.cache.get(name!)!],
      fits: () => true,
    });
    t.is(out.kind, 'reserved');
    const disk = out.kind === 'reserved' ? out.disk : undefined;
    t.deepEqual(disk?.spec.desired, { state: 'Reserved', owner: 'pv:pvc-3333', ownerUID: '3333' });
    t.true(await allocator.release(disk!, { wipe: 'pv-3333', why: 'DeleteVolume' }));
    t.deepEqual((await disks.get(name!)).spec.desired, { state: 'Available', wipe: 'pv-3333' });
  } finally {
    stop.abort();
    await running;
  }
});

test('the CSI controller reserves only a free, unlabelled disk, only for a PersistentVolume with its claim UID, and takes no reservation of anyone else', async (t) => {
  const cp = controlPlane();
  const csi = nodeDisksFor(await cp.csiController());
  const [free, labelled, people, auto, claim, pv] = await freeDisks(cp, 'csi-node-b', 'disk1', 'disk2', 'disk3', 'disk4', 'disk5', 'disk6');
  const admin = nodeDisksFor(cp.admin());
  await admin.mergePatch(labelled!, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, { fieldManager: FIELD_MANAGER.plugin });
  await nodeDisksFor(cp.admin()).apply({ ...meta(people!), spec: { desired: { state: 'Reserved', owner: 'team-db' } } }, asPerson);
  await admin.mergePatch(auto!, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, { fieldManager: FIELD_MANAGER.plugin });
  await nodeDisksFor(await cp.controller()).apply({ ...meta(auto!), spec: { desired: { state: 'Reserved', owner: 'auto' } } }, asController);
  await nodeDisksFor(await cp.controller()).apply({ ...meta(claim!), spec: { desired: { state: 'Reserved', owner: 'claim:team-a/db', ownerUID: 'claim-uid' } } }, asController);
  await csi.apply({ ...meta(pv!), spec: forPV('pvc-4444', '4444') }, asCsi);

  const tries: [string, string, object, RegExp][] = [
    ['a person as owner', free!, { desired: { state: 'Reserved', owner: 'team-x' } }, /to Reserved for owner team-x: it reserves for PersistentVolumes only/],
    ['a claim as owner', free!, { desired: { state: 'Reserved', owner: 'claim:team-a/other', ownerUID: 'u' } }, /only the controller reserves a NodeDisk for a claim|PersistentVolumes only/],
    ['a PV without the claim UID', free!, { desired: { state: 'Reserved', owner: 'pv:pvc-5555' } }, /a reservation for a PersistentVolume carries the claim's UID/],
    ['a disk labelled for the label policy', labelled!, forPV('pvc-5555', '5555'), /labelled localtest\.example\.com\/auto-reserve=true is the label policy's/],
    ["a person's reservation", people!, forPV('pvc-5555', '5555'), /from Reserved for owner team-db to Reserved for owner pv:pvc-5555: a reservation of another owner is not the driver's/],
    ["the label policy's reservation", auto!, forPV('pvc-5555', '5555'), /from Reserved for owner auto .*another owner is not the driver's/],
    ["a claim's reservation", claim!, forPV('pvc-5555', '5555'), /reserved for NodeDiskClaim team-a\/db: only the controller changes that reservation|another owner is not the driver's/],
    ["a person's disk released", people!, { desired: { state: 'Available', owner: '', ownerUID: '', wipe: 'x1' } }, /another owner is not the driver's/],
    ["a claim's disk released", claim!, { desired: { state: 'Available', owner: '', ownerUID: '', wipe: 'x2' } }, /NodeDiskClaim team-a\/db|another owner is not the driver's/],
    ['a PV disk handed to another PV', pv!, forPV('pvc-6666', '6666'), /never handed to another volume nor changed/],
    ["a PV's claim UID changed", pv!, forPV('pvc-4444', 'other'), /never handed to another volume nor changed/],
  ];
  for (const [what, name, spec, message] of tries) {
    const err = await denied(t, csi.apply({ ...meta(name), spec }, asCsi));
    t.is(err.statusCode, 403, what);
    t.regex(err.message, message, what);
  }
  t.deepEqual(
    await Promise.all([free, people, auto, claim, pv].map(async (n) => (await admin.get(n!)).spec.desired)),
    [
      { state: 'Available' },
      { state: 'Reserved', owner: 'team-db' },
      { state: 'Reserved', owner: 'auto' },
      { state: 'Reserved', owner: 'claim:team-a/db', ownerUID: 'claim-uid' },
      { state: 'Reserved', owner: 'pv:pvc-4444', ownerUID: '4444' },
    ],
    'every disk as it was',
  );
});

test('the CSI controller writes nothing of a NodeDisk but spec.desired: no labels, annotations or finalizers (its policy), no status, create or delete (RBAC, and its policy with every RBAC right)', async (t) => {
  const cp = controlPlane();
  const csi = nodeDisksFor(await cp.csiController());
  const [name, other] = await freeDisks(cp, 'csi-node-c', 'disk1', 'disk2');
  await csi.apply({ ...meta(name!), spec: forPV('pvc-7777', '7777') }, asCsi);
  for (const [what, patch, message] of [
    ['a label', { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, /the CSI controller may not change labels/],
    ['an annotation', { metadata: { annotations: { 'example.com/x': 'y' } } }, /the CSI controller may not change annotations/],
    ['a finalizer', { metadata: { finalizers: [FINALIZER] } }, /the CSI controller may not change finalizers/],
  ] as const) {
    const err = await denied(t, csi.mergePatch(name!, patch, { fieldManager: FIELD_MANAGER.csiController }));
    t.is(err.statusCode, 403, what);
    t.regex(err.message, message, what);
  }
  // RBAC first: its role has no status, create or delete of NodeDisks.
  const status = await denied(t, csi.applyStatus({ ...meta(name!), status: { node: { phase: 'Missing' } } }, asCsi));
  t.regex(status.message, /cannot patch resource "nodedisks\/status"/);
  t.regex((await denied(t, csi.create(newNodeDisk('csi-node-c', 'disk3'), { fieldManager: FIELD_MANAGER.csiController }))).message, /cannot create resource "nodedisks"/);
  t.regex((await denied(t, csi.delete(other!))).message, /cannot delete resource "nodedisks"/);
  // And with every RBAC right (as if its role were widened), the policy refuses the same.
  const statusPatch = JSON.stringify({ status: { node: { phase: 'Missing' } } });
  t.regex(
    await refusal(kubectlAs(cp, CSI_USER, ['patch', 'nodedisk', name!, '--subresource=status', '--type=merge', '-p', statusPatch])),
    /the CSI controller may not write the status of a NodeDisk/,
  );
  t.regex(await refusal(kubectlAs(cp, CSI_USER, ['create', '-f', '-'], JSON.stringify(newNodeDisk('csi-node-c', 'disk4')))), /the CSI controller may not create NodeDisks/);
  t.regex(await refusal(kubectlAs(cp, CSI_USER, ['delete', 'nodedisk', other!])), /the CSI controller may not delete NodeDisk .*it never deletes one/);
  t.regex(await refusal(kubectlAs(cp, CSI_USER, ['delete', 'nodedisk', name!])), /the CSI controller may not delete NodeDisk/);
  const admin = nodeDisksFor(cp.admin());
  t.deepEqual((await admin.get(name!)).metadata.labels, newNodeDisk('csi-node-c', 'disk1').metadata.labels);
  t.is((await admin.get(name!)).status?.node?.phase, 'Available');
  await admin.get(other!);
});

test("the CSI controller renews its provisioner's leader Lease and no other: not an agent's heartbeat, nor one named or labelled as one, nor any in another namespace", async (t) => {
  const cp = controlPlane();
  const csi = restFor(await cp.csiController());
  type Lease = { metadata: { name: string; resourceVersion?: string; labels?: Record<string, string> }; spec: { holderIdentity?: string; leaseDurationSeconds?: number } };
  const own = await csi.request<Lease>('POST', LEASES, { body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: LEADER_LEASE }, spec: { holderIdentity: 'csi-pod-a' } } });
  const renewed = await csi.request<Lease>('PUT', `${LEASES}/${LEADER_LEASE}`, { body: { ...own, spec: { ...own.spec, leaseDurationSeconds: 15 } } });
  t.is(renewed.spec.leaseDurationSeconds, 15);
  t.is((await csi.request<Lease>('GET', `${LEASES}/${LEADER_LEASE}`)).spec.holderIdentity, 'csi-pod-a');

  const forged = await denied(t, csi.request('POST', LEASES, { body: heartbeatLease('csi-node-gone') }));
  t.regex(
    forged.message,
    /ValidatingAdmissionPolicy 'nodedisks-csi-controller-leases\.localtest\.example\.com'.*may write only its provisioner's leader-election Lease nodedisks-localtest-example-com, not node-disks-agent-csi-node-gone/,
  );
  const other = await denied(t, csi.request('POST', LEASES, { body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'something-else' }, spec: {} } }));
  t.regex(other.message, /may write only its provisioner's leader-election Lease/);
  const live = await restFor(await cp.agent('csi-node-hb')).request<Lease>('POST', LEASES, { body: heartbeatLease('csi-node-hb') });
  const renewAgent = await denied(t, csi.request('PUT', `${LEASES}/${live.metadata.name}`, { body: { ...heartbeatLease('csi-node-hb'), metadata: live.metadata } }));
  t.regex(renewAgent.message, /cannot update resource "leases"/, "RBAC: get and update only of the leader Lease's name");
  const labelled = await denied(
    t,
    csi.request('PUT', `${LEASES}/${LEADER_LEASE}`, { body: { ...renewed, metadata: { ...renewed.metadata, labels: { 'localtest.example.com/agent-heartbeat': 'true' } } } }),
  );
  t.regex(labelled.message, /heartbeat Leases are the agents' own/);
  const elsewhere = await denied(
    t,
    csi.request('POST', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases', {
      body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: LEADER_LEASE }, spec: {} },
    }),
  );
  t.regex(elsewhere.message, /cannot create resource "leases" .*in the namespace "kube-system"/);
});

test("people, the controller and cluster admins can neither release, change nor delete a PersistentVolume's disk, nor reserve one for a PersistentVolume", async (t) => {
  const cp = controlPlane();
  const csi = nodeDisksFor(await cp.csiController());
  const [held, free] = await freeDisks(cp, 'csi-node-d', 'disk1', 'disk2');
  const desired = (await csi.apply({ ...meta(held!), spec: forPV('pvc-8888', '8888') }, asCsi)).spec.desired;
  const pvRule =
    /ValidatingAdmissionPolicy 'nodedisks-pv\.localtest\.example\.com'.*NodeDisk node-disk-csi-node-d-disk1 holds PersistentVolume pvc-8888: only the CSI driver changes that reservation/;
  const reserveRule = /ValidatingAdmissionPolicy 'nodedisks-pv\.localtest\.example\.com'.*only the CSI driver reserves a NodeDisk for a PersistentVolume \(owner pv:pvc-forged\)/;
  const patch = (d: object) => JSON.stringify({ spec: { desired: d } });

  // An editor (kubectl nodedisks release and reserve are such patches).
  for (const [what, d] of [
    ['release', { state: 'Available', owner: null, ownerUID: null }],
    ['release with a wipe', { state: 'Available', owner: null, ownerUID: null, wipe: 'eddie-1' }],
    ['take it over', { owner: 'eddie' }],
    ['hand it to another PV', { owner: 'pv:pvc-9999', ownerUID: '9999' }],
    ['ask for a wipe under the pod', { wipe: 'eddie-2' }],
  ] as const) {
    t.regex(await refusal(cp.kubectl(cp.admin(), ['--as', 'eddie', 'patch', 'nodedisk', held!, '--type=merge', '-p', patch(d)])), pvRule, `editor: ${what}`);
  }
  t.regex(
    await refusal(cp.kubectl(cp.admin(), ['--as', 'eddie', 'patch', 'nodedisk', free!, '--type=merge', '-p', patch({ state: 'Reserved', owner: 'pv:pvc-forged', ownerUID: 'f' })])),
    reserveRule,
  );

  // The controller: its own policy allows it neither, and the PV policy holds it too.
  const controller = nodeDisksFor(await cp.controller());
  // (owner and ownerUID emptied in the same apply: they are the CSI controller's fields, and an Available
  // disk with an owner is refused by the CRD's own rule before any policy sees it.)
  const release = await denied(t, controller.apply({ ...meta(held!), spec: { desired: { state: 'Available', owner: '', ownerUID: '' } } }, asController));
  t.regex(release.message, /nodedisks-(controller|pv)\.localtest\.example\.com/);
  const forClaim = await denied(t, controller.apply({ ...meta(held!), spec: { desired: { state: 'Reserved', owner: 'claim:team-a/db', ownerUID: 'c' } } }, asController));
  t.regex(forClaim.message, /nodedisks-(controller|pv)\.localtest\.example\.com/);
  const forPv = await denied(t, controller.apply({ ...meta(free!), spec: forPV('pvc-forged', 'f') }, asController));
  t.regex(forPv.message, /nodedisks-(controller|pv)\.localtest\.example\.com/);

  // A cluster admin (system:masters): the policies hold for everyone.
  const admin = nodeDisksFor(cp.admin());
  t.regex((await denied(t, admin.apply({ ...meta(held!), spec: { desired: { state: 'Available', owner: '', ownerUID: '', wipe: 'admin-1' } } }, asPerson))).message, pvRule);
  const deleted = await denied(t, admin.delete(held!));
  t.regex(deleted.message, /NodeDisk node-disk-csi-node-d-disk1 holds PersistentVolume pvc-8888: a disk is not deleted while a volume holds it/);
  t.regex((await denied(t, admin.apply({ ...meta(free!), spec: forPV('pvc-forged', 'f') }, asPerson))).message, reserveRule);
  const created = newNodeDisk('csi-node-d', 'disk3');
  created.spec.desired = { state: 'Reserved', owner: 'pv:pvc-forged', ownerUID: 'f' };
  t.regex((await denied(t, admin.create(created, { fieldManager: FIELD_MANAGER.agent }))).message, reserveRule);

  // What they may still do: labels (no effect on a PV's reservation), and a free disk for a person.
  await admin.mergePatch(held!, { metadata: { labels: { 'example.com/team': 'db' } } }, { fieldManager: FIELD_MANAGER.plugin });
  await cp.kubectl(cp.admin(), ['--as', 'eddie', 'patch', 'nodedisk', free!, '--type=merge', '-p', patch({ state: 'Reserved', owner: 'eddie' })]);
  t.deepEqual((await admin.get(held!)).spec.desired, desired, 'the PV still has its disk');
  t.is((await admin.get(free!)).spec.desired?.owner, 'eddie');
});

test('a ServiceAccount named like the CSI controller in another namespace, a NodeDisk editor by a group binding, is held to the rules for people', async (t) => {
  const cp = controlPlane();
  const impostor = await cp.namespacedUser('intruders-csi', 'node-disks-csi-controller', 'view');
  t.is(await cp.kubectl(impostor, ['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}']), 'system:serviceaccount:intruders-csi:node-disks-csi-controller');
  await cp.kubectl(cp.admin(), ['create', 'clusterrolebinding', 'intruders-csi-editors', '--clusterrole=nodedisks-editor', '--group=system:serviceaccounts:intruders-csi']);
  const [held, free, own] = await freeDisks(cp, 'csi-node-e', 'disk1', 'disk2', 'disk3');
  await nodeDisksFor(await cp.csiController()).apply({ ...meta(held!), spec: forPV('pvc-aaaa', 'aaaa') }, asCsi);
  const client = nodeDisksFor(impostor);
  const release = await denied(t, client.apply({ ...meta(held!), spec: { desired: { state: 'Available', wipe: 'x' } } }, asCsi));
  t.regex(release.message, /nodedisks-pv\.localtest\.example\.com.*holds PersistentVolume pvc-aaaa: only the CSI driver changes that reservation/);
  const take = await denied(t, client.apply({ ...meta(free!), spec: forPV('pvc-bbbb', 'bbbb') }, asCsi));
  t.regex(take.message, /nodedisks-pv\.localtest\.example\.com.*only the CSI driver reserves a NodeDisk for a PersistentVolume/);
  t.is(
    (await client.apply({ ...meta(own!), spec: { desired: { state: 'Reserved', owner: 'x' } } }, asPerson)).spec.desired?.owner,
    'x',
    'an editor: it may reserve a free disk for an owner of its own',
  );
  t.deepEqual((await nodeDisksFor(cp.admin()).get(held!)).spec.desired, { state: 'Reserved', owner: 'pv:pvc-aaaa', ownerUID: 'aaaa' });
});
