// The API server's guarantees hold in whatever namespace the install lives in. This control plane has the
// real kustomize output of an overlay of kustomize/default with `namespace: storage-team` (kustomize moves
// the ServiceAccounts and their bindings, and rewrites no CEL), and the programs' identities are tokens of
// the ServiceAccounts in that namespace.
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { API_VERSION, FIELD_MANAGER, FINALIZER, KIND, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { KubectlError } from '../../hack/controlplane/controlplane.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { impostorIsHeldToPeoplesRules } from '../harness/impostor.ts';
import { denied, heartbeatLease, nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const NAMESPACE = 'storage-team';
const controlPlane = useControlPlane(test, { kustomization: join(REPO_ROOT, 'test/fixtures/kustomize/other-namespace'), namespace: NAMESPACE });
const meta = (name: string) => ({ apiVersion: API_VERSION, kind: KIND, metadata: { name } }) as const;
const LEASES = `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`;
const heartbeat = (node: string) => heartbeatLease(node);

test('the install lives in storage-team only, and the identities are its ServiceAccounts', async (t) => {
  const cp = controlPlane();
  t.is(cp.namespace, NAMESPACE);
  const sas = await cp.kubectl(cp.admin(), ['get', 'serviceaccounts', '-n', NAMESPACE, '-o', 'name']);
  t.regex(sas, /serviceaccount\/node-disks-agent\n/);
  t.regex(sas, /serviceaccount\/node-disks-operator\n/);
  const none = await cp.kubectl(cp.admin(), ['get', 'namespace', 'node-disks-system']).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.true(none instanceof KubectlError && /not found/.test(none.stderr), 'no node-disks-system namespace');
  const who = await cp.kubectl(await cp.agent('ns-node-who'), ['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}']);
  t.is(who, `system:serviceaccount:${NAMESPACE}:node-disks-agent`);
});

test('the agent of node A writes its own NodeDisks and heartbeat Lease', async (t) => {
  const cp = controlPlane();
  const agent = nodeDisksFor(await cp.agent('ns-node-a'));
  const d = newNodeDisk('ns-node-a', 'disk1');
  const name = d.metadata.name!;
  await agent.create(d, { fieldManager: FIELD_MANAGER.agent });
  const st = await agent.applyStatus({ ...meta(name), status: { node: { phase: 'Available', capacityBytes: 1 } } }, { fieldManager: FIELD_MANAGER.agent });
  t.is(st.status?.node?.phase, 'Available');
  const fin = await agent.mergePatch(name, { metadata: { finalizers: [FINALIZER] } }, { fieldManager: FIELD_MANAGER.agent });
  t.deepEqual(fin.metadata.finalizers, [FINALIZER]);
  const lease = await restFor(await cp.agent('ns-node-a')).request<{ spec: { holderIdentity?: string } }>('POST', LEASES, { body: heartbeat('ns-node-a') });
  t.is(lease.spec.holderIdentity, 'ns-node-a');
});

test("the agent of node A is refused on node B's disk and Lease, and on reserving", async (t) => {
  const cp = controlPlane();
  const agentA = nodeDisksFor(await cp.agent('ns-node-a2'));
  const b = newNodeDisk('ns-node-b2', 'disk1');
  await nodeDisksFor(await cp.agent('ns-node-b2')).create(b, { fieldManager: FIELD_MANAGER.agent });

  const create = await denied(t, agentA.create(newNodeDisk('ns-node-b2', 'disk2'), { fieldManager: FIELD_MANAGER.agent }));
  t.is(create.statusCode, 403);
  t.regex(create.message, /ValidatingAdmissionPolicy 'nodedisks-agent\.localtest\.example\.com'.*the agent of node ns-node-a2 may not write NodeDisks of node ns-node-b2/);
  const status = await denied(t, agentA.applyStatus({ ...meta(b.metadata.name!), status: { node: { phase: 'Missing' } } }, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(status.message, /may not write NodeDisks of node ns-node-b2/);
  const reserveB = await denied(t, agentA.mergePatch(b.metadata.name!, { spec: { desired: { state: 'Reserved', owner: 'x' } } }, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(reserveB.message, /may not write NodeDisks of node ns-node-b2/);

  const own = newNodeDisk('ns-node-a2', 'disk1');
  await agentA.create(own, { fieldManager: FIELD_MANAGER.agent });
  const reserve = await denied(t, agentA.mergePatch(own.metadata.name!, { spec: { desired: { state: 'Reserved', owner: 'x' } } }, { fieldManager: FIELD_MANAGER.agent }));
  t.regex(reserve.message, /the agent may not change spec\.desired/);
  const reservedAtCreation = newNodeDisk('ns-node-a2', 'disk2');
  reservedAtCreation.spec.desired = { state: 'Reserved', owner: 'x' };
  t.regex((await denied(t, agentA.create(reservedAtCreation, { fieldManager: FIELD_MANAGER.agent }))).message, /the agent may not create a NodeDisk with a reservation/);

  const leaseB = await denied(t, restFor(await cp.agent('ns-node-a2')).request('POST', LEASES, { body: heartbeat('ns-node-b2') }));
  t.regex(leaseB.message, /ValidatingAdmissionPolicy 'nodedisks-agent-heartbeat\.localtest\.example\.com'.*the agent of node ns-node-a2 may renew only its own heartbeat Lease/);
});

test('the controller writes its own fields, and is refused on a reservation of another owner and on status.node', async (t) => {
  const cp = controlPlane();
  const agent = nodeDisksFor(await cp.agent('ns-node-c'));
  const controller = nodeDisksFor(await cp.controller());
  const auto = newNodeDisk('ns-node-c', 'disk1');
  const name = auto.metadata.name!;
  await agent.create(auto, { fieldManager: FIELD_MANAGER.agent });
  await agent.applyStatus({ ...meta(name), status: { node: { phase: 'Available', capacityBytes: 1 } } }, { fieldManager: FIELD_MANAGER.agent });
  await nodeDisksFor(cp.admin()).mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, { fieldManager: FIELD_MANAGER.plugin });
  const reserved = await controller.apply({ ...meta(name), spec: { desired: { state: 'Reserved', owner: 'auto' } } }, { fieldManager: FIELD_MANAGER.controller, force: true });
  t.deepEqual(reserved.spec.desired, { state: 'Reserved', owner: 'auto' });
  await controller.applyStatus({ ...meta(name), status: { controller: { accepted: true, observedGeneration: 2 } } }, { fieldManager: FIELD_MANAGER.controller });
  const node = await denied(t, controller.applyStatus({ ...meta(name), status: { node: { phase: 'Reserved' } } }, { fieldManager: FIELD_MANAGER.controller, force: true }));
  t.regex(node.message, /ValidatingAdmissionPolicy 'nodedisks-controller\.localtest\.example\.com'.*the controller may not change status\.node/);

  const manual = newNodeDisk('ns-node-c', 'disk2');
  await agent.create(manual, { fieldManager: FIELD_MANAGER.agent });
  await nodeDisksFor(cp.admin()).apply({ ...meta(manual.metadata.name!), spec: { desired: { state: 'Reserved', owner: 'team-db' } } }, { fieldManager: FIELD_MANAGER.plugin, force: true });
  const release = await denied(
    t,
    controller.apply({ ...meta(manual.metadata.name!), spec: { desired: { state: 'Available', owner: '' } } }, { fieldManager: FIELD_MANAGER.controller, force: true }),
  );
  t.regex(release.message, /the controller may move spec\.desired only between Available and Reserved for owner auto/);
  t.is((await nodeDisksFor(cp.admin()).get(manual.metadata.name!)).spec.desired?.owner, 'team-db');

  const forged = await denied(t, restFor(await cp.controller()).request('POST', LEASES, { body: heartbeat('ns-node-gone') }));
  t.regex(forged.message, /ValidatingAdmissionPolicy 'nodedisks-controller-leases\.localtest\.example\.com'.*heartbeat Leases are the agents' own/);
});

test('the real agent and controller work with the tokens of storage-team: discovery, auto-reserve and release', async (t) => {
  const cp = controlPlane();
  const work = await mkdtemp(join(tmpdir(), 'nodedisks-ns-'));
  const programs: Program[] = [];
  t.teardown(async () => {
    await Promise.all(programs.map((p) => p.stop()));
    await rm(work, { recursive: true, force: true });
  });
  const node = 'ns-node-real';
  const disks = join(work, 'disks');
  await seedDisks(disks, 2, 1024 * 1024);
  // In a cluster POD_NAMESPACE says where the Leases live; here the flags do.
  programs.push(await startAgent(cp, { node, diskDir: disks, logDir: join(work, 'logs'), rescanInterval: '1s', extraArgs: [`--lease-namespace=${NAMESPACE}`] }));
  programs.push(await startController(cp, { logDir: join(work, 'logs'), extraArgs: ['--leader-elect=false', `--agent-lease-namespace=${NAMESPACE}`] }));
  const admin = nodeDisksFor(cp.admin());
  const name = nodeDiskName(node, 'disk1');
  const ready = (nd: { status?: { conditions?: { type: string; status: string }[] } }) => nd.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
  await eventually('both disks reported and Ready', async () => {
    const items = (await admin.list()).items.filter((nd) => nd.spec.nodeName === node);
    return items.length === 2 && items.every((nd) => nd.status?.node?.phase === 'Available' && ready(nd)) ? items : undefined;
  });
  await eventually('its heartbeat Lease in storage-team', () => restFor(cp.admin()).request('GET', `${LEASES}/node-disks-agent-${node}`));
  await admin.mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, { fieldManager: FIELD_MANAGER.plugin });
  await eventually('reserved for auto, marker written', async () => {
    const nd = await admin.get(name);
    return nd.spec.desired?.owner === 'auto' && nd.status?.node?.phase === 'Reserved' && ready(nd) && existsSync(join(disks, 'disk1.img.reserved')) ? nd : undefined;
  });
  await admin.mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: null } } }, { fieldManager: FIELD_MANAGER.plugin });
  const released = await eventually('released, marker gone', async () => {
    const nd = await admin.get(name);
    return nd.spec.desired?.state === 'Available' && nd.status?.node?.phase === 'Available' && !existsSync(join(disks, 'disk1.img.reserved')) ? nd : undefined;
  });
  t.is(released.spec.desired?.owner, undefined);
});

test('the controller of this namespace reserves a disk for a claim and releases it; nobody else changes that reservation', async (t) => {
  const cp = controlPlane();
  const disk = newNodeDisk('ns-node-claim', 'disk1');
  await nodeDisksFor(await cp.agent('ns-node-claim')).create(disk, { fieldManager: FIELD_MANAGER.agent });
  const controller = nodeDisksFor(await cp.controller());
  await controller.apply(
    { ...meta(disk.metadata.name!), spec: { desired: { state: 'Reserved', owner: 'claim:team-a/db', ownerUID: 'claim-uid' } } },
    { fieldManager: FIELD_MANAGER.controller, force: true },
  );
  const person = await denied(
    t,
    nodeDisksFor(cp.admin()).apply({ ...meta(disk.metadata.name!), spec: { desired: { state: 'Available', owner: '' } } }, { fieldManager: FIELD_MANAGER.plugin, force: true }),
  );
  t.regex(person.message, /ValidatingAdmissionPolicy 'nodedisks-claims\.localtest\.example\.com'.*reserved for NodeDiskClaim team-a\/db: only the controller changes that reservation/);
  const released = await controller.apply({ ...meta(disk.metadata.name!), spec: { desired: { state: 'Available' } } }, { fieldManager: FIELD_MANAGER.controller, force: true });
  t.deepEqual(released.spec.desired, { state: 'Available' });
});

test('a ServiceAccount named like the controller in another namespace, a NodeDisk editor by a group binding, is held to the rules for people', async (t) => {
  await impostorIsHeldToPeoplesRules(t, controlPlane(), { namespace: 'intruders', node: 'ns-node-impostor' });
});
