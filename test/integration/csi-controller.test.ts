// The CSI driver's controller side as csi-provisioner calls it, against the real API server with the
// install's RBAC and admission policies, the real controller (label policy, claims) and two agents: a PV is a
// NodeDisk reserved for it by the one allocator, on the node asked for, the smallest that fits; nobody else
// hands that disk out; deleting the volume wipes the disk before the next owner gets it (ADR 39, ADR 38).
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { NodeDiskClaimClient } from '../../api/claim-client.ts';
import { API_VERSION, CSI_TOPOLOGY_KEY, FIELD_MANAGER, KIND, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import { Allocator } from '../../controller/allocator.ts';
import { leanNodeDisk } from '../../controller/cache.ts';
import { ControllerService } from '../../csi/controller-service.ts';
import { Informer } from '../../lib/kube/informer.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { newClaim } from '../../hack/lib/nodedisks.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { type Program, startAgent, startController, startCsiController } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { type CsiClient, csiClient, statusOf } from '../../hack/lib/csi-client.ts';
import { execResult } from '../harness/exec.ts';
import { denied, nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const MiB = 2 ** 20;
const [A, B, C, D, E, F] = ['csi-a', 'csi-b', 'csi-c', 'csi-d', 'csi-e', 'csi-f'];
let agentE: Program | undefined;
let csiController: Program;
const SECRET = 'bytes of the first PV';
let work = '';
const programs: Program[] = [];
let csi: { call: CsiClient; close: () => void };
const admin = () => nodeDisksFor(controlPlane().admin());
const diskDir = (node: string) => join(work, node);
const mountCap = { access_mode: { mode: 'SINGLE_NODE_WRITER' }, mount: { fs_type: 'ext4', mount_flags: [] } };
const onNode = (node: string) => ({ requisite: [{ segments: { [CSI_TOPOLOGY_KEY]: node } }], preferred: [{ segments: { [CSI_TOPOLOGY_KEY]: node } }] });
const pvName = () => `pvc-${randomUUID()}`;

/** Sparse images of these sizes (MiB) as disk1.img, disk2.img, … of `node`. */
async function seed(node: string, sizes: number[]): Promise<void> {
  await mkdir(diskDir(node), { recursive: true });
  for (const [i, size] of sizes.entries()) {
    const fh = await open(join(diskDir(node), `disk${i + 1}.img`), 'w');
    await fh.truncate(size * MiB);
    await fh.close();
  }
}

async function create(name: string, requiredMiB: number, node: string, limitMiB = 0): Promise<{ volume_id: string; capacity_bytes: number; volume_context: Record<string, string> }> {
  const res = await csi.call.CreateVolume({
    name,
    capacity_range: { required_bytes: requiredMiB * MiB, limit_bytes: limitMiB * MiB },
    volume_capabilities: [mountCap],
    accessibility_requirements: onNode(node),
  });
  return res.volume as { volume_id: string; capacity_bytes: number; volume_context: Record<string, string> };
}

async function diskWhere(name: string, what: string, ok: (nd: NodeDisk) => boolean): Promise<NodeDisk> {
  return await eventually(`NodeDisk ${name} ${what}`, async () => {
    const nd = await admin().get(name);
    return ok(nd) ? nd : undefined;
  });
}

test.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-csi-controller-'));
  const logDir = join(work, 'logs');
  await seed(A, [64, 64, 128]);
  await seed(B, [64, 64]);
  await seed(C, [64]);
  await seed(D, [64, 64]);
  await seed(E, [64]);
  await seed(F, [320]);
  programs.push(await startController(controlPlane(), { logDir }));
  for (const node of [A, B, C, D, F]) programs.push(await startAgent(controlPlane(), { node, diskDir: diskDir(node), logDir, rescanInterval: '1s' }));
  // E's agent renews its heartbeat Lease every second (it lasts 4 s): stopped, it is stale within seconds.
  agentE = await startAgent(controlPlane(), { node: E, diskDir: diskDir(E), logDir, rescanInterval: '1s', heartbeat: '1s' });
  programs.push(agentE);
  csiController = await startCsiController(controlPlane(), { logDir, csiAddress: join(work, 'csi.sock') });
  programs.push(csiController);
  await eventually('10 Available disks', async () => (await admin().list()).items.filter((d) => d.status?.node?.phase === 'Available').length === 10, 60_000);
  csi = csiClient(join(work, 'csi.sock'), 'Controller');
  await eventually('the CSI controller ready', async () => (await statusOf(csi.call.GetCapacity({ volume_capabilities: [mountCap] }))) === 'OK', 30_000);
});

