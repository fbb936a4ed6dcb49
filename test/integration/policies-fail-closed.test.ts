// The policies name the install's ServiceAccounts through their bindings' parameter (ADR 28). Without that
// ServiceAccount (deleted, relabelled, or an overlay tool that left the parameter's namespace behind), the
// bindings refuse every request they match: no NodeDisk is written by anyone, and no Lease of the install's
// namespace, while the Leases of the rest of the cluster (node heartbeats, leader elections) are untouched.
// Its own control plane: the file removes the controller's ServiceAccount.
import { join } from 'node:path';
import test from 'ava';
import { API_VERSION, FIELD_MANAGER, KIND } from '../../api/constants.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { denied, nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const lease = (name: string) => ({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name }, spec: { holderIdentity: 'someone' } });

test.serial("without the controller's ServiceAccount every NodeDisk write is refused, its namespace's Leases too, other Leases not; restored, it works again", async (t) => {
  const cp = controlPlane();
  const admin = nodeDisksFor(cp.admin());
  const disk = newNodeDisk('fc-node', 'disk1');
  await admin.create(disk, { fieldManager: FIELD_MANAGER.agent });
  const release = () =>
    admin.apply(
      { apiVersion: API_VERSION, kind: KIND, metadata: { name: disk.metadata.name! }, spec: { desired: { state: 'Reserved', owner: 'team-db' } } },
      { fieldManager: FIELD_MANAGER.plugin, force: true },
    );

  await cp.kubectl(cp.admin(), ['delete', 'serviceaccount', 'node-disks-operator', '-n', 'node-disks-system']);
  const refused = await eventually(
    "the bindings of the controller's policies find no parameter",
    () =>
      release().then(
        () => undefined,
        (err: Error) => (/no params found/.test(err.message) ? err : undefined),
      ),
    30_000,
    200,
  );
  t.regex(refused.message, /nodedisks-(claims|controller)\.localtest\.example\.com.*no params found for policy binding with `Deny` parameterNotFoundAction/);
  const rest = restFor(cp.admin());
  const inInstall = await denied(t, rest.request('POST', '/apis/coordination.k8s.io/v1/namespaces/node-disks-system/leases', { body: lease('fc-probe') }));
  t.regex(inInstall.message, /nodedisks-controller-leases\.localtest\.example\.com.*no params found/);
  const elsewhere = await rest.request<{ metadata: { name: string } }>('POST', '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', { body: lease('fc-node') });
  t.is(elsewhere.metadata.name, 'fc-node', "a Lease outside the install's namespace is none of the policies' business");

  await cp.kubectl(cp.admin(), ['apply', '--server-side', '-k', join(REPO_ROOT, 'kustomize/rbac')]);
  const reserved = await eventually('the parameter found again', () => release().catch(() => undefined), 30_000, 200);
  t.deepEqual(reserved.spec.desired, { state: 'Reserved', owner: 'team-db' });
});

// The same for the CSI controller's ServiceAccount, which the install keeps whether or not the driver runs.
test.serial("without the CSI controller's ServiceAccount every NodeDisk write is refused, its namespace's Leases too; restored, it works again", async (t) => {
  const cp = controlPlane();
  const admin = nodeDisksFor(cp.admin());
  const disk = newNodeDisk('fc-node', 'disk2');
  await admin.create(disk, { fieldManager: FIELD_MANAGER.agent });
  const label = (value: string) => admin.mergePatch(disk.metadata.name!, { metadata: { labels: { 'example.com/probe': value } } }, { fieldManager: FIELD_MANAGER.plugin });

  await cp.kubectl(cp.admin(), ['delete', 'serviceaccount', 'node-disks-csi-controller', '-n', 'node-disks-system']);
  const refused = await eventually(
    "the bindings of the CSI controller's policies find no parameter",
    () =>
      label('a').then(
        () => undefined,
        (err: Error) => (/no params found/.test(err.message) ? err : undefined),
      ),
    30_000,
    200,
  );
  t.regex(refused.message, /nodedisks-(pv|csi-controller)\.localtest\.example\.com.*no params found for policy binding with `Deny` parameterNotFoundAction/);
  const inInstall = await denied(t, restFor(cp.admin()).request('POST', '/apis/coordination.k8s.io/v1/namespaces/node-disks-system/leases', { body: lease('fc-probe-csi') }));
  t.regex(inInstall.message, /nodedisks-(controller|csi-controller)-leases\.localtest\.example\.com.*no params found/);

  await cp.kubectl(cp.admin(), ['apply', '--server-side', '-k', join(REPO_ROOT, 'kustomize/rbac')]);
  const labelled = await eventually('the parameter found again', () => label('b').catch(() => undefined), 30_000, 200);
  t.is(labelled.metadata.labels?.['example.com/probe'], 'b');
});
