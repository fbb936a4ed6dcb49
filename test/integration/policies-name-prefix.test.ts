// The API server's guarantees hold when a user renames the install: this control plane has the real
// kustomize output of an overlay of kustomize/default with a namePrefix and a nameSuffix (kustomize renames
// the ServiceAccounts, the workloads' references and the bindings, and rewrites no CEL), and the programs'
// identities are tokens of the renamed ServiceAccounts.
import { join } from 'node:path';
import test from 'ava';
import { API_VERSION, FIELD_MANAGER, KIND, PV_OWNER_PREFIX } from '../../api/constants.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { denied, heartbeatLease, nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const NAMESPACE = 'storage-prod';
const NAMES = { prefix: 'prod-', suffix: '-v2' };
const controlPlane = useControlPlane(test, { kustomization: join(REPO_ROOT, 'test/fixtures/kustomize/name-prefix'), namespace: NAMESPACE, names: NAMES });
const LEASES = `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`;

test('the identities are the renamed ServiceAccounts', async (t) => {
  const cp = controlPlane();
  const who = await cp.kubectl(await cp.agent('np-node-who'), ['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}']);
  t.is(who, `system:serviceaccount:${NAMESPACE}:prod-node-disks-agent-v2`);
});

test("the renamed agent of node A writes its own disk and Lease, and is refused on node B's", async (t) => {
  const cp = controlPlane();
  const agentA = nodeDisksFor(await cp.agent('np-node-a'));
  await agentA.create(newNodeDisk('np-node-a', 'disk1'), { fieldManager: FIELD_MANAGER.agent });
  const other = await denied(t, agentA.create(newNodeDisk('np-node-b', 'disk1'), { fieldManager: FIELD_MANAGER.agent }));
  t.is(other.statusCode, 403);
  t.regex(other.message, /ValidatingAdmissionPolicy 'prod-nodedisks-agent\.localtest\.example\.com-v2'.*may not write NodeDisks of node np-node-b/);
  const restA = restFor(await cp.agent('np-node-a'));
  await restA.request('POST', LEASES, { body: heartbeatLease('np-node-a') });
  const leaseB = await denied(t, restA.request('POST', LEASES, { body: heartbeatLease('np-node-b') }));
  t.regex(leaseB.message, /may renew only its own heartbeat Lease/);
});

test("the renamed controller is refused status.node and the agents' heartbeat Leases", async (t) => {
  const cp = controlPlane();
  const agent = nodeDisksFor(await cp.agent('np-node-c'));
  const disk = newNodeDisk('np-node-c', 'disk1');
  await agent.create(disk, { fieldManager: FIELD_MANAGER.agent });
  const controller = nodeDisksFor(await cp.controller());
  const meta = { apiVersion: API_VERSION, kind: KIND, metadata: { name: disk.metadata.name! } } as const;
  const node = await denied(t, controller.applyStatus({ ...meta, status: { node: { phase: 'Reserved' } } }, { fieldManager: FIELD_MANAGER.controller, force: true }));
  t.regex(node.message, /the controller may not change status\.node/);
  const forged = await denied(t, restFor(await cp.controller()).request('POST', LEASES, { body: heartbeatLease('np-node-gone') }));
  t.regex(forged.message, /heartbeat Leases are the agents' own/);
});

test('the renamed controller reserves a disk for a claim and releases it; nobody else changes that reservation', async (t) => {
  const cp = controlPlane();
  const disk = newNodeDisk('np-node-claim', 'disk1');
  await nodeDisksFor(await cp.agent('np-node-claim')).create(disk, { fieldManager: FIELD_MANAGER.agent });
  const meta = { apiVersion: API_VERSION, kind: KIND, metadata: { name: disk.metadata.name! } } as const;
  const controller = nodeDisksFor(await cp.controller());
  await controller.apply({ ...meta, spec: { desired: { state: 'Reserved', owner: 'claim:team-a/db', ownerUID: 'claim-uid' } } }, { fieldManager: FIELD_MANAGER.controller, force: true });
  const person = await denied(t, nodeDisksFor(cp.admin()).apply({ ...meta, spec: { desired: { state: 'Available', owner: '' } } }, { fieldManager: FIELD_MANAGER.plugin, force: true }));
  t.regex(person.message, /ValidatingAdmissionPolicy 'prod-nodedisks-claims\.localtest\.example\.com-v2'.*reserved for NodeDiskClaim team-a\/db: only the controller changes that reservation/);
  const released = await controller.apply({ ...meta, spec: { desired: { state: 'Available' } } }, { fieldManager: FIELD_MANAGER.controller, force: true });
  t.deepEqual(released.spec.desired, { state: 'Available' });
});

test("the renamed CSI controller reserves a disk for a PersistentVolume and releases it with a wipe; nobody else changes that reservation; the CSIDriver keeps the driver's name", async (t) => {
  const cp = controlPlane();
  const disk = newNodeDisk('np-node-pv', 'disk1');
  await nodeDisksFor(await cp.agent('np-node-pv')).create(disk, { fieldManager: FIELD_MANAGER.agent });
  const meta = { apiVersion: API_VERSION, kind: KIND, metadata: { name: disk.metadata.name! } } as const;
  const csi = nodeDisksFor(await cp.csiController());
  const asCsi = { fieldManager: FIELD_MANAGER.csiController, force: true } as const;
  await csi.apply({ ...meta, spec: { desired: { state: 'Reserved', owner: `${PV_OWNER_PREFIX}pvc-1`, ownerUID: '1' } } }, asCsi);
  const person = await denied(
    t,
    nodeDisksFor(cp.admin()).apply({ ...meta, spec: { desired: { state: 'Available', owner: '', ownerUID: '' } } }, { fieldManager: FIELD_MANAGER.plugin, force: true }),
  );
  t.regex(person.message, /ValidatingAdmissionPolicy 'prod-nodedisks-pv\.localtest\.example\.com-v2'.*holds PersistentVolume pvc-1: only the CSI driver changes that reservation/);
  const bare = await denied(t, csi.apply({ ...meta, spec: { desired: { state: 'Available' } } }, asCsi));
  t.regex(bare.message, /ValidatingAdmissionPolicy 'prod-nodedisks-csi-controller\.localtest\.example\.com-v2'.*released with a wipe request/);
  t.deepEqual((await csi.apply({ ...meta, spec: { desired: { state: 'Available', wipe: 'pv-1' } } }, asCsi)).spec.desired, { state: 'Available', wipe: 'pv-1' });
  t.is(await cp.kubectl(cp.admin(), ['get', 'csidriver', '-o', 'jsonpath={.items[*].metadata.name}']), 'nodedisks.localtest.example.com');
});
