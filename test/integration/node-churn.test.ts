// Node churn at small scale (ADR 35, the benchmark is bench/node-churn.ts): 20 of 40 Nodes deleted and
// registered again under their names (new UIDs) three times against 200 reported NodeDisks, the real
// controller running with the node lifecycle on. Every NodeDisk of a churned node says NodeGone while its
// Node is away and comes back; no NodeDisk of a node that stayed is written at all (same
// resourceVersion); and the controller's per-node state is back to its size after each round.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { changed, counterSum, createNodes, deleteNodes, populateReportedFleet, readyReasons, trackedNodes, versionsOn } from '../../hack/lib/node-churn.ts';
import { startController, type Program } from '../../hack/lib/programs.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const NODES = Array.from({ length: 40 }, (_, i) => `churn-n${String(i).padStart(2, '0')}`);
const CHURNED = NODES.slice(0, 20);
const LIVE = new Set(NODES.slice(20));
const DISKS = 200;
let work = '';
let controller: Program | undefined;

test.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'nodedisks-churn-'));
});
test.afterEach.always((t) => {
  if (!t.passed && controller) console.error(`----- ${controller.name} -----\n${controller.logs(8000)}`);
});
test.after.always(async () => {
  await controller?.stop();
  await rm(work, { recursive: true, force: true });
});

test('20 Nodes re-created 3 times: their disks go NodeGone and back, no disk of a live node is written, the per-node state returns to its size', async (t) => {
  const cp = controlPlane();
  const client = nodeDisksFor(cp.admin());
  const rest = client.rest;
  let uids = await createNodes(rest, NODES);
  await populateReportedFleet(client, NODES, DISKS);
  // Reports that never age (no agent runs): only the churn may make the controller write.
  controller = await startController(cp, { logDir: join(work, 'logs'), identity: 'churn', nodeLifecycle: true, extraArgs: ['--node-gone-grace=1h', '--agent-stale-after=24h'] });
  const port = await eventually('http port', async () => Number(/"httpPort":(\d+)/.exec(controller!.logs())?.[1]) || undefined);
  const metrics = async () => await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  /** Waits until the controller's cache has every disk at `reasons` and its per-node state is `tracked`. */
  const settled = async (what: string, reasons: Record<string, number>, tracked: Record<string, number>, minReconciles = 0) =>
    await eventually(
      what,
      async () => {
        const m = await metrics();
        const r = readyReasons(m);
        const n = trackedNodes(m);
        const done = counterSum(m, 'nodedisks_controller_reconcile_total') >= minReconciles;
        return done && Object.entries(reasons).every(([k, v]) => r[k] === v) && Object.entries(tracked).every(([k, v]) => n[k] === v) ? { r, n } : undefined;
      },
      60_000,
      200,
    );

  const steady = { node_cache: 40, disks_by_node: 40, gone_since: 0, heartbeats: 0, heartbeat_leases: 0 };
  await settled('every disk Ready', { PhaseMatchesDesired: DISKS }, steady);
  const before = await versionsOn(client, LIVE);
  t.is(before.size, DISKS / 2);
  const churnedDisks = DISKS / 2;

  for (let round = 1; round <= 3; round++) {
    await deleteNodes(rest, CHURNED);
    // Gone: their disks NodeGone, one gone-since entry each, the Node cache without them.
    await settled(`round ${round}: the churned disks NodeGone`, { NodeGone: churnedDisks, PhaseMatchesDesired: DISKS - churnedDisks }, { ...steady, node_cache: 20, gone_since: 20 });
    const old = uids;
    uids = await createNodes(rest, CHURNED);
    for (const n of CHURNED) t.not(uids.get(n), old.get(n), `${n} has a new UID`);
    await settled(`round ${round}: back`, { PhaseMatchesDesired: DISKS }, steady);
    t.deepEqual(changed(before, await versionsOn(client, LIVE)), [], `round ${round}: no NodeDisk of a live node written`);
  }
  // A burst: deleted and registered again at once. The controller looks at every disk of those nodes
  // again (their reconciles counted) and ends where it started.
  const reconciles = counterSum(await metrics(), 'nodedisks_controller_reconcile_total');
  await deleteNodes(rest, CHURNED);
  uids = await createNodes(rest, CHURNED);
  await settled('after a burst', { PhaseMatchesDesired: DISKS }, steady, reconciles + churnedDisks);
  t.deepEqual(changed(before, await versionsOn(client, LIVE)), [], 'after the burst: no NodeDisk of a live node written');
});