test.afterEach.always((t) => {
  if (!t.passed) for (const p of programs) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});

test.after.always(async () => {
  csi?.close();
  await Promise.all(programs.map((p) => p.stop()));
  if (work) await rm(work, { recursive: true, force: true });
});

test.serial('CreateVolume reserves the smallest free disk that fits on the node asked for, for the PV and its PVC UID, and a repeated call gets the same volume', async (t) => {
  const name = pvName();
  const v = await create(name, 100, A);
  t.is(v.volume_id, `${nodeDiskName(A, 'disk3')}/${name}`);
  t.is(v.capacity_bytes, 128 * MiB);
  t.deepEqual(v.volume_context, { nodeDisk: nodeDiskName(A, 'disk3'), diskID: 'disk3', node: A });
  const nd = await admin().get(nodeDiskName(A, 'disk3'));
  t.deepEqual(nd.spec.desired, { state: 'Reserved', owner: `pv:${name}`, ownerUID: name.slice('pvc-'.length) });
  // The provisioner retries after a lost answer: the same volume, no second disk.
  t.is((await create(name, 100, A)).volume_id, v.volume_id);
  t.is((await admin().list()).items.filter((d) => d.spec.desired?.owner === `pv:${name}`).length, 1);
  // The same name asking for more than it got is another request.
  t.is(await statusOf(create(name, 200, A)), 'ALREADY_EXISTS');
  // 50 MiB on node B: a 64 MiB disk there, never A's.
  const small = await create(pvName(), 50, B);
  t.is(small.volume_context.node, B);
  t.is(small.capacity_bytes, 64 * MiB);
});

test.serial('GetCapacity tells the scheduler per node what is free and the largest free disk; a request no disk fits is RESOURCE_EXHAUSTED naming the node', async (t) => {
  const cap = async (node?: string) =>
    (await csi.call.GetCapacity({ volume_capabilities: [mountCap], ...(node ? { accessible_topology: { segments: { [CSI_TOPOLOGY_KEY]: node } } } : {}) })) as {
      available_capacity: number;
      maximum_volume_size: { value: number };
    };
  // A: disk3 is the first test's; disk1 and disk2 are free.
  const a = await cap(A);
  t.is(a.available_capacity, 128 * MiB);
  t.is(a.maximum_volume_size.value, 64 * MiB);
  const b = await cap(B);
  t.is(b.available_capacity, 64 * MiB);
  t.is(b.maximum_volume_size.value, 64 * MiB);
  const other = await csi.call.GetCapacity({ volume_capabilities: [mountCap], accessible_topology: { segments: { 'topology.kubernetes.io/zone': 'z1' } } });
  t.is(other.available_capacity, 0);
  const err = await create(pvName(), 100, A).catch((e: Error) => e);
  t.regex(String((err as Error).message), /RESOURCE_EXHAUSTED.*no free NodeDisk of at least 104857600 bytes that holds no earlier data on node csi-a/);
  t.is(await statusOf(csi.call.CreateVolume({ name: pvName(), volume_capabilities: [{ access_mode: { mode: 'MULTI_NODE_MULTI_WRITER' }, mount: {} }] })), 'INVALID_ARGUMENT');
});

