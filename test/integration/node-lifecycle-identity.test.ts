// A node name reused by another machine (ADR 35), with real agent and controller processes: the Node is
// deleted and registered again (another UID), a new machine's agent starts with a token bound to it and a
// disk dir of its own. It inherits no reservation: the old reserved NodeDisk keeps its report and its
// reservation, gets no marker on the new machine's disk, and says NodeReplaced; the unreserved one is
// reported afresh as the new machine's. The API server refuses the new agent's taking over the reserved
// one; once a person releases it the new machine's agent lets it go and reports its own disk. The heartbeat
// Lease is owned by its Node.
import { access, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { API_VERSION, FIELD_MANAGER, FINALIZER, KIND } from '../../api/constants.ts';
import { notFreeBecause } from '../../api/free-disk.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { denied, nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
let work = '';
const started: Program[] = [];
const admin = () => nodeDisksFor(controlPlane().admin());
const kubectl = (...args: string[]) => controlPlane().kubectl(controlPlane().admin(), args);

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-node-identity-'));
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of started) console.error(`----- ${p.name} -----\n${p.logs(8000)}`);
});
test.after.always(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await rm(work, { recursive: true, force: true });
});

const readyOf = (nd: NodeDisk | undefined) => nd?.status?.conditions?.find((c) => c.type === 'Ready');
const exists = (file: string) =>
  access(file).then(
    () => true,
    () => false,
  );
const nodeUID = async (node: string) => JSON.parse(await kubectl('get', 'node', node, '-o', 'json')).metadata.uid as string;
const desire = (name: string, desired: NodeDisk['spec']['desired']) =>
  admin().apply({ apiVersion: API_VERSION, kind: KIND, metadata: { name }, spec: { desired } }, { fieldManager: FIELD_MANAGER.plugin, force: true });

