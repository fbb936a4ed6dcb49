// The NodeDisk contract on a real kube-apiserver: the CRD from kustomize/crd installs, the API server
// itself rejects bad NodeDisks with a clear message, identity is immutable, field selectors work,
// kubectl prints the seed's columns, and field managers split ownership as docs/design.md says.
import test from 'ava';
import { FIELD_MANAGER } from '../../api/constants.ts';
import { labelValue, nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import { runKubectl } from '../../hack/controlplane/controlplane.ts';
import { fullNodeDisk, newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const admin = () => nodeDisksFor(controlPlane().admin());

async function rejection(t: { fail: (m: string) => void }, body: NodeDisk): Promise<string> {
  try {
    await admin().create(body, { fieldManager: 'test' });
  } catch (err) {
    if (err instanceof ApiError && err.statusCode === 422) return err.message;
    throw err;
  }
  t.fail(`the API server accepted ${JSON.stringify(body.spec)}`);
  return '';
}

test('the CRD from kustomize/crd is established with its short name and scope', async (t) => {
  const out = await controlPlane().kubectl(controlPlane().admin(), ['get', 'crd', 'nodedisks.localtest.example.com', '-o', 'json']);
  const crd = JSON.parse(out) as { spec: { scope: string; names: { shortNames: string[] } }; status: { conditions: { type: string; status: string }[] } };
  t.is(crd.spec.scope, 'Cluster');
  t.deepEqual(crd.spec.names.shortNames, ['ndisk']);
  t.true(crd.status.conditions.some((c) => c.type === 'Established' && c.status === 'True'));
});

const badDisks: [string, (d: NodeDisk) => void, RegExp][] = [
  ['nodeName that is not a DNS subdomain', (d) => (d.spec.nodeName = 'Node_A'), /spec\.nodeName: Invalid value: "Node_A": spec\.nodeName in body should match/],
  ['diskID with a slash', (d) => ((d.spec.diskID = 'a/b'), (d.spec.path = '/var/lib/x/a/b.img')), /spec\.diskID: Invalid value: "a\/b"/],
  ['diskID with ..', (d) => ((d.spec.diskID = 'a..b'), (d.spec.path = '/var/lib/x/a..b.img')), /spec\.diskID must not contain '\.\.'/],
  ['diskID that is ../ traversal', (d) => ((d.spec.diskID = '../etc'), (d.spec.path = '/var/lib/x/../etc.img')), /spec\.diskID/],
  ['relative path', (d) => (d.spec.path = 'disks/disk1.img'), /spec\.path must be an absolute path/],
  ['path with a .. segment', (d) => (d.spec.path = '/var/lib/../disk1.img'), /spec\.path must not contain '\.' or '\.\.' segments/],
  ['path that is not the disk image of diskID', (d) => (d.spec.path = '/var/lib/node-disks-manager/disks/other.img'), /spec\.path must be the host path of the disk image/],
  [
    'desired state outside the enum',
    (d) => (d.spec.desired = { state: 'Mounted' as 'Reserved' }),
    /spec\.desired\.state: Unsupported value: "Mounted": supported values: "Available", "Reserved"/,
  ],
  ['owner on an Available disk', (d) => (d.spec.desired = { state: 'Available', owner: 'alice' }), /spec\.desired\.owner may be set only when spec\.desired\.state is Reserved/],
  ['owner too long', (d) => (d.spec.desired = { state: 'Reserved', owner: 'a'.repeat(300) }), /spec\.desired\.owner: Too long/],
  ['owner with spaces', (d) => (d.spec.desired = { state: 'Reserved', owner: 'alice smith' }), /spec\.desired\.owner in body should match/],
  ['missing spec.path', (d) => delete (d.spec as Partial<NodeDisk['spec']>).path, /spec\.path: Required value/],
];

for (const [what, mutate, message] of badDisks) {
  test(`the API server rejects a NodeDisk with ${what}`, async (t) => {
    const d = newNodeDisk('node-bad', `bad-${badDisks.findIndex(([w]) => w === what)}`);
    mutate(d);
    t.regex(await rejection(t, d), message);
  });
}

test('status.node.phase outside the enum is rejected on the status subresource', async (t) => {
  const d = newNodeDisk('node-phase', 'disk1');
  await admin().create(d, { fieldManager: 'test' });
  const err = await t.throwsAsync(
    admin().applyStatus({ apiVersion: d.apiVersion, kind: d.kind, metadata: { name: d.metadata.name! }, status: { node: { phase: 'Broken' as 'Error' } } }, { fieldManager: FIELD_MANAGER.agent }),
    { instanceOf: ApiError },
  );
  t.regex(err?.message ?? '', /status\.node\.phase: Unsupported value: "Broken"/);
});

test('a new NodeDisk defaults to desired Available, and every field of the types round-trips', async (t) => {
  const plain = await admin().create(newNodeDisk('node-defaults', 'disk1'), { fieldManager: FIELD_MANAGER.agent });
  t.deepEqual(plain.spec.desired, { state: 'Available' });

  const full = fullNodeDisk('node-roundtrip', 'disk1');
  const created = await admin().create(full, { fieldManager: 'test' });
  t.deepEqual(created.spec, full.spec);
  t.deepEqual(created.status, {}, 'status given on create is ignored (it has its own subresource); the CRD serves it as {} (ADR 20)');
  const withStatus = await admin().applyStatus({ apiVersion: full.apiVersion, kind: full.kind, metadata: { name: full.metadata.name! }, status: full.status }, { fieldManager: 'test' });
  t.deepEqual(withStatus.status, full.status, 'nothing was pruned: the schema has every field');
});

test('identity fields are immutable once created', async (t) => {
  const d = newNodeDisk('node-immutable', 'disk1');
  await admin().create(d, { fieldManager: FIELD_MANAGER.agent });
  for (const [field, value] of [
    ['nodeName', 'node-other'],
    ['diskID', 'disk2'],
    ['path', '/elsewhere/disk1.img'],
  ] as const) {
    const err = await t.throwsAsync(admin().mergePatch(d.metadata.name!, { spec: { [field]: value } }, { fieldManager: 'test' }), {
      instanceOf: ApiError,
    });
    t.regex(err?.message ?? '', new RegExp(`spec\\.${field} is immutable`), field);
  }
});

test('a watch with a spec.nodeName field selector sees only that node', async (t) => {
  const client = admin();
  const controller = new AbortController();
  const seen: string[] = [];
  const watching = (async () => {
    for await (const ev of client.watch({ fieldSelector: 'spec.nodeName=node-w1' }, controller.signal)) {
      if (ev.type === 'ADDED') seen.push(ev.object.spec.nodeName + '/' + ev.object.spec.diskID);
      if (seen.length === 2) controller.abort();
    }
  })();
  // Give the watch a moment to open, then create objects on two nodes.
  await new Promise((r) => setTimeout(r, 300));
  for (const [node, disk] of [
    ['node-w2', 'disk1'],
    ['node-w1', 'disk1'],
    ['node-w2', 'disk2'],
    ['node-w1', 'disk2'],
  ] as const) {
    await client.create(newNodeDisk(node, disk), { fieldManager: FIELD_MANAGER.agent });
  }
  await Promise.race([watching, new Promise((_, rej) => setTimeout(() => rej(new Error('watch timed out')), 10_000))]);
  t.deepEqual(seen.sort(), ['node-w1/disk1', 'node-w1/disk2']);

  const listed = await client.list({ fieldSelector: 'spec.nodeName=node-w2' });
  t.deepEqual(listed.items.map((i) => i.spec.diskID).sort(), ['disk1', 'disk2']);
});

test('kubectl get -o wide prints the seed columns plus wide ones, with both kubectls', async (t) => {
  const cp = controlPlane();
  const d = newNodeDisk('node-kubectl', 'disk1');
  await admin().create(d, { fieldManager: FIELD_MANAGER.agent });
  await admin().applyStatus(
    { apiVersion: d.apiVersion, kind: d.kind, metadata: { name: d.metadata.name! }, status: { node: { phase: 'Available', capacityBytes: 67108864 } } },
    { fieldManager: FIELD_MANAGER.agent },
  );
  const built = cp.binaries.kubectl;
  const kubectls = [built, 'kubectl'];
  for (const bin of kubectls) {
    const version = await runKubectl(bin, ['version', '--client', '-o', 'json']);
    t.log(`${bin}: ${(JSON.parse(version) as { clientVersion: { gitVersion: string } }).clientVersion.gitVersion}`);
    const narrow = await runKubectl(bin, ['--kubeconfig', cp.admin().kubeconfig, 'get', 'nodedisks', d.metadata.name!]);
    t.regex(narrow, /^NAME\s+NODE\s+DISK\s+DESIRED\s+PHASE\s*\n/);
    t.regex(narrow, /node-disk-node-kubectl-disk1\s+node-kubectl\s+disk1\s+Available\s+Available/);
    const wide = await runKubectl(bin, ['--kubeconfig', cp.admin().kubeconfig, 'get', 'ndisk', '-o', 'wide', '-l', 'localtest.example.com/node=node-kubectl']);
    t.regex(wide, /^NAME\s+NODE\s+DISK\s+DESIRED\s+PHASE\s+OWNER\s+CAPACITY\s+MEDIA\s+READY\s+CORDONED\s+AGE\s*\n/);
    t.regex(wide, /node-disk-node-kubectl-disk1\s+node-kubectl\s+disk1\s+Available\s+Available\s+67108864\s+\d+s/);
    const selected = await runKubectl(bin, ['--kubeconfig', cp.admin().kubeconfig, 'get', 'nodedisks', '--field-selector', 'spec.nodeName=node-kubectl', '-o', 'name']);
    t.is(selected.trim(), `nodedisk.localtest.example.com/${d.metadata.name}`);
  }
});

test('two field managers applying different fields coexist; the same field conflicts', async (t) => {
  const client = admin();
  const d = newNodeDisk('node-ssa', 'disk1');
  const name = d.metadata.name!;
  await client.create(d, { fieldManager: FIELD_MANAGER.agent });
  const meta = { apiVersion: d.apiVersion, kind: d.kind, metadata: { name } } as const;

  await client.applyStatus({ ...meta, status: { node: { phase: 'Available', capacityBytes: 1024 } } }, { fieldManager: FIELD_MANAGER.agent });
  const both = await client.applyStatus({ ...meta, status: { controller: { accepted: true, observedGeneration: 1 } } }, { fieldManager: FIELD_MANAGER.controller });
  t.is(both.status?.node?.phase, 'Available', 'the controller did not clear the agent status');
  t.is(both.status?.controller?.accepted, true);

  const err = await t.throwsAsync(client.applyStatus({ ...meta, status: { node: { phase: 'Error' } } }, { fieldManager: FIELD_MANAGER.controller }), { instanceOf: ApiError });
  t.is(err?.statusCode, 409);
  t.regex(err?.message ?? '', /conflict with "node-disks-agent"/);
  t.regex(err?.message ?? '', /\.status\.node\.phase/);

  // spec.desired.state was defaulted when the agent created the object, and defaulted fields belong to
  // the creator's manager. So the first writer of spec.desired takes it over with a forced apply
  // (docs/adr/0004-field-ownership.md); after that, another manager's different value conflicts.
  const created = await client.get(name);
  const desiredOwners = (created.metadata.managedFields ?? []).filter((f) => JSON.stringify(f.fieldsV1 ?? {}).includes('"f:desired"')).map((f) => f.manager);
  t.deepEqual(desiredOwners, [FIELD_MANAGER.agent]);
  const unforced = await t.throwsAsync(client.apply({ ...meta, spec: { desired: { state: 'Reserved', owner: 'auto' } } }, { fieldManager: FIELD_MANAGER.controller }), { instanceOf: ApiError });
  t.regex(unforced?.message ?? '', /conflict with "node-disks-agent".*\.spec\.desired\.state/);
  await client.apply({ ...meta, spec: { desired: { state: 'Reserved', owner: 'auto' } } }, { fieldManager: FIELD_MANAGER.controller, force: true });
  const spec = await t.throwsAsync(client.apply({ ...meta, spec: { desired: { state: 'Available' } } }, { fieldManager: FIELD_MANAGER.argocd }), { instanceOf: ApiError });
  t.regex(spec?.message ?? '', /conflict with "node-disks-operator"/);
  // The same value from a second manager is not a conflict: both then own the field.
  await client.apply({ ...meta, spec: { desired: { state: 'Reserved', owner: 'auto' } } }, { fieldManager: FIELD_MANAGER.argocd });
});

// A NodeDisk named other than node-disk-<node>-<disk> of its own spec (api/names.ts) is an
// alias of a disk that nothing acts on; the API server refuses it (a CEL rule at the root of the CRD).
const LONG_NODE = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(50)}`;
/** A NodeDisk as the agent makes it (label values shortened as the agent does), under the given name. */
const named = (name: string, node: string, disk: string): NodeDisk => {
  const d = newNodeDisk(node, disk);
  d.metadata.name = name;
  d.metadata.labels = { 'localtest.example.com/node': labelValue(node), 'localtest.example.com/disk': labelValue(disk) };
  return d;
};

test('the API server accepts only the canonical name of a NodeDisk, normalization and long names included', async (t) => {
  const accepted: [string, string][] = [
    ['node-canon', 'disk1'],
    ['ip-10-0-0-1.ec2.internal', 'Data_Disk.2'],
    ['node--canon.x', 'A__b..c'.replace('..', '.')],
    ['node-canon', 'trailing_-_'],
    ['node-canon', `D${'_'.repeat(126)}x`],
    [LONG_NODE, 'disk1'],
    [LONG_NODE, `disk-${'z'.repeat(100)}-2`],
  ];
  for (const [node, disk] of accepted) {
    const d = named(nodeDiskName(node, disk), node, disk);
    const created = await admin().create(d, { fieldManager: 'test' });
    t.is(created.metadata.name, nodeDiskName(node, disk));
  }
  const refused: [string, string, string][] = [
    ['node-disk-node-canon-disk1-alias', 'node-canon', 'disk1'],
    ['node-disk-node-other-disk1', 'node-canon', 'disk1'],
    ['node-disk-node-canon-data-disk2', 'node-canon', 'Data_Disk_2'],
    ['node-disk-node-canon-Data_Disk_3'.toLowerCase(), 'node-canon', 'Data_Disk_3'],
    ['alias', 'node-canon', 'disk7'],
    [`${nodeDiskName(LONG_NODE, 'disk9').slice(0, 200)}-0123456789`, LONG_NODE, 'disk9'],
    [nodeDiskName(LONG_NODE, 'disk8').replace(/-[0-9a-f]{10}$/, '-xyz'), LONG_NODE, 'disk8'],
  ];
  for (const [name, node, disk] of refused) {
    const message = await rejection(t, named(name, node, disk));
    t.regex(message, new RegExp(`metadata\\.name must be ${nodeDiskName(node, disk).slice(0, 100)}`), name);
  }
});