test.serial("a PV's disk is handed out by nobody else: not by the label, not by reserve, not to a claim, not by an admin", async (t) => {
  const name = pvName();
  const v = await create(name, 10, A);
  const disk = v.volume_context.nodeDisk ?? '';
  const owner = `pv:${name}`;
  // The label: the controller says it has no effect.
  await controlPlane().kubectl(controlPlane().admin(), ['label', 'nodedisk', disk, `${LABEL_AUTO_RESERVE}=true`]);
  const labelled = await diskWhere(
    disk,
    'refusing the label',
    (nd) => nd.status?.conditions?.some((c) => c.type === 'Accepted' && c.status === 'False' && c.reason === 'ReservedByOther') ?? false,
  );
  t.is(labelled.spec.desired?.owner, owner);
  await controlPlane().kubectl(controlPlane().admin(), ['label', 'nodedisk', disk, `${LABEL_AUTO_RESERVE}-`]);
  // The plugin, as a person with the NodeDisk editor role would run it (here the admin: the API server's policy holds even so).
  const bin = join(REPO_ROOT, 'dist', 'bin');
  const reserve = await execResult('kubectl', ['nodedisks', 'reserve', disk, '--owner', 'alice'], { env: { PATH: `${bin}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig } });
  t.not(reserve.code, 0);
  const release = await execResult('kubectl', ['nodedisks', 'release', disk, '--owner', owner], { env: { PATH: `${bin}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig } });
  t.not(release.code, 0);
  await denied(t, admin().apply({ apiVersion: API_VERSION, kind: KIND, metadata: { name: disk }, spec: { desired: { state: 'Available' } } }, { fieldManager: 'someone', force: true }));
  // A claim that names the disk waits.
  await controlPlane().kubectl(controlPlane().admin(), ['create', 'namespace', 'team-pv']);
  const claims = new NodeDiskClaimClient(admin().rest);
  await claims.create(newClaim('team-pv', 'wants-it', { diskName: disk }), { fieldManager: 'test' });
  await eventually('the claim Pending', async () => (await claims.get('team-pv', 'wants-it')).status?.phase === 'Pending');
  t.is((await admin().get(disk)).spec.desired?.owner, owner);
  await claims.delete('team-pv', 'wants-it');
  await csi.call.DeleteVolume({ volume_id: v.volume_id });
});

test.serial('DeleteVolume wipes the disk before the next PV gets it, and a repeated DeleteVolume of the old volume leaves the new owner alone', async (t) => {
  // B's disks: one is the first test's; fill the other, so the next volume on B must wait for this one.
  const first = await create(pvName(), 60, B);
  const disk = first.volume_context.nodeDisk ?? '';
  const image = join(diskDir(B), `${first.volume_context.diskID}.img`);
  const fh = await open(image, 'r+');
  await fh.write(Buffer.from(SECRET), 0, SECRET.length, 7 * MiB);
  await fh.sync();
  await fh.close();
  await csi.call.DeleteVolume({ volume_id: first.volume_id });
  // Repeated: success, nothing more.
  await csi.call.DeleteVolume({ volume_id: first.volume_id });
  const released = await admin().get(disk);
  t.is(released.spec.desired?.state, 'Available');
  t.regex(released.spec.desired?.wipe ?? '', /^pv-[0-9a-f-]{36}-g\d+$/);
  const next = await eventually('a new volume on B', async () => {
    try {
      return await create(pvName(), 60, B);
    } catch {
      return undefined;
    }
  });
  t.is(next.volume_context.nodeDisk, disk);
  t.false((await readFile(image)).includes(SECRET), "the next PV's disk holds the first PV's bytes");
  t.is((await admin().get(disk)).status?.node?.wipedFor, released.spec.desired?.wipe);
  // The old volume's ID names the old PV: a DeleteVolume repeated late does not release the new owner's disk.
  await csi.call.DeleteVolume({ volume_id: first.volume_id });
  t.is((await admin().get(disk)).spec.desired?.owner?.startsWith('pv:'), true);
  t.not(`${disk}/${(await admin().get(disk)).spec.desired?.owner?.slice(3)}`, first.volume_id);
  // An ID of no volume of ours is no volume: success.
  t.is(await statusOf(csi.call.DeleteVolume({ volume_id: 'not-ours' })), 'OK');
  t.is(await statusOf(csi.call.ValidateVolumeCapabilities({ volume_id: first.volume_id, volume_capabilities: [mountCap] })), 'NOT_FOUND');
});