test.serial(
  'a machine registered again under the same name inherits no reservation: no old marker on its disk, NodeReplaced, its own disks reported afresh; released, the old one is let go',
  async (t) => {
    const cp = controlPlane();
    const node = 'node-reused';
    const logDir = join(work, 'logs');
    const controller = await startController(cp, { logDir, identity: 'identity-ctl', nodeLifecycle: true });
    started.push(controller);
    t.teardown(() => controller.stop());

    // The first machine: two disks, the second reserved by team-db (marker on that machine's disk).
    const firstDir = join(work, 'machine-1');
    await seedDisks(firstDir, 2, 1 << 20);
    const first = await startAgent(cp, { node, diskDir: firstDir, logDir, name: 'agent-machine-1', heartbeat: '1s' });
    started.push(first);
    const [free, held] = [nodeDiskName(node, 'disk1'), nodeDiskName(node, 'disk2')];
    const uid1 = await nodeUID(node);
    await eventually('both disks reported by the first machine', async () => {
      const items = await Promise.all(
        [free, held].map((n) =>
          admin()
            .get(n)
            .catch(() => undefined),
        ),
      );
      return items.every((nd) => nd?.status?.node?.phase === 'Available' && nd.status.node.nodeUID === uid1);
    });
    await desire(held, { state: 'Reserved', owner: 'team-db' });
    await eventually('reserved on the first machine', async () => (await admin().get(held)).status?.node?.phase === 'Reserved');
    t.true(await exists(join(firstDir, 'disk2.img.reserved')));
    // The heartbeat Lease is owned by its Node, so it goes with it.
    const leasePath = `/apis/coordination.k8s.io/v1/namespaces/node-disks-system/leases/node-disks-agent-${node}`;
    const lease = await eventually('the heartbeat Lease owned by the Node', async () => {
      const l = await restFor(cp.admin())
        .request<{ metadata: { ownerReferences?: { kind: string; name: string; uid: string }[] } }>('GET', leasePath)
        .catch(() => undefined);
      return l?.metadata.ownerReferences?.length ? l : undefined;
    });
    t.deepEqual(lease.metadata.ownerReferences, [{ apiVersion: 'v1', kind: 'Node', name: node, uid: uid1 }]);
    await first.stop();

    // The machine is replaced: its Node deleted and registered again, a new disk dir with no marker.
    await kubectl('delete', 'node', node);
    const secondDir = join(work, 'machine-2');
    await seedDisks(secondDir, 2, 2 << 20);
    const identity = await cp.agentOfMachine(node, 'machine-2');
    const uid2 = await nodeUID(node);
    t.not(uid2, uid1);
    const second = await startAgent(cp, { node, diskDir: secondDir, logDir, identity, name: 'agent-machine-2', heartbeat: '1s' });
    started.push(second);
    t.teardown(() => second.stop());

    // The reserved NodeDisk is the first machine's: the new agent says so and writes nothing of it.
    await eventually('the new agent leaves the reserved NodeDisk alone, and says why', async () => /is reserved by team-db on another machine named node-reused/.test(second.logs()), 60_000);
    t.false(await exists(join(secondDir, 'disk2.img.reserved')), "the old reservation's marker is not written on the new machine's disk");
    const adopted = await eventually('the unreserved disk reported afresh by the new machine', async () => {
      const nd = await admin().get(free);
      return nd.status?.node?.nodeUID === uid2 && nd.status.node.capacityBytes === 2 << 20 && readyOf(nd)?.reason === 'PhaseMatchesDesired' ? nd : undefined;
    });
    t.is(notFreeBecause(adopted), undefined, "the new machine's own disk is free");
    const replaced = await eventually('the reserved one NodeReplaced', async () => {
      const nd = await admin().get(held);
      return readyOf(nd)?.reason === 'NodeReplaced' ? nd : undefined;
    });
    t.is(readyOf(replaced)?.status, 'False');
    t.regex(
      readyOf(replaced)?.message ?? '',
      new RegExp(
        `^node node-reused is another machine now \\(Node UID ${uid2}\\); this disk was found on the one before \\(Node UID ${uid1}\\); it is reserved by team-db: it stays until a person releases it`,
      ),
    );
    t.is(replaced.status?.node?.nodeUID, uid1, 'its report is still the first machine');
    t.is(replaced.spec.desired?.owner, 'team-db');
    t.is(notFreeBecause(replaced), 'is reserved by team-db');

    // The API server holds the new machine's agent to it: no taking over the reservation, no other UID.
    const asSecond = nodeDisksFor(identity);
    const report = (uid: string) =>
      asSecond.applyStatus(
        { apiVersion: API_VERSION, kind: KIND, metadata: { name: held }, status: { node: { phase: 'Reserved', capacityBytes: 2 << 20, nodeUID: uid } } },
        { fieldManager: FIELD_MANAGER.agent },
      );
    t.regex((await denied(t, report(uid2))).message, /is reserved on another machine named node-reused \(Node UID [-0-9a-f]+\): a machine registered again under that name does not inherit it/);
    t.regex(
      (
        await denied(
          t,
          asSecond.applyStatus(
            { apiVersion: API_VERSION, kind: KIND, metadata: { name: free }, status: { node: { phase: 'Available', capacityBytes: 2 << 20, nodeUID: uid1 } } },
            { fieldManager: FIELD_MANAGER.agent },
          ),
        )
      ).message,
      /status\.node\.nodeUID must be the UID of the Node the agent token is bound to/,
    );
    const lease2 = await eventually('the Lease owned by the new Node', async () => {
      const l = await restFor(cp.admin()).request<{ metadata: { ownerReferences?: { uid: string }[] } }>('GET', leasePath);
      return l.metadata.ownerReferences?.[0]?.uid === uid2 ? l : undefined;
    });
    t.is(lease2.metadata.ownerReferences?.length, 1);

    // A person releases the first machine's reservation: the new agent lets its finalizer go (the marker it
    // guarded was on the first machine) and reports this machine's disk, with no marker written or needed.
    await desire(held, { state: 'Available' });
    const released = await eventually(
      "the released disk is the new machine's",
      async () => {
        const nd = await admin().get(held);
        return nd.status?.node?.nodeUID === uid2 && nd.status.node.phase === 'Available' && !(nd.metadata.finalizers ?? []).includes(FINALIZER) ? nd : undefined;
      },
      60_000,
    );
    t.is(released.status?.node?.capacityBytes, 2 << 20);
    t.false(await exists(join(secondDir, 'disk2.img.reserved')));
    t.true(await exists(join(firstDir, 'disk2.img.reserved')), "the first machine's disk is not this agent's to touch");
  },
);
