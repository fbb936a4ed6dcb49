// The node lifecycle (ADR 35) against the real API server: the NodeDisks of a deleted Node say so at once
// (Ready False, NodeGone) and are not handed out; after the grace period the unreserved ones are deleted
// and the reserved ones stay, visibly; a Node back within the grace keeps its disks; the controller's
// token may delete only what nothing holds; and nothing is judged gone while the Nodes cannot be listed.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { FIELD_MANAGER, FINALIZER, LABEL_AUTO_RESERVE } from '../../api/constants.ts';
import { notFreeBecause } from '../../api/free-disk.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { startController, type Program } from '../../hack/lib/programs.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { getOrGone as getOrGoneIn, type ReportedDisk, reportedNodeDisk } from '../harness/reported-disks.ts';
import { denied, nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
let work = '';
const started: Program[] = [];
const admin = () => nodeDisksFor(controlPlane().admin());
const kubectl = (...args: string[]) => controlPlane().kubectl(controlPlane().admin(), args);
const GRACE = '6s';
const GRACE_MS = 6000;

test.serial.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-node-lifecycle-'));
});
test.afterEach.always((t) => {
  if (!t.passed) for (const p of started) console.error(`----- ${p.name} -----\n${p.logs(8000)}`);
});
test.after.always(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await rm(work, { recursive: true, force: true });
});

const readyOf = (nd: NodeDisk | undefined) => nd?.status?.conditions?.find((c) => c.type === 'Ready');
const acceptedOf = (nd: NodeDisk | undefined) => nd?.status?.conditions?.find((c) => c.type === 'Accepted');
const getOrGone = (name: string) => getOrGoneIn(admin(), name);
const makeDisk = (node: string, disk: string, o: ReportedDisk = {}) => reportedNodeDisk(admin(), node, disk, { seenNow: true, ...o });

test.serial("a deleted Node's disks turn NodeGone at once and are not free; after the grace the unreserved go and the reserved stay; a Node back in time keeps its disks", async (t) => {
  const cp = controlPlane();
  const [gone, back] = ['node-gone-for-good', 'node-back-soon'];
  await cp.ensureNode(gone);
  await cp.ensureNode(back);
  const free = await makeDisk(gone, 'disk1');
  const held = await makeDisk(gone, 'disk2', { desired: { state: 'Reserved', owner: 'team-db' } });
  const guarded = await makeDisk(gone, 'disk3', { finalizers: [FINALIZER] });
  const returning = await makeDisk(back, 'disk1');
  const controller = await startController(cp, { logDir: join(work, 'logs'), identity: 'lifecycle-a', nodeLifecycle: true, extraArgs: [`--node-gone-grace=${GRACE}`] });
  started.push(controller);
  t.teardown(() => controller.stop());
  const all = [free, held, guarded, returning];
  await eventually('every disk Ready while its Node exists', async () => {
    const items = await Promise.all(all.map((n) => admin().get(n)));
    return items.every((nd) => readyOf(nd)?.reason === 'PhaseMatchesDesired') ? items : undefined;
  });

  // Taken before the request: the controller can see the deletion before kubectl has exited.
  const deletedAt = Date.now();
  await kubectl('delete', 'node', gone, back);
  const marked = await eventually(
    'every disk of both nodes NodeGone',
    async () => {
      const items = await Promise.all(all.map((n) => admin().get(n)));
      return items.every((nd) => readyOf(nd)?.reason === 'NodeGone') ? items : undefined;
    },
    GRACE_MS,
    100,
  );
  t.log(`NodeGone ${Date.now() - deletedAt} ms after the Nodes were deleted`);
  const byName = new Map(marked.map((nd) => [nd.metadata.name ?? '', nd]));
  t.is(readyOf(byName.get(free))?.status, 'False');
  t.regex(readyOf(byName.get(free))?.message ?? '', /^node node-gone-for-good is gone: no Node object of that name .*; not reserved, it is deleted after the grace period of 6s, at /);
  t.regex(readyOf(byName.get(held))?.message ?? '', /^node node-gone-for-good is gone: .*; it is reserved by team-db: it stays until a person releases it/);
  t.regex(readyOf(byName.get(guarded))?.message ?? '', /finalizer localtest\.example\.com\/reservation-protection/);
  // Not offered any more (reserve --node, claims): the disk is free in every other respect.
  t.is(notFreeBecause(byName.get(free) as NodeDisk), 'is on node node-gone-for-good, which is gone (no Node object)');

  // A disk of a gone node labelled for the policy is not reserved: Accepted False says why.
  const labelled = await makeDisk(gone, 'disk4', { labels: { [LABEL_AUTO_RESERVE]: 'true' } });
  const refused = await eventually('the label refused', async () => {
    const nd = await admin().get(labelled);
    return acceptedOf(nd)?.reason === 'NodeGone' ? nd : undefined;
  });
  t.is(acceptedOf(refused)?.status, 'False');
  t.is(acceptedOf(refused)?.message, `label ${LABEL_AUTO_RESERVE}=true has no effect: its node node-gone-for-good is gone (no Node object)`);
  t.is(refused.spec.desired?.state ?? 'Available', 'Available');

  // One Node comes back (a new machine under the name, or a brief deletion) within the grace.
  await cp.ensureNode(back);
  await eventually('the returning node is Ready again', async () => readyOf(await admin().get(returning))?.reason === 'PhaseMatchesDesired');

  // The unreserved disk of the node gone for good goes once the grace has passed, and not before.
  await eventually('the unreserved disk deleted', async () => (await getOrGone(free)) === undefined, GRACE_MS + 30_000, 100);
  const took = Date.now() - deletedAt;
  t.true(took >= GRACE_MS, `deleted ${took} ms after its Node, with a grace of ${GRACE_MS} ms`);
  await eventually('the labelled unreserved disk deleted too', async () => (await getOrGone(labelled)) === undefined, GRACE_MS + 30_000, 100);
  // What holds a disk keeps it, and says so; the disk of the node that came back is untouched.
  t.is(readyOf(await admin().get(held))?.reason, 'NodeGone');
  t.is((await admin().get(held)).spec.desired?.owner, 'team-db');
  t.is(readyOf(await admin().get(guarded))?.reason, 'NodeGone');
  t.is(readyOf(await admin().get(returning))?.reason, 'PhaseMatchesDesired');
  const events = await kubectl(
    'get',
    'events.events.k8s.io',
    '-n',
    'default',
    '--field-selector',
    `regarding.name=${free}`,
    '-o',
    'jsonpath={range .items[*]}{.reason} {.action}: {.note}{"\\n"}{end}',
  );
  t.regex(events, /NodeGone Delete: node node-gone-for-good has been gone for more than 6s and the disk was not reserved: NodeDisk deleted/);
});