test.serial("a free disk that holds an earlier owner's bytes (released without a wipe) becomes no PV until it is wiped", async (t) => {
  const disk = nodeDiskName(C, 'disk1');
  const bin = join(REPO_ROOT, 'dist', 'bin');
  const plugin = (...args: string[]) => execResult('kubectl', ['nodedisks', ...args], { env: { PATH: `${bin}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig } });
  t.is((await plugin('reserve', disk, '--owner', 'bob')).code, 0);
  await diskWhere(disk, 'Reserved on the node', (nd) => nd.status?.node?.phase === 'Reserved');
  t.is((await plugin('release', disk, '--owner', 'bob')).code, 0);
  await diskWhere(disk, 'free and holding data', (nd) => nd.status?.node?.phase === 'Available' && nd.status.node.holdsData === true);
  t.regex(String(await create(pvName(), 10, C).catch((e: Error) => e.message)), /RESOURCE_EXHAUSTED.*holds no earlier data on node csi-c/);
  const cap = await csi.call.GetCapacity({ volume_capabilities: [mountCap], accessible_topology: { segments: { [CSI_TOPOLOGY_KEY]: C } } });
  t.is(cap.available_capacity, 0);
  t.is((await plugin('release', disk, '--wipe')).code, 0);
  await diskWhere(disk, 'wiped', (nd) => nd.status?.node?.holdsData !== true && nd.status?.node?.phase === 'Available' && nd.status.node.wipedFor === nd.spec.desired?.wipe);
  t.is((await create(pvName(), 10, C)).volume_context.nodeDisk, disk);
});

test.serial('the same volume name on the same disk a second time is wiped again when it is deleted: each reservation asks for a wipe of its own', async (t) => {
  // A name without a PVC UID (csi-sanity's, a person's): the reservation's UID is the name's digest, the same each time.
  const name = 'same-name-twice';
  const disk = nodeDiskName(D, 'disk1');
  const image = join(diskDir(D), 'disk1.img');
  const tokens: string[] = [];
  for (const round of [1, 2]) {
    const v = await create(name, 10, D);
    t.is(v.volume_context.nodeDisk, disk);
    await diskWhere(disk, `Reserved on the node (round ${round})`, (nd) => nd.status?.node?.phase === 'Reserved');
    const fh = await open(image, 'r+');
    await fh.write(Buffer.from(`${SECRET} ${round}`), 0, SECRET.length + 2, 5 * MiB);
    await fh.sync();
    await fh.close();
    t.is(await statusOf(csi.call.DeleteVolume({ volume_id: v.volume_id })), 'OK', `round ${round}: DeleteVolume failed`);
    const released = await admin().get(disk);
    tokens.push(released.spec.desired?.wipe ?? '');
    await diskWhere(disk, `wiped (round ${round})`, (nd) => nd.status?.node?.phase === 'Available' && nd.status.node.wipedFor === nd.spec.desired?.wipe);
    t.false((await readFile(image)).includes(SECRET), `round ${round}: the volume's bytes outlived its deletion`);
  }
  t.not(tokens[0], tokens[1], "the second reservation was released with the first one's wipe token");
});

test.serial('a disk whose node agent is stale becomes no PV and counts for no capacity, whatever it last reported; once the agent is back it does', async (t) => {
  const disk = nodeDiskName(E, 'disk1');
  const readyReason = (nd: NodeDisk) => nd.status?.conditions?.find((c) => c.type === 'Ready')?.reason;
  await diskWhere(disk, 'Ready', (nd) => readyReason(nd) === 'PhaseMatchesDesired');
  await agentE!.signal('SIGSTOP');
  try {
    await diskWhere(disk, 'AgentStale', (nd) => readyReason(nd) === 'AgentStale');
    t.is((await admin().get(disk)).status?.node?.phase, 'Available', 'what the stale agent last reported');
    t.regex(String(await create(pvName(), 10, E).catch((e: Error) => e.message)), /RESOURCE_EXHAUSTED.*on node csi-e/);
    const cap = await csi.call.GetCapacity({ volume_capabilities: [mountCap], accessible_topology: { segments: { [CSI_TOPOLOGY_KEY]: E } } });
    t.is(cap.available_capacity, 0);
    t.is((await admin().get(disk)).spec.desired?.state ?? 'Available', 'Available', 'the disk was reserved while its agent was stale');
  } finally {
    await agentE!.signal('SIGCONT');
  }
  await diskWhere(disk, 'Ready again', (nd) => readyReason(nd) === 'PhaseMatchesDesired');
  const v = await create(pvName(), 10, E);
  t.is(v.volume_context.nodeDisk, disk);
  await csi.call.DeleteVolume({ volume_id: v.volume_id });
});

test.serial("a CreateVolume repeated to a replica whose cache has not seen the first answer's reservation (a provisioner failover) gets that disk, not a second one", async (t) => {
  // The new leader: the real service and allocator in this process, on an informer that synced and then
  // stopped, so that its cache lags for good behind what the old leader writes next.
  const disks = nodeDisksFor(await controlPlane().csiController());
  const log = createLogger('failover', { level: 'warn' });
  const stopInformer = new AbortController();
  const informer: Informer<NodeDisk> = new Informer<NodeDisk>(
    { list: (l) => disks.list(l), listText: (l) => disks.listText(l), watch: (w, s) => disks.watch(w, s), watchList: (w, s) => disks.watch(w, s) },
    { onUpsert: (nd) => allocator.diskChanged(nd.metadata.name ?? ''), onDelete: () => {}, onSync: () => allocator.index.rebuild(informer.cache) },
    { log, transform: leanNodeDisk, watchList: false },
  );
  const allocator = new Allocator({ disks, diskInformer: informer, fieldManager: FIELD_MANAGER.csiController, log });
  const running = informer.run(stopInformer.signal);
  await eventually('the new leader synced', async () => informer.hasSynced, 30_000);
  stopInformer.abort();
  await running;
  const lagging = new ControllerService({ allocator, disks, log, notReady: () => undefined });

  // The old leader (the running driver) reserves, and its answer is lost.
  const name = pvName();
  const first = await create(name, 10, D);
  const again = (await lagging.handlers.CreateVolume({
    name,
    capacity_range: { required_bytes: 10 * MiB, limit_bytes: 0 },
    volume_capabilities: [{ access_type: 'mount', access_mode: { mode: 'SINGLE_NODE_WRITER' }, mount: { fs_type: 'ext4', mount_flags: [], volume_mount_group: '' } }],
    parameters: {},
    accessibility_requirements: onNode(D),
  })) as { volume: { volume_id: string } };
  t.is(again.volume.volume_id, first.volume_id, 'the repeated CreateVolume reserved another disk');
  const held = (await admin().list()).items.filter((nd) => nd.spec.desired?.owner === `pv:${name}`).map((nd) => nd.metadata.name);
  t.deepEqual(held, [first.volume_context.nodeDisk]);
  await csi.call.DeleteVolume({ volume_id: first.volume_id });
  for (const n of held) if (n && n !== first.volume_context.nodeDisk) await csi.call.DeleteVolume({ volume_id: `${n}/${name}` });
});

test.serial('an xfs volume is placed only on a disk mkfs.xfs can format (300 MiB and more): none on a node of 64 MiB disks, and capacity for an xfs class counts only those', async (t) => {
  const xfs = { access_type: 'mount' as const, access_mode: { mode: 'SINGLE_NODE_WRITER' as const }, mount: { fs_type: 'xfs', mount_flags: [], volume_mount_group: '' } };
  const createXfs = (node: string) =>
    csi.call.CreateVolume({ name: pvName(), capacity_range: { required_bytes: 10 * MiB, limit_bytes: 0 }, volume_capabilities: [xfs], accessibility_requirements: onNode(node) });
  // A's disks are 64, 64 and 128 MiB.
  t.regex(String(await createXfs(A).catch((e: Error) => e.message)), /RESOURCE_EXHAUSTED.*at least 314572800 bytes \(a xfs filesystem cannot be made on less\).*on node csi-a/);
  const capA = await csi.call.GetCapacity({ volume_capabilities: [xfs], accessible_topology: { segments: { [CSI_TOPOLOGY_KEY]: A } } });
  t.is(capA.available_capacity, 0, 'disks too small for xfs were counted for an xfs class');
  // F has one disk large enough.
  const capF = await csi.call.GetCapacity({ volume_capabilities: [xfs], accessible_topology: { segments: { [CSI_TOPOLOGY_KEY]: F } } });
  t.is(capF.available_capacity, 320 * MiB);
  const v = (await createXfs(F)).volume as { volume_id: string; capacity_bytes: number };
  t.is(v.capacity_bytes, 320 * MiB);
  t.is(await statusOf(csi.call.CreateVolume({ name: pvName(), capacity_range: { required_bytes: 0, limit_bytes: 100 * MiB }, volume_capabilities: [xfs] })), 'OUT_OF_RANGE');
  await csi.call.DeleteVolume({ volume_id: v.volume_id });
});

test.serial(
  "a StorageClass's diskSelector makes a class of disks by their labels: a volume of the class gets, and its capacity counts, only the disks it selects; a selector or parameter the driver cannot read is INVALID_ARGUMENT",
  async (t) => {
    const [one, two] = [nodeDiskName(D, 'disk1'), nodeDiskName(D, 'disk2')];
    const label = async (name: string, tier: string | null) =>
      await admin().jsonPatch(name, [tier === null ? { op: 'remove', path: '/metadata/labels/tier' } : { op: 'add', path: '/metadata/labels/tier', value: tier }], { fieldManager: 'test' });
    const wiped = (nd: NodeDisk) => nd.spec.desired?.wipe === undefined || nd.status?.node?.wipedFor === nd.spec.desired.wipe;
    for (const name of [one, two])
      await diskWhere(name, 'free, wiped', (nd) => nd.spec.desired?.state !== 'Reserved' && wiped(nd) && nd.status?.node?.phase === 'Available' && !nd.status.node.holdsData);
    await label(one, 'slow');
    await label(two, 'fast');
    const onD = { accessible_topology: { segments: { [CSI_TOPOLOGY_KEY]: D } } };
    const cap = async (selector: string) => (await csi.call.GetCapacity({ volume_capabilities: [mountCap], parameters: { diskSelector: selector }, ...onD })).available_capacity;
    const createIn = (name: string, selector: string) =>
      csi.call.CreateVolume({
        name,
        capacity_range: { required_bytes: 10 * MiB, limit_bytes: 0 },
        volume_capabilities: [mountCap],
        parameters: { diskSelector: selector, 'csi.storage.k8s.io/pvc/name': 'data' },
        accessibility_requirements: onNode(D),
      });
    try {
      await eventually('the labels in the CSI controller', async () => (await cap('tier=fast')) === 64 * MiB);
      t.is(await cap('tier=slow'), 64 * MiB);
      t.is(await cap('tier in (fast,slow)'), 128 * MiB);
      t.is(await cap('tier=none'), 0);
      const fastName = pvName();
      const fast = (await createIn(fastName, 'tier=fast')).volume as { volume_id: string; volume_context: Record<string, string> };
      t.is(fast.volume_context.nodeDisk, two);
      t.regex(String(await createIn(pvName(), 'tier=fast').catch((e: Error) => e.message)), /RESOURCE_EXHAUSTED.*no free NodeDisk labelled tier=fast of at least 10485760 bytes/);
      t.regex(String(await createIn(fastName, 'tier=slow').catch((e: Error) => e.message)), /ALREADY_EXISTS.*diskSelector tier=slow does not select/);
      const slow = (await createIn(pvName(), 'tier!=fast')).volume as { volume_id: string; volume_context: Record<string, string> };
      t.is(slow.volume_context.nodeDisk, one);
      for (const v of [fast, slow]) await csi.call.DeleteVolume({ volume_id: v.volume_id });
      t.is(await statusOf(createIn(pvName(), 'tier in (fast')), 'INVALID_ARGUMENT');
      t.regex(String(await createIn(pvName(), 'tier in (fast').catch((e: Error) => e.message)), /StorageClass parameter diskSelector "tier in \(fast": cannot read/);
      t.is(await statusOf(csi.call.GetCapacity({ volume_capabilities: [mountCap], parameters: { diskselector: 'tier=fast' }, ...onD })), 'INVALID_ARGUMENT');
    } finally {
      await label(one, null);
      await label(two, null);
    }
  },
);

test.serial("each CSI call is timed on the driver's /metrics under the sidecars' histogram names: by full method and Go's status name", async (t) => {
  const port = Number(/"httpPort":(\d+)/.exec(csiController.logs())?.[1]);
  const count = async (method: string, code: string) => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`nodedisks_csi_operations_seconds_count{method_name="/csi.v1.Controller/${method}",grpc_status_code="${code}"}`));
    return Number(line?.split(' ')[1] ?? 0);
  };
  const before = { ok: await count('GetCapacity', 'OK'), exhausted: await count('CreateVolume', 'ResourceExhausted') };
  await csi.call.GetCapacity({ volume_capabilities: [mountCap] });
  t.is(await statusOf(create(pvName(), 1024, D)), 'RESOURCE_EXHAUSTED');
  t.is(await count('GetCapacity', 'OK'), before.ok + 1);
  t.is(await count('CreateVolume', 'ResourceExhausted'), before.exhausted + 1);
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  t.regex(text, /^# TYPE nodedisks_csi_operations_seconds histogram$/m);
  t.regex(text, /^process_resident_memory_bytes \d+/m);
});
