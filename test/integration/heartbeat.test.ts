// Agent liveness without per-disk writes (ADR 24): the agent renews one heartbeat Lease per node
// and writes status.node only when something changed; the controller's AgentStale follows the Lease.
// Real agent and controller processes, node-bound agent token, audit log of every write.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { HEARTBEAT_LABEL_VALUE, LABEL_HEARTBEAT } from '../../api/heartbeat-lease.ts';
import { nodeDiskName } from '../../api/names.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { seedDisks, startAgent, startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { reportedNodeDisk } from '../harness/reported-disks.ts';
import { heartbeatLease, nodeDisksFor, restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test, { auditWrites: true });
let work = '';
const started: Program[] = [];
const client = () => nodeDisksFor(controlPlane().admin());
const AGENT_USER = 'system:serviceaccount:node-disks-system:node-disks-agent';

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-heartbeat-'));
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of started) console.error(`----- ${p.name} -----\n${p.logs(6000)}`);
});
test.after.always(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await rm(work, { recursive: true, force: true });
});

type Conditions = { type: string; status: string; reason: string; message: string }[];
/** The Ready condition, wherever this version of the controller keeps its conditions. */
const readyOf = (nd: NodeDisk) => {
  const s = nd.status as { conditions?: Conditions; controller?: { conditions?: Conditions } } | undefined;
  return (s?.conditions ?? s?.controller?.conditions)?.find((c) => c.type === 'Ready');
};

test.serial('an agent with 200 unchanged disks writes only its heartbeat Lease, at most once per period', async (t) => {
  const cp = controlPlane();
  const node = 'node-quiet';
  const DISKS = 200;
  const diskDir = join(work, node);
  await seedDisks(diskDir, DISKS, 1024 * 1024);
  // A 2 s heartbeat and 500 ms rescans: any per-disk heartbeat or rescan write would show many times over.
  const agent = await startAgent(cp, { node, diskDir, logDir: join(work, 'logs'), heartbeat: '2s', rescanInterval: '500ms' });
  started.push(agent);
  await eventually(`${DISKS} disks Available`, async () => (await client().list({ fieldSelector: `spec.nodeName=${node},status.node.phase=Available` })).items.length === DISKS, 120_000);
  const from = new Date().toISOString();
  const WINDOW_MS = 10_000;
  await new Promise((r) => setTimeout(r, WINDOW_MS));
  const to = new Date().toISOString();
  const writes = (await cp.auditedWrites()).filter((w) => w.user.username === AGENT_USER && w.requestReceivedTimestamp >= from && w.requestReceivedTimestamp <= to);
  const byKind = writes.reduce<Record<string, number>>((m, w) => {
    const k = `${w.verb} ${w.objectRef?.resource}${w.objectRef?.subresource ? `/${w.objectRef.subresource}` : ''}`;
    m[k] = (m[k] ?? 0) + 1;
    return m;
  }, {});
  t.log(`agent writes in ${WINDOW_MS / 1000} s with ${DISKS} unchanged disks: ${JSON.stringify(byKind)}`);
  t.is(writes.filter((w) => w.objectRef?.resource === 'nodedisks').length, 0, 'no NodeDisk write while nothing changes');
  const leaseWrites = writes.filter((w) => w.objectRef?.resource === 'leases');
  t.true(leaseWrites.length >= 1, 'the heartbeat Lease is renewed');
  t.true(leaseWrites.length <= WINDOW_MS / 2000 + 1, `${leaseWrites.length} Lease writes in ${WINDOW_MS / 1000} s with a 2 s heartbeat`);
  t.true(
    leaseWrites.every((w) => w.objectRef?.namespace === 'node-disks-system' && w.objectRef?.name === `node-disks-agent-${node}` && w.responseStatus?.code === 200),
    JSON.stringify(leaseWrites.map((w) => [w.verb, w.objectRef, w.responseStatus])),
  );
  await agent.stop();
});

