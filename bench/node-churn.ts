// Node churn against a fleet (issue 22, ADR 35): CHURN_N reported NodeDisks (default 10,000) on
// CHURN_NODES Nodes (400), of which CHURN_CHURNED (200) are deleted and registered again under their
// names (new UIDs) ROUNDS times (5), on a real etcd + kube-apiserver, the controller running with
// --node-lifecycle on. Each round waits until the churned nodes' disks say NodeGone, registers the Nodes
// again and waits until every disk is back; then reads the controller's RSS (peak in the round, and after
// an idle second), its V8 heap, its per-node state (nodedisks_controller_tracked_nodes), its writes, and
// how many NodeDisks of the nodes that stayed changed (their resourceVersions: must be 0).
//   npm run bench:node-churn                     CHURN_N=1000 ROUNDS=3 npm run bench:node-churn
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlPlane } from '../hack/controlplane/controlplane.ts';
import { changed, counterSum, createNodes, deleteNodes, populateReportedFleet, readyReasons, trackedNodes, versionsOn } from '../hack/lib/node-churn.ts';
import { startController } from '../hack/lib/programs.ts';
import { eventually } from '../hack/lib/wait.ts';
import { adminClient, cpuSeconds, loadAverage, rssMiB, sampleRss } from './lib/fleet.ts';

const N = Number(process.env.CHURN_N ?? 10_000);
const NODE_COUNT = Number(process.env.CHURN_NODES ?? 400);
const CHURN = Number(process.env.CHURN_CHURNED ?? 200);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const TIMEOUT_MS = Number(process.env.PHASE_TIMEOUT_MINUTES ?? 30) * 60_000;
const nodes = Array.from({ length: NODE_COUNT }, (_, i) => `churn-node-${String(i).padStart(3, '0')}`);
const churned = nodes.slice(0, CHURN);
const live = new Set(nodes.slice(CHURN));
// Disks are spread round robin, so a churned node holds as many disks as any other.
const churnedDisks = Array.from({ length: N }, (_, i) => i % NODE_COUNT < CHURN).filter(Boolean).length;

interface Row {
  round: string;
  seconds: number;
  writes: number;
  liveWritten: number;
  peakMiB: number;
  idleMiB: number;
  heapMiB: number;
  tracked: Record<string, number>;
  cpu: number;
  load: string;
}

const cp = await ControlPlane.start();
const work = await mkdtemp(join(tmpdir(), 'nodedisks-churn-'));
let stop: (() => Promise<void>) | undefined;
try {
  const client = adminClient(cp);
  const rest = client.rest;
  const t0 = performance.now();
  await createNodes(rest, nodes);
  await populateReportedFleet(client, nodes, N);
  console.log(
    `${N} reported NodeDisks on ${NODE_COUNT} Nodes (made in ${((performance.now() - t0) / 1000).toFixed(1)} s), ${CHURN} Nodes (${churnedDisks} NodeDisks) churned ${ROUNDS} times; Kubernetes ${cp.binaries.kubernetesVersion}; load before: ${await loadAverage()}`,
  );
  // Reports that never age (no agents run): only the churn may make the controller write.
  const controller = await startController(cp, { logDir: join(work, 'logs'), identity: 'churn', nodeLifecycle: true, extraArgs: ['--node-gone-grace=1h', '--agent-stale-after=24h'] });
  stop = () => controller.stop();
  const port = await eventually('http port', async () => Number(/"httpPort":(\d+)/.exec(controller.logs())?.[1]) || undefined, 60_000);
  const pid = await eventually('controller pid', () => controller.programPid(), 30_000, 20);
  const metrics = async () => await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const settled = async (what: string, ok: (reasons: Record<string, number>, tracked: Record<string, number>) => boolean) =>
    await eventually(
      what,
      async () => {
        if (!controller.running) throw new Error(`the controller exited:\n${controller.logs(4000)}`);
        const m = await metrics().catch(() => '');
        return m !== '' && ok(readyReasons(m), trackedNodes(m)) ? m : undefined;
      },
      TIMEOUT_MS,
      250,
    );
  const rows: Row[] = [];
  /** Runs `step`, then reads the figures of the row: RSS peak while it ran, and after an idle second. */
  const measure = async (round: string, step: () => Promise<unknown>, liveBefore?: Map<string, string>): Promise<Map<string, string>> => {
    const writesBefore = counterSum(await metrics().catch(() => ''), 'nodedisks_controller_writes_total');
    const cpuBefore = await cpuSeconds(pid);
    const rss = sampleRss(pid, 100);
    const started = performance.now();
    await step();
    const seconds = (performance.now() - started) / 1000;
    await new Promise((r) => setTimeout(r, 1000));
    const { peakMiB } = rss.stop();
    const after = await versionsOn(client, live);
    const last = await metrics();
    rows.push({
      round,
      seconds,
      // Read after the idle second: a write's response (and its count) can come after the watch event
      // that settled the cache.
      writes: counterSum(last, 'nodedisks_controller_writes_total') - writesBefore,
      liveWritten: liveBefore ? changed(liveBefore, after).length : 0,
      peakMiB,
      idleMiB: await rssMiB(pid),
      heapMiB: counterSum(last, 'nodejs_heap_size_used_bytes') / 2 ** 20,
      tracked: trackedNodes(last),
      cpu: (await cpuSeconds(pid)) - cpuBefore,
      load: await loadAverage(),
    });
    return after;
  };
  const steady = (r: Record<string, number>, tr: Record<string, number>) => r.PhaseMatchesDesired === N && tr.node_cache === NODE_COUNT && tr.disks_by_node === NODE_COUNT && tr.gone_since === 0;

  const baseline = await measure('start (every disk reconciled)', () => settled('every disk Ready', steady));
  for (let round = 1; round <= ROUNDS; round++) {
    await measure(
      `churn ${round}`,
      async () => {
        await deleteNodes(rest, churned);
        await settled(`round ${round}: NodeGone`, (r, tr) => r.NodeGone === churnedDisks && tr.gone_since === CHURN && tr.node_cache === NODE_COUNT - CHURN);
        await createNodes(rest, churned);
        return await settled(`round ${round}: back`, steady);
      },
      baseline,
    );
  }

  const f = (x: number, d = 1) => x.toFixed(d);
  console.log(
    '| phase | time | controller writes | writes to NodeDisks of live nodes | controller CPU s | RSS peak / after 1 s idle | V8 heap used | tracked: node_cache / disks_by_node / gone_since / heartbeats | load (1/5/15 min) |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const r of rows) {
    const tr = r.tracked;
    console.log(
      `| ${r.round} | ${f(r.seconds)} s | ${r.writes} | ${r.liveWritten} | ${f(r.cpu)} | ${f(r.peakMiB, 0)} / ${f(r.idleMiB, 0)} MiB | ${f(r.heapMiB)} MiB | ${tr.node_cache} / ${tr.disks_by_node} / ${tr.gone_since} / ${tr.heartbeats ?? 0} | ${r.load} |`,
    );
  }
} finally {
  await stop?.();
  await cp.stop();
  await rm(work, { recursive: true, force: true });
}