test.serial("the controller's token may delete only a NodeDisk nothing holds: not a reservation, not one with the agent's finalizer", async (t) => {
  const cp = controlPlane();
  const asController = nodeDisksFor(await cp.controller());
  const node = 'node-delete-policy';
  const free = (await admin().create(newNodeDisk(node, 'disk1'), { fieldManager: FIELD_MANAGER.agent })).metadata.name ?? '';
  const reservedBody = newNodeDisk(node, 'disk2');
  reservedBody.spec.desired = { state: 'Reserved', owner: 'team-db' };
  const reserved = (await admin().create(reservedBody, { fieldManager: FIELD_MANAGER.plugin })).metadata.name ?? '';
  const autoBody = newNodeDisk(node, 'disk3');
  autoBody.spec.desired = { state: 'Reserved', owner: 'auto' };
  const auto = (await admin().create(autoBody, { fieldManager: FIELD_MANAGER.controller })).metadata.name ?? '';
  const guardedBody = newNodeDisk(node, 'disk4');
  guardedBody.metadata.finalizers = [FINALIZER];
  const guarded = (await admin().create(guardedBody, { fieldManager: FIELD_MANAGER.agent })).metadata.name ?? '';

  const r1 = await denied(t, asController.delete(reserved));
  t.is(r1.statusCode, 403);
  t.regex(
    r1.message,
    /the controller may delete only a NodeDisk nothing holds \(of a node that is gone\): node-disk-node-delete-policy-disk2 is reserved by team-db; a reservation is released by people only/,
  );
  t.regex((await denied(t, asController.delete(auto))).message, /is reserved by auto/);
  t.regex((await denied(t, asController.delete(guarded))).message, /has the node agent's finalizer localtest\.example\.com\/reservation-protection/);
  await asController.delete(free);
  t.is(await getOrGone(free), undefined);
  t.truthy(await admin().get(reserved));
  t.truthy(await admin().get(guarded));
  await admin().jsonPatch(guarded, [{ op: 'remove', path: '/metadata/finalizers' }], { fieldManager: 'test' });
});

test.serial('no node is judged gone while the Nodes cannot be listed: the controller says why it is not ready, and judges once it can', async (t) => {
  const cp = controlPlane();
  const name = await makeDisk('node-never-registered', 'disk1');
  // Take the Nodes away from the controller's role: its list is refused (403).
  const role = JSON.parse(await kubectl('get', 'clusterrole', 'node-disks-operator', '-o', 'json')) as { rules: { resources?: string[] }[] };
  const nodesRule = role.rules.findIndex((r) => r.resources?.includes('nodes'));
  t.true(nodesRule >= 0, 'the controller may list Nodes');
  await kubectl('patch', 'clusterrole', 'node-disks-operator', '--type=json', '-p', JSON.stringify([{ op: 'remove', path: `/rules/${nodesRule}` }]));
  const controller = await startController(cp, { logDir: join(work, 'logs'), identity: 'lifecycle-b', nodeLifecycle: true, extraArgs: [`--node-gone-grace=${GRACE}`] });
  started.push(controller);
  t.teardown(() => controller.stop());
  try {
    const port = await eventually('http port', async () => Number(/"httpPort":(\d+)/.exec(controller.logs())?.[1]) || undefined);
    const unready = await eventually('not ready: the Nodes are refused', async () => {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
      const body = res ? await res.text() : '';
      return res?.status === 503 && /Nodes not synced: .*forbidden/.test(body) ? body : undefined;
    });
    t.log(unready);
    // The controller has tried and failed to list: by now a judgement without the Nodes would have shown.
    t.not(readyOf(await admin().get(name))?.reason, 'NodeGone');
  } finally {
    await kubectl('patch', 'clusterrole', 'node-disks-operator', '--type=json', '-p', JSON.stringify([{ op: 'add', path: `/rules/${nodesRule}`, value: role.rules[nodesRule] }]));
  }
  await eventually('NodeGone once the Nodes can be listed', async () => readyOf(await admin().get(name))?.reason === 'NodeGone', 60_000);
  t.pass();
});