test.serial("a stopped agent makes the controller mark its node's disks AgentStale once its Lease expires; resumed, they are fresh again", async (t) => {
  const cp = controlPlane();
  const node = 'node-frozen';
  const DISKS = 3;
  const diskDir = join(work, node);
  await seedDisks(diskDir, DISKS, 1024 * 1024);
  const controller = await startController(cp, { logDir: join(work, 'logs') });
  started.push(controller);
  // Heartbeat every 1 s: the Lease lasts 4 s (4 heartbeats, as a kubelet's node lease).
  const agent = await startAgent(cp, { node, diskDir, logDir: join(work, 'logs'), heartbeat: '1s' });
  started.push(agent);
  const names = Array.from({ length: DISKS }, (_, i) => nodeDiskName(node, `disk${i + 1}`));
  const all = async (reason: string) => {
    const items = (await client().list({ fieldSelector: `spec.nodeName=${node}` })).items;
    return items.length === DISKS && items.every((nd) => readyOf(nd)?.reason === reason) ? items : undefined;
  };
  await eventually('every disk Ready', () => all('PhaseMatchesDesired'), 60_000);
  // What expires must exist first: the disks can be Ready before the agent's first Lease write lands.
  const lease = () => restFor(cp.admin()).request('GET', `/apis/coordination.k8s.io/v1/namespaces/node-disks-system/leases/node-disks-agent-${node}`);
  await eventually('the heartbeat Lease', async () => await lease().catch(() => undefined), 30_000);

  await agent.signal('SIGSTOP');
  const stoppedAt = Date.now();
  const stale = await eventually('every disk AgentStale', () => all('AgentStale'), 60_000, 200);
  const took = Date.now() - stoppedAt;
  t.log(`AgentStale ${took} ms after SIGSTOP (Lease 4 s)`);
  // Lease duration (4 s) + a grace for a loaded machine; the old rule (15 min without a report) never got here.
  t.true(took <= 4000 + 20_000, `stale after ${took} ms`);
  for (const nd of stale) {
    t.is(readyOf(nd)?.status, 'Unknown');
    t.regex(readyOf(nd)?.message ?? '', new RegExp(`the node agent on ${node} has not renewed its heartbeat \\(Lease node-disks-system/node-disks-agent-${node}`));
  }
  t.deepEqual(stale.map((nd) => nd.metadata.name).sort(), [...names].sort());

  await agent.signal('SIGCONT');
  await eventually('every disk Ready again', () => all('PhaseMatchesDesired'), 60_000, 200);
  t.pass();
});

test.serial("a Lease named other than node-disks-agent-<node> makes no node alive: 'zz' labelled as a heartbeat and held by a dead node's name leaves its disks AgentStale", async (t) => {
  const cp = controlPlane();
  const [dead, witness] = ['node-hb-dead', 'node-hb-witness'];
  const leases = '/apis/coordination.k8s.io/v1/namespaces/node-disks-system/leases';
  const labelled = (lease: ReturnType<typeof heartbeatLease>, renewTime: Date) => ({
    ...lease,
    metadata: { ...lease.metadata, labels: { [LABEL_HEARTBEAT]: HEARTBEAT_LABEL_VALUE } },
    spec: { ...lease.spec, leaseDurationSeconds: 40, renewTime: renewTime.toISOString().replace(/Z$/, '000Z') },
  });
  const admin = restFor(cp.admin());
  // Both nodes' own Leases, an hour old: their disks are stale.
  const hourAgo = new Date(Date.now() - 3600_000);
  await admin.request('POST', leases, { body: labelled(heartbeatLease(dead), hourAgo) });
  await admin.request('POST', leases, { body: labelled(heartbeatLease(witness), hourAgo) });
  const [deadDisk, witnessDisk] = [await reportedNodeDisk(client(), dead, 'disk1'), await reportedNodeDisk(client(), witness, 'disk1')];
  const controller = await startController(cp, { logDir: join(work, 'logs') });
  started.push(controller);
  const reason = async (name: string) => readyOf(await client().get(name))?.reason;
  await eventually('both nodes AgentStale', async () => (await reason(deadDisk)) === 'AgentStale' && (await reason(witnessDisk)) === 'AgentStale', 60_000, 200);

  // Whoever may write Leases in the namespace makes a fresh one under another name, holding the dead node.
  await admin.request('POST', leases, { body: labelled({ ...heartbeatLease(dead), metadata: { name: 'zz' } }, new Date()) });
  // The controller sees Leases in order: once the witness's renewal, written after 'zz', has made it
  // alive, 'zz' has been looked at too.
  await admin.request('PATCH', `${leases}/node-disks-agent-${witness}`, {
    body: { spec: { renewTime: new Date().toISOString().replace(/Z$/, '000Z') } },
    contentType: 'application/merge-patch+json',
  });
  await eventually('the witness Ready', async () => (await reason(witnessDisk)) === 'PhaseMatchesDesired', 60_000, 200);
  await new Promise((r) => setTimeout(r, 2000));
  t.is(await reason(deadDisk), 'AgentStale');
});
