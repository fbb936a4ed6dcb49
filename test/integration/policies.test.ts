// The ownership split, enforced by the API server itself (kustomize/policies + kustomize/rbac), with the
// identities the programs have in production: node-bound agent tokens, the controller's ServiceAccount,
// and people with the viewer and editor roles. Each rule is shown both ways.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import test from 'ava';
import { API_VERSION, FIELD_MANAGER, FINALIZER, KIND, LABEL_AUTO_RESERVE, LABEL_DISK, LABEL_MEDIA, LABEL_NODE, RECOVERED_OWNER } from '../../api/constants.ts';
import { HEARTBEAT_LABEL_VALUE, LABEL_HEARTBEAT } from '../../api/heartbeat-lease.ts';
import { labelValue } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { impostorIsHeldToPeoplesRules } from '../harness/impostor.ts';
import { denied, heartbeatLease, nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const meta = (name: string) => ({ apiVersion: API_VERSION, kind: KIND, metadata: { name } }) as const;

test.serial.before(async () => {
  const cp = controlPlane();
  // People: bound to the viewer and editor roles; tests act as them through impersonation.
  for (const [user, role] of [
    ['vera', 'nodedisks-viewer'],
    ['eddie', 'nodedisks-editor'],
  ] as const) {
    await cp.kubectl(cp.admin(), ['create', 'clusterrolebinding', `${user}-${role}`, `--clusterrole=${role}`, `--user=${user}`]);
  }
});

test('the agent of node A creates and reports its own disks', async (t) => {
  const agent = nodeDisksFor(await controlPlane().agent('node-a'));
  const d = newNodeDisk('node-a', 'disk1');
  await agent.create(d, { fieldManager: FIELD_MANAGER.agent });
  const st = await agent.applyStatus({ ...meta(d.metadata.name!), status: { node: { phase: 'Available', capacityBytes: 1 } } }, { fieldManager: FIELD_MANAGER.agent });
  t.is(st.status?.node?.phase, 'Available');
});

test('the agent of node A cannot create or report disks of node B', async (t) => {
  const cp = controlPlane();
  const agentA = nodeDisksFor(await cp.agent('node-a2'));
  const create = await denied(t, agentA.create(newNodeDisk('node-b2', 'disk1'), { fieldManager: FIELD_MANAGER.agent }));
  t.is(create.statusCode, 403);
  t.regex(create.message, /ValidatingAdmissionPolicy 'nodedisks-agent\.localtest\.example\.com'.*the agent of node node-a2 may not write NodeDisks of node node-b2/);
  const b = newNodeDisk('node-b2', 'disk2');
  await nodeDisksFor(await cp.agent('node-b2')).create(b, { fieldManager: FIELD_MANAGER.agent });
  const status = await denied(t, agentA.applyStatus({ ...meta(b.metadata.name!), status: { node: { phase: 'Missing' } } }, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(status.message, /may not write NodeDisks of node node-b2/);
});

test('the agent cannot reserve: not at creation, and the policy keeps it off spec.desired', async (t) => {
  const agent = nodeDisksFor(await controlPlane().agent('node-c'));
  const d = newNodeDisk('node-c', 'disk1');
  d.spec.desired = { state: 'Reserved', owner: 'agent' };
  const err = await denied(t, agent.create(d, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(err.message, /the agent may not create a NodeDisk with a reservation/);
  const ok = newNodeDisk('node-c', 'disk2');
  await agent.create(ok, { fieldManager: FIELD_MANAGER.agent });
  // It may patch the NodeDisk (for its finalizer), but the policy keeps it off spec.desired, forced or not.
  const apply = await denied(t, agent.apply({ ...meta(ok.metadata.name!), spec: { desired: { state: 'Reserved', owner: 'x' } } }, { fieldManager: FIELD_MANAGER.agent, force: true }));
  t.is(apply.statusCode, 403, apply.message);
  t.regex(apply.message, /the agent may not change spec\.desired/);
  const patch = await denied(t, agent.mergePatch(ok.metadata.name!, { spec: { desired: { state: 'Reserved', owner: 'x' } } }, { fieldManager: FIELD_MANAGER.agent }));
  t.is(patch.statusCode, 403, patch.message);
  t.regex(patch.message, /the agent may not change spec\.desired/);
});

// ADR 12: the agent patches the NodeDisk itself, but only its finalizer.
test('on the NodeDisk itself the agent may add and remove its finalizer, and change nothing else', async (t) => {
  const cp = controlPlane();
  const agent = nodeDisksFor(await cp.agent('node-fin'));
  const d = await agent.create(newNodeDisk('node-fin', 'disk1'), { fieldManager: FIELD_MANAGER.agent });
  const name = d.metadata.name!;
  const added = await agent.mergePatch(name, { metadata: { finalizers: [FINALIZER] } }, { fieldManager: FIELD_MANAGER.agent });
  t.deepEqual(added.metadata.finalizers, [FINALIZER]);
  const other = await denied(t, agent.mergePatch(name, { metadata: { finalizers: [FINALIZER, 'example.com/other'] } }, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(other.message, /on the NodeDisk itself the agent may only add or remove its finalizer/);
  const annotation = await denied(t, agent.mergePatch(name, { metadata: { annotations: { a: 'b' } } }, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(annotation.message, /on the NodeDisk itself the agent may only add or remove its finalizer/);
  const label = await denied(t, agent.mergePatch(name, { metadata: { labels: { 'localtest.example.com/auto-reserve': 'true' } } }, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(label.message, /may set only the localtest\.example\.com\/node and localtest\.example\.com\/disk labels/);
  // Someone else's finalizer stays: the agent removes only its own.
  await nodeDisksFor(cp.admin()).mergePatch(name, { metadata: { finalizers: [FINALIZER, 'example.com/other'] } }, { fieldManager: 'test' });
  const steal = await denied(t, agent.mergePatch(name, { metadata: { finalizers: null } }, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(steal.message, /may only add or remove its finalizer/);
  const removed = await agent.mergePatch(name, { metadata: { finalizers: ['example.com/other'] } }, { fieldManager: FIELD_MANAGER.agent });
  t.deepEqual(removed.metadata.finalizers, ['example.com/other']);
  // Not on another node's NodeDisk.
  const b = await nodeDisksFor(await cp.agent('node-fin-b')).create(newNodeDisk('node-fin-b', 'disk1'), { fieldManager: FIELD_MANAGER.agent });
  const foreign = await denied(t, agent.mergePatch(b.metadata.name!, { metadata: { finalizers: [FINALIZER] } }, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(foreign.message, /the agent of node node-fin may not write NodeDisks of node node-fin-b/);
});

test('the agent creates a reserved NodeDisk only to recover a reservation: owner recovered-from-node, with its finalizer', async (t) => {
  const agent = nodeDisksFor(await controlPlane().agent('node-rec'));
  const recovered = (disk: string, owner: string, finalizers: string[]) => {
    const d = newNodeDisk('node-rec', disk);
    d.spec.desired = { state: 'Reserved', owner };
    d.metadata.finalizers = finalizers;
    return d;
  };
  const ok = await agent.create(recovered('disk1', RECOVERED_OWNER, [FINALIZER]), { fieldManager: FIELD_MANAGER.agent });
  t.deepEqual(ok.spec.desired, { state: 'Reserved', owner: RECOVERED_OWNER });
  for (const [disk, owner, finalizers] of [
    ['disk2', RECOVERED_OWNER, []],
    ['disk3', 'team-db', [FINALIZER]],
    ['disk4', RECOVERED_OWNER, [FINALIZER, 'example.com/other']],
  ] as const) {
    const err = await denied(t, agent.create(recovered(disk, owner, [...finalizers]), { fieldManager: FIELD_MANAGER.agent }));
    t.regex(err.message, /the agent may not create a NodeDisk with a reservation|may set no finalizer but/, disk);
  }
  const plain = newNodeDisk('node-rec', 'disk5');
  plain.metadata.finalizers = ['example.com/other'];
  t.regex((await denied(t, agent.create(plain, { fieldManager: FIELD_MANAGER.agent }))).message, /the agent may set no finalizer but localtest\.example\.com\/reservation-protection/);
});

test('the agent cannot set other labels nor touch status.controller', async (t) => {
  const cp = controlPlane();
  const agent = nodeDisksFor(await cp.agent('node-d'));
  const d = newNodeDisk('node-d', 'disk1');
  d.metadata.labels = { ...d.metadata.labels, 'localtest.example.com/auto-reserve': 'true' };
  t.regex((await denied(t, agent.create(d, { fieldManager: FIELD_MANAGER.agent }))).message, /may set only the localtest\.example\.com\/node and localtest\.example\.com\/disk labels/);
  const ok = newNodeDisk('node-d', 'disk2');
  await agent.create(ok, { fieldManager: FIELD_MANAGER.agent });
  const err = await denied(t, agent.applyStatus({ ...meta(ok.metadata.name!), status: { controller: { accepted: true } } }, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(err.message, /the agent may not change the controller.s status: .*status\.controller are written by the controller only/);
});

test("the agent cannot write the controller's conditions or status.observedGeneration, and still reports beside them", async (t) => {
  const cp = controlPlane();
  const agent = nodeDisksFor(await cp.agent('node-d2'));
  const d = newNodeDisk('node-d2', 'disk1');
  const name = d.metadata.name!;
  await agent.create(d, { fieldManager: FIELD_MANAGER.agent });
  const ready = { type: 'Ready', status: 'True', reason: 'PhaseMatchesDesired', message: 'by the controller', lastTransitionTime: '2026-01-02T03:04:05Z', observedGeneration: 1 } as const;
  await nodeDisksFor(await cp.controller()).applyStatus({ ...meta(name), status: { observedGeneration: 1, conditions: [ready] } }, { fieldManager: FIELD_MANAGER.controller });
  const forged = { ...ready, type: 'Accepted', message: 'by the agent' } as const;
  const add = await denied(t, agent.applyStatus({ ...meta(name), status: { conditions: [forged] } }, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(add.message, /the agent may not change the controller's status: status\.conditions, status\.observedGeneration and status\.controller/);
  const change = await denied(t, agent.applyStatus({ ...meta(name), status: { conditions: [{ ...ready, status: 'False' }] } }, { fieldManager: FIELD_MANAGER.agent, force: true }));
  t.regex(change.message, /the agent may not change the controller's status/);
  const gen = await denied(t, agent.applyStatus({ ...meta(name), status: { observedGeneration: 7 } }, { fieldManager: FIELD_MANAGER.agent, force: true }));
  t.regex(gen.message, /the agent may not change the controller's status/);
  const reported = await agent.applyStatus({ ...meta(name), status: { node: { phase: 'Available', capacityBytes: 1 } } }, { fieldManager: FIELD_MANAGER.agent });
  t.deepEqual(reported.status?.conditions, [ready], "the agent's own report leaves the conditions as the controller wrote them");
  t.is(reported.status?.observedGeneration, 1);
});

test('a ServiceAccount token that is not node-bound is refused for the agent', async (t) => {
  const cp = controlPlane();
  const out = await cp.kubectl(cp.admin(), ['create', 'token', 'node-disks-agent', '-n', 'node-disks-system']);
  const rest = (await import('../../lib/kube/rest.ts')).RestClient;
  const { loadKubeConfig } = await import('../../lib/kube/kubeconfig.ts');
  const access = loadKubeConfig({ kubeconfig: cp.admin().kubeconfig, token: out.trim() });
  const { NodeDiskClient } = await import('../../api/client.ts');
  const unbound = new NodeDiskClient(new rest(access));
  const err = await denied(t, unbound.create(newNodeDisk('node-e', 'disk1'), { fieldManager: FIELD_MANAGER.agent }));
  t.regex(err.message, /the agent's token is not bound to a Node/);
});

test('the controller writes spec.desired and status.controller, never status.node, labels, or new NodeDisks', async (t) => {
  const cp = controlPlane();
  const d = newNodeDisk('node-f', 'disk1');
  const name = d.metadata.name!;
  const agent = nodeDisksFor(await cp.agent('node-f'));
  await agent.create(d, { fieldManager: FIELD_MANAGER.agent });
  await agent.applyStatus({ ...meta(name), status: { node: { phase: 'Available', capacityBytes: 5 } } }, { fieldManager: FIELD_MANAGER.agent });
  const controller = nodeDisksFor(await cp.controller());
  await nodeDisksFor(cp.admin()).mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, { fieldManager: FIELD_MANAGER.plugin });
  await controller.apply({ ...meta(name), spec: { desired: { state: 'Reserved', owner: 'auto' } } }, { fieldManager: FIELD_MANAGER.controller, force: true });
  await controller.applyStatus({ ...meta(name), status: { controller: { accepted: true, observedGeneration: 2 } } }, { fieldManager: FIELD_MANAGER.controller });

  const node = await denied(t, controller.applyStatus({ ...meta(name), status: { node: { phase: 'Reserved' } } }, { fieldManager: FIELD_MANAGER.controller, force: true }));
  t.regex(node.message, /the controller may not change status\.node; only the node agent reports what is on disk/);
  const labels = await denied(
    t,
    controller.apply({ ...meta(name), metadata: { name, labels: { 'localtest.example.com/auto-reserve': 'false' } } }, { fieldManager: FIELD_MANAGER.controller, force: true }),
  );
  t.regex(labels.message, /the controller may not change labels/);
  const create = await denied(t, controller.create(newNodeDisk('node-f', 'disk2'), { fieldManager: FIELD_MANAGER.controller }));
  t.is(create.statusCode, 403, 'RBAC: the controller has no create');
});

// The label policy's boundary, at the API server: a buggy or compromised controller cannot drop a person's disk.
test("the controller's token cannot release or re-own a reservation of another owner, nor change finalizers, annotations or ownerReferences", async (t) => {
  const cp = controlPlane();
  const agent = nodeDisksFor(await cp.agent('node-own'));
  const d = newNodeDisk('node-own', 'disk1');
  const name = d.metadata.name!;
  await agent.create(d, { fieldManager: FIELD_MANAGER.agent });
  await agent.mergePatch(name, { metadata: { finalizers: [FINALIZER] } }, { fieldManager: FIELD_MANAGER.agent });
  const admin = nodeDisksFor(cp.admin());
  await admin.apply({ ...meta(name), spec: { desired: { state: 'Reserved', owner: 'team-db' } } }, { fieldManager: FIELD_MANAGER.plugin, force: true });
  const controller = nodeDisksFor(await cp.controller());
  const asController = { fieldManager: FIELD_MANAGER.controller, force: true } as const;

  // Forced, and taking spec.desired.owner over too (the person's field manager owns it).
  const release = await denied(t, controller.apply({ ...meta(name), spec: { desired: { state: 'Available', owner: '' } } }, asController));
  t.is(release.statusCode, 403);
  t.regex(
    release.message,
    /ValidatingAdmissionPolicy 'nodedisks-controller\.localtest\.example\.com'.*the controller may move spec\.desired only between Available and Reserved for owner auto \(the label policy\) or for a claim \(owner claim:<namespace>\/<name>\), not from Reserved for owner team-db to Available: a reservation of another owner is released or handed over by people only/,
  );
  const releaseByPatch = await denied(t, controller.mergePatch(name, { spec: { desired: { state: 'Available', owner: null } } }, { fieldManager: FIELD_MANAGER.controller }));
  t.regex(releaseByPatch.message, /not from Reserved for owner team-db to Available/);
  const reown = await denied(t, controller.apply({ ...meta(name), spec: { desired: { state: 'Reserved', owner: 'auto' } } }, asController));
  t.regex(reown.message, /not from Reserved for owner team-db to Reserved for owner auto: a reservation of another owner/);
  const handOver = await denied(t, controller.apply({ ...meta(name), spec: { desired: { state: 'Reserved', owner: 'mallory' } } }, asController));
  t.regex(handOver.message, /not from Reserved for owner team-db to Reserved for owner mallory/);
  // Nor take a person's disk for a claim.
  const toClaim = await denied(t, controller.apply({ ...meta(name), spec: { desired: { state: 'Reserved', owner: 'claim:team-a/db' } } }, asController));
  t.regex(toClaim.message, /not from Reserved for owner team-db to Reserved for owner claim:team-a\/db: a reservation of another owner/);
  const strip = await denied(t, controller.mergePatch(name, { metadata: { finalizers: null } }, { fieldManager: FIELD_MANAGER.controller }));
  t.regex(strip.message, /the controller may not change finalizers; the reservation protection belongs to the node agent/);
  const annotate = await denied(t, controller.mergePatch(name, { metadata: { annotations: { 'example.com/x': 'y' } } }, { fieldManager: FIELD_MANAGER.controller }));
  t.regex(annotate.message, /the controller may not change annotations/);
  const { uid } = await cp.ensureNode('node-own');
  const owned = await denied(
    t,
    controller.mergePatch(name, { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: 'node-own', uid }] } }, { fieldManager: FIELD_MANAGER.controller }),
  );
  t.regex(owned.message, /the controller may not change ownerReferences/);
  const after = await admin.get(name);
  t.deepEqual(after.spec.desired, { state: 'Reserved', owner: 'team-db' });
  t.deepEqual(after.metadata.finalizers, [FINALIZER]);
  t.is(after.metadata.annotations, undefined);

  // Its own part of status on that disk stays its own: Accepted says why the label had no effect.
  const accepted = {
    type: 'Accepted',
    status: 'False',
    reason: 'ReservedByOther',
    message: 'reserved by team-db',
    lastTransitionTime: '2026-01-02T03:04:05Z',
    observedGeneration: after.metadata.generation,
  } as const;
  const st = await controller.applyStatus(
    { ...meta(name), status: { observedGeneration: after.metadata.generation, conditions: [accepted], controller: { accepted: false, observedGeneration: after.metadata.generation } } },
    { fieldManager: FIELD_MANAGER.controller },
  );
  t.is(st.status?.conditions?.[0]?.reason, 'ReservedByOther');

  // On a free disk: it reserves for owner auto as the label asks, and releases that when the label goes;
  // it reserves for nobody else, and not against the label.
  const free = newNodeDisk('node-own', 'disk2');
  const freeName = free.metadata.name!;
  await agent.create(free, { fieldManager: FIELD_MANAGER.agent });
  const unasked = await denied(t, controller.apply({ ...meta(freeName), spec: { desired: { state: 'Reserved', owner: 'auto' } } }, asController));
  t.regex(unasked.message, /not from Available to Reserved for owner auto: it reserves for owner auto only while the label localtest\.example\.com\/auto-reserve is "true"/);
  await admin.mergePatch(freeName, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, { fieldManager: FIELD_MANAGER.plugin });
  const forOther = await denied(t, controller.apply({ ...meta(freeName), spec: { desired: { state: 'Reserved', owner: 'team-db' } } }, asController));
  t.regex(forOther.message, /not from Available to Reserved for owner team-db/);
  t.deepEqual((await controller.apply({ ...meta(freeName), spec: { desired: { state: 'Reserved', owner: 'auto' } } }, asController)).spec.desired, { state: 'Reserved', owner: 'auto' });
  const early = await denied(t, controller.apply({ ...meta(freeName), spec: { desired: { state: 'Available' } } }, asController));
  t.regex(early.message, /not from Reserved for owner auto to Available: it releases a reservation of owner auto only when the label localtest\.example\.com\/auto-reserve is not "true"/);
  await admin.mergePatch(freeName, { metadata: { labels: { [LABEL_AUTO_RESERVE]: null } } }, { fieldManager: FIELD_MANAGER.plugin });
  t.deepEqual((await controller.apply({ ...meta(freeName), spec: { desired: { state: 'Available' } } }, asController)).spec.desired, { state: 'Available' });
});

// What an agent creates is tied to its spec: people select disks by the labels and consumers use spec.path.
test('the agent creates only NodeDisks whose labels derive from spec, whose spec.path is in the disk dir, with no annotations or ownerReferences', async (t) => {
  const agent = nodeDisksFor(await controlPlane().agent('node-cr'));
  const attempt = async (what: string, edit: (d: NodeDisk & { metadata: { ownerReferences?: unknown[] } }) => void, message: RegExp) => {
    const d = newNodeDisk('node-cr', 'disk1');
    edit(d);
    const err = await denied(t, agent.create(d, { fieldManager: FIELD_MANAGER.agent }));
    t.is(err.statusCode, 403, what);
    t.regex(err.message, message, what);
  };
  const labels = /the agent must label the NodeDisk it creates localtest\.example\.com\/node=node-cr and localtest\.example\.com\/disk=disk1 \(api\/names\.ts labelValue/;
  await attempt('node label of another node', (d) => (d.metadata.labels![LABEL_NODE] = 'node-b'), labels);
  await attempt('disk label of another disk', (d) => (d.metadata.labels![LABEL_DISK] = 'disk2'), labels);
  await attempt('no labels', (d) => delete d.metadata.labels, labels);
  const path = (p: string) => new RegExp(`spec\\.path must be /var/lib/node-disks-manager/disks/disk1\\.img, not ${p.replaceAll('.', '\\.')}`);
  for (const p of ['/etc/disk1.img', '/var/lib/node-disks-manager/disks/sub/disk1.img', '/var/lib/node-disks-manager/disks-other/disk1.img', '/var/lib/node-disks-manager/disk1.img']) {
    await attempt(p, (d) => (d.spec.path = p), path(p));
  }
  await attempt('an annotation', (d) => (d.metadata.annotations = { 'example.com/x': 'y' }), /the agent may create a NodeDisk with no annotations and no ownerReferences/);
  const { uid } = await controlPlane().ensureNode('node-cr');
  await attempt('an ownerReference', (d) => (d.metadata.ownerReferences = [{ apiVersion: 'v1', kind: 'Node', name: 'node-cr', uid }]), /no annotations and no ownerReferences/);
  const ok = await agent.create(newNodeDisk('node-cr', 'disk1'), { fieldManager: FIELD_MANAGER.agent });
  t.deepEqual(ok.metadata.labels, { [LABEL_NODE]: 'node-cr', [LABEL_DISK]: 'disk1' });
});

// A drive's NodeDisk (ADR 44): its path is a name in the by-id dir, and it alone may carry the media label.
test("the agent creates a drive's NodeDisk only with a path in the by-id dir and a media label of nvme, ssd or hdd; an image's carries no media label", async (t) => {
  const agent = nodeDisksFor(await controlPlane().agent('node-dr'));
  const drive = (path: string, media?: string) => {
    const d = newNodeDisk('node-dr', 'drive-wwn-5000c500a1b2c3d4');
    d.spec.path = path;
    if (media !== undefined) d.metadata.labels![LABEL_MEDIA] = media;
    return d;
  };
  const byId = '/dev/disk/by-id/wwn-0x5000c500a1b2c3d4';
  for (const p of ['/dev/sda', '/dev/disk/by-id/sub/wwn-0x5000c500a1b2c3d4', '/etc/passwd', '/dev/disk/by-id/']) {
    const err = await denied(t, agent.create(drive(p, 'hdd'), { fieldManager: FIELD_MANAGER.agent }));
    t.regex(err.message, /may create a drive NodeDisk only of a name in the by-id dir this install configures: spec\.path must be \/dev\/disk\/by-id\/<name>/, p);
  }
  // The CRD's own rule refuses a path that climbs out, before any policy is asked.
  const climbing = await agent.create(drive('/dev/disk/by-id/../../sda', 'hdd'), { fieldManager: FIELD_MANAGER.agent }).catch((e: Error) => e);
  t.regex(String(climbing), /spec\.path must not contain '\.' or '\.\.' segments/);
  for (const media of ['tape', '']) {
    const err = await denied(t, agent.create(drive(byId, media), { fieldManager: FIELD_MANAGER.agent }));
    t.regex(err.message, /and on a drive's, localtest\.example\.com\/media nvme, ssd or hdd/, media);
  }
  const image = newNodeDisk('node-dr', 'disk1');
  image.metadata.labels![LABEL_MEDIA] = 'nvme';
  t.regex((await denied(t, agent.create(image, { fieldManager: FIELD_MANAGER.agent }))).message, /may set only the localtest\.example\.com\/node and localtest\.example\.com\/disk labels/);
  const ok = await agent.create(drive(byId, 'hdd'), { fieldManager: FIELD_MANAGER.agent });
  t.is(ok.metadata.labels?.[LABEL_MEDIA], 'hdd');
  // Once created, the label is the agent's no more than any other.
  const relabel = agent.mergePatch(ok.metadata.name!, { metadata: { labels: { [LABEL_MEDIA]: 'nvme' } } }, { fieldManager: FIELD_MANAGER.agent });
  t.is((await denied(t, relabel)).statusCode, 403);
});

test('for names too long for a label value, the agent labels with the shortened value and a forged head is refused', async (t) => {
  // 105 characters: a label value holds 63, so api/names.ts keeps a normalized head of it and a hash.
  const node = `pool-${'a'.repeat(40)}.zone-${'b'.repeat(40)}.example.com`;
  const agent = nodeDisksFor(await controlPlane().agent(node));
  for (const disk of ['disk1', `Scratch_${'c'.repeat(70)}`, 'scratch_', 'v1.2']) {
    const d = newNodeDisk(node, disk);
    t.not(d.metadata.labels![LABEL_NODE], node);
    const created = await agent.create(d, { fieldManager: FIELD_MANAGER.agent });
    t.deepEqual(created.metadata.labels, { [LABEL_NODE]: labelValue(node), [LABEL_DISK]: labelValue(disk) }, disk);
  }
  t.regex(labelValue('scratch_'), /^scratch-[0-9a-f]{10}$/);
  const forged = (labels: Record<string, string>) => {
    const d = newNodeDisk(node, 'disk2');
    d.metadata.labels = { ...d.metadata.labels, ...labels };
    return agent.create(d, { fieldManager: FIELD_MANAGER.agent });
  };
  const other = labelValue(`pool-${'a'.repeat(40)}.zone-${'x'.repeat(40)}.example.com`);
  const wanted = /the agent must label the NodeDisk it creates localtest\.example\.com\/node=pool-a+-zone-b+-<hash> and localtest\.example\.com\/disk=disk2/;
  t.regex((await denied(t, forged({ [LABEL_NODE]: other }))).message, wanted);
  t.regex((await denied(t, forged({ [LABEL_NODE]: labelValue(node).replace(/-[0-9a-f]{10}$/, '-not-a-hash') }))).message, wanted);
  t.regex((await denied(t, forged({ [LABEL_NODE]: labelValue(node).slice(0, 40) }))).message, wanted);
  const longDisk = newNodeDisk(node, `Scratch_${'d'.repeat(70)}`);
  longDisk.metadata.labels![LABEL_DISK] = labelValue(`Scratch_${'e'.repeat(70)}`);
  t.regex((await denied(t, agent.create(longDisk, { fieldManager: FIELD_MANAGER.agent }))).message, /localtest\.example\.com\/disk=scratch-d+-<hash>/);
});

// ADR 24: each agent renews one heartbeat Lease, its own node's; the controller reads them all.
const LEASES = '/apis/coordination.k8s.io/v1/namespaces/node-disks-system/leases';
type Lease = { metadata: { name: string; resourceVersion?: string }; spec: { holderIdentity?: string; renewTime?: string; leaseDurationSeconds?: number } };
const heartbeat = heartbeatLease;

test("the agent of node A creates and renews its own heartbeat Lease, and neither creates nor renews node B's", async (t) => {
  const cp = controlPlane();
  const agentA = restFor(await cp.agent('node-hb-a'));
  const agentB = restFor(await cp.agent('node-hb-b'));
  const own = await agentA.request<Lease>('POST', LEASES, { body: heartbeat('node-hb-a') });
  const renewed = await agentA.request<Lease>('PUT', `${LEASES}/${own.metadata.name}`, { body: { ...heartbeat('node-hb-a'), metadata: own.metadata } });
  t.is(renewed.spec.holderIdentity, 'node-hb-a');

  const b = await agentB.request<Lease>('POST', LEASES, { body: heartbeat('node-hb-b') });
  const renewB = await denied(t, agentA.request('PUT', `${LEASES}/${b.metadata.name}`, { body: { ...heartbeat('node-hb-b'), metadata: b.metadata } }));
  t.is(renewB.statusCode, 403);
  t.regex(
    renewB.message,
    /ValidatingAdmissionPolicy 'nodedisks-agent-heartbeat\.localtest\.example\.com'.*the agent of node node-hb-a may renew only its own heartbeat Lease node-disks-agent-node-hb-a/,
  );
  const takeB = await denied(t, agentA.request('PUT', `${LEASES}/${b.metadata.name}`, { body: { ...heartbeat('node-hb-b', 'node-hb-a'), metadata: b.metadata } }));
  t.regex(takeB.message, /may renew only its own heartbeat Lease/);
  const createC = await denied(t, agentA.request('POST', LEASES, { body: heartbeat('node-hb-c') }));
  t.regex(createC.message, /may renew only its own heartbeat Lease/);
  const leader = await denied(t, agentA.request('POST', LEASES, { body: { ...heartbeat('node-hb-a'), metadata: { name: 'node-disks-operator.localtest.example.com' } } }));
  t.regex(leader.message, /may renew only its own heartbeat Lease/);
  t.is((await restFor(cp.admin()).request<Lease>('GET', `${LEASES}/${b.metadata.name}`)).spec.holderIdentity, 'node-hb-b', "node B's Lease is untouched");
});

test("the controller may list the agents' heartbeat Leases", async (t) => {
  const cp = controlPlane();
  await restFor(await cp.agent('node-hb-d')).request<Lease>('POST', LEASES, { body: heartbeat('node-hb-d') });
  const list = await restFor(await cp.controller()).request<{ items: Lease[] }>('GET', LEASES);
  t.true(list.items.some((l) => l.spec.holderIdentity === 'node-hb-d'));
});

test("the controller can neither forge nor renew an agent's heartbeat Lease, and keeps its own leader Lease", async (t) => {
  const cp = controlPlane();
  const controller = restFor(await cp.controller());
  // A node whose agent is gone has no Lease: one the controller made would make that node look alive.
  const forged = await denied(t, controller.request('POST', LEASES, { body: heartbeat('node-hb-gone') }));
  t.is(forged.statusCode, 403);
  t.regex(forged.message, /ValidatingAdmissionPolicy 'nodedisks-controller-leases\.localtest\.example\.com'.*heartbeat Leases are the agents' own/);
  const live = await restFor(await cp.agent('node-hb-f')).request<Lease>('POST', LEASES, { body: heartbeat('node-hb-f') });
  const renew = await denied(t, controller.request('PUT', `${LEASES}/${live.metadata.name}`, { body: { ...heartbeat('node-hb-f'), metadata: live.metadata } }));
  t.regex(renew.message, /heartbeat Leases are the agents' own/);
  const name = 'nodedisks-policy-test-leader';
  const own = await controller.request<Lease>('POST', LEASES, {
    body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name }, spec: { holderIdentity: 'operator-pod' } },
  });
  const renewed = await controller.request<Lease>('PUT', `${LEASES}/${name}`, { body: { ...own, spec: { ...own.spec, leaseDurationSeconds: 15 } } });
  t.is(renewed.spec.leaseDurationSeconds, 15);
});

test("the controller cannot write a Lease labelled as an agent's heartbeat under any name: 'zz' held by a node", async (t) => {
  const controller = restFor(await controlPlane().controller());
  const zz = { ...heartbeat('node-hb-zz'), metadata: { name: 'zz', labels: { [LABEL_HEARTBEAT]: HEARTBEAT_LABEL_VALUE } } };
  const forged = await denied(t, controller.request('POST', LEASES, { body: zz }));
  t.regex(forged.message, /ValidatingAdmissionPolicy 'nodedisks-controller-leases\.localtest\.example\.com'.*may not write the Lease zz: heartbeat Leases are the agents' own/);
  // Nor label its own Lease so afterwards.
  const own = await controller.request<Lease>('POST', LEASES, { body: { ...zz, metadata: { name: 'nodedisks-policy-test-zz' } } });
  const labelled = await denied(t, controller.request('PUT', `${LEASES}/${own.metadata.name}`, { body: { ...own, metadata: { ...own.metadata, labels: zz.metadata.labels } } }));
  t.regex(labelled.message, /heartbeat Leases are the agents' own/);
});

function plugin(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'kubectl',
      ['nodedisks', ...args],
      { env: { ...process.env, PATH: `${join(REPO_ROOT, 'dist', 'bin')}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig } },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

test.serial('the viewer can list but not reserve; the editor reserves and releases through the plugin', async (t) => {
  const cp = controlPlane();
  const d = newNodeDisk('node-g', 'disk1');
  await nodeDisksFor(await cp.agent('node-g')).create(d, { fieldManager: FIELD_MANAGER.agent });
  const name = d.metadata.name!;
  t.is((await plugin(['list', '--as', 'vera'])).code, 0);
  const viewer = await plugin(['reserve', name, '--owner', 'vera', '--as', 'vera']);
  t.is(viewer.code, 4);
  t.regex(viewer.stderr, /User "vera" cannot patch resource "nodedisks"/);
  const editor = await plugin(['reserve', name, '--owner', 'eddie', '--as', 'eddie']);
  t.is(editor.code, 0, editor.stderr);
  t.is((await nodeDisksFor(cp.admin()).get(name)).spec.desired?.owner, 'eddie');
  const release = await plugin(['release', name, '--owner', 'eddie', '--as', 'eddie']);
  t.is(release.code, 0, release.stderr);
  const nobody = await plugin(['list', '--as', 'nobody-at-all']);
  t.is(nobody.code, 4);
});

// The claims binder's boundary (ADR 34): a free disk to a claim and back, nothing else.
test("the controller's token reserves a free disk for a claim and releases it, but no labelled disk, nor one claim's disk for another", async (t) => {
  const cp = controlPlane();
  const agent = nodeDisksFor(await cp.agent('node-claim'));
  const [free, labelled] = [newNodeDisk('node-claim', 'disk1'), newNodeDisk('node-claim', 'disk2')];
  for (const d of [free, labelled]) await agent.create(d, { fieldManager: FIELD_MANAGER.agent });
  await nodeDisksFor(cp.admin()).mergePatch(labelled.metadata.name!, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, { fieldManager: FIELD_MANAGER.plugin });
  const controller = nodeDisksFor(await cp.controller());
  const asController = { fieldManager: FIELD_MANAGER.controller, force: true } as const;
  const forClaim = (owner: string) => ({ desired: { state: 'Reserved' as const, owner, ownerUID: `uid-of-${owner.replace(/\W/g, '-')}` } });
  await controller.apply({ ...meta(free.metadata.name!), spec: forClaim('claim:team-a/db') }, asController);
  const moved = await denied(t, controller.apply({ ...meta(free.metadata.name!), spec: forClaim('claim:team-b/db') }, asController));
  t.regex(moved.message, /not from Reserved for owner claim:team-a\/db to Reserved for owner claim:team-b\/db/);
  const released = await controller.apply({ ...meta(free.metadata.name!), spec: { desired: { state: 'Available' } } }, asController);
  t.deepEqual(released.spec.desired, { state: 'Available' });
  const taken = await denied(t, controller.apply({ ...meta(labelled.metadata.name!), spec: forClaim('claim:team-a/db') }, asController));
  t.regex(taken.message, /a disk labelled localtest\.example\.com\/auto-reserve=true is the label policy's, not a claim's/);
});

test('a ServiceAccount named like the controller in another namespace, a NodeDisk editor by a group binding, is held to the rules for people', async (t) => {
  await impostorIsHeldToPeoplesRules(t, controlPlane(), { namespace: 'intruders', node: 'node-impostor' });
});
