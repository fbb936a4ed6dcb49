// The floor of a reservation, measured on the same control plane as the reservation itself (issue 24):
//   - a merge PATCH round trip (P): what each of the chain's writes costs at least;
//   - a write's watch delivery (W): from a PATCH sent to its event arriving on an open watch, so one write
//     and one watch hop;
//   - the chain: the auto-reserve label PATCHed (our client, not kubectl: no process start in it) → the
//     controller sees it and writes spec.desired → the agent sees that and writes its finalizer → the
//     marker file exists.
// The chain is three writes and two watch hops, so its floor is 2·W + P (the label's write and the
// controller's write each with their hop, then the agent's write). Printed: p50/p95 of each, the floor,
// and the chain's ratio to it at p50, and p95/p50 of the chain.
//   npm run bench:reservation-floor       DISKS=2000 SAMPLES=50 npm run bench:reservation-floor
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeDiskClient } from '../api/client.ts';
import { LABEL_AUTO_RESERVE } from '../api/constants.ts';
import { nodeDiskName } from '../api/names.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import { ControlPlane } from '../hack/controlplane/controlplane.ts';
import { newNodeDisk } from '../hack/lib/nodedisks.ts';
import { seedDisks, startAgent, startController, type Program } from '../hack/lib/programs.ts';
import { eventually } from '../hack/lib/wait.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { startRecord } from './lib/results.ts';
import { quantile } from './lib/samples.ts';

const DISKS = Number(process.env.DISKS ?? 30);
const SAMPLES = Math.min(Number(process.env.SAMPLES ?? 20), DISKS);
const node = 'floor-node';
const FIELD_MANAGER = { fieldManager: 'bench-floor' };

const row = (what: string, xs: number[]) => `| ${what} | ${quantile(xs, 0.5).toFixed(1)} ms | ${quantile(xs, 0.95).toFixed(1)} ms | ${xs.length} |`;
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

const record = startRecord('reservation-floor', { disks: DISKS, samples: SAMPLES });
const cp = await ControlPlane.start();
const work = await mkdtemp(join(tmpdir(), 'nodedisks-floor-'));
const programs: Program[] = [];
const stop = new AbortController();
try {
  const client = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig }), { timeoutMs: 30_000 }));
  const diskDir = join(work, 'disks');
  await seedDisks(diskDir, DISKS, 1024 * 1024);
  programs.push(await startController(cp, { logDir: work }));
  programs.push(await startAgent(cp, { node, diskDir, logDir: work }));
  await eventually(
    `${DISKS} disks Ready`,
    async () => (await client.list({ fieldSelector: `spec.nodeName=${node}` })).items.filter((i) => i.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length === DISKS,
    600_000,
    500,
  );
  const loadBefore = load();

  // P and W on a NodeDisk of a node with no agent (the controller looks at it; nobody else writes it).
  const probe = nodeDiskName('floor-probe', 'disk1');
  await client.create(newNodeDisk('floor-probe', 'disk1'), FIELD_MANAGER);
  const seen = new Map<string, number>();
  const watching = (async () => {
    for await (const ev of client.watch({ fieldSelector: `metadata.name=${probe}`, timeoutSeconds: 3600 }, stop.signal)) {
      if (ev.type === 'ERROR') continue;
      const mark = (ev.object as NodeDisk).metadata.annotations?.['bench/mark'];
      if (mark && !seen.has(mark)) seen.set(mark, performance.now());
    }
  })().catch(() => {});
  await new Promise((r) => setTimeout(r, 500)); // the watch is open
  const patches: number[] = [];
  const deliveries: number[] = [];
  for (let i = 0; i < SAMPLES * 2; i++) {
    const mark = String(i);
    const sent = performance.now();
    await client.mergePatch(probe, { metadata: { annotations: { 'bench/mark': mark } } }, FIELD_MANAGER);
    patches.push(performance.now() - sent);
    const at = await eventually('watch event', async () => seen.get(mark), 10_000, 1);
    deliveries.push(at - sent);
    await new Promise((r) => setTimeout(r, 50)); // let the controller's reconcile of it pass
  }

  // The chain, one disk at a time.
  const chain: number[] = [];
  for (let i = 1; i <= SAMPLES; i++) {
    const name = nodeDiskName(node, `disk${i}`);
    const marker = join(diskDir, `disk${i}.img.reserved`);
    const sent = performance.now();
    await client.mergePatch(name, { metadata: { labels: { [LABEL_AUTO_RESERVE]: 'true' } } }, FIELD_MANAGER);
    await eventually('marker', async () => existsSync(marker), 30_000, 1);
    chain.push(performance.now() - sent);
    await new Promise((r) => setTimeout(r, 100));
  }

  const p50 = { P: quantile(patches, 0.5), W: quantile(deliveries, 0.5), chain: quantile(chain, 0.5) };
  const floor = 2 * p50.W + p50.P;
  console.log(`reservation floor: ${DISKS} disks on one node, ${SAMPLES} reservations, Kubernetes ${cp.binaries.kubernetesVersion}; load before ${loadBefore}, after ${load()}`);
  console.log('| what | p50 | p95 | samples |');
  console.log('| --- | --- | --- | --- |');
  console.log(row('merge PATCH round trip (P)', patches));
  console.log(row('PATCH sent → its watch event (W: a write and a hop)', deliveries));
  console.log(row('label PATCH → marker (controller write, agent write)', chain));
  console.log(
    `floor 2·W + P at p50: ${floor.toFixed(1)} ms; chain p50 / floor: ${(p50.chain / floor).toFixed(2)} (goal ≤ 2); chain p95 / p50: ${(quantile(chain, 0.95) / p50.chain).toFixed(2)} (goal ≤ 3)`,
  );
  const stats = (xs: number[]) => ({ p50: quantile(xs, 0.5), p95: quantile(xs, 0.95), samples: xs.length });
  record.save({
    kubernetes: cp.binaries.kubernetesVersion,
    patchMs: stats(patches),
    watchDeliveryMs: stats(deliveries),
    chainMs: stats(chain),
    floorMs: floor,
    chainOverFloor: p50.chain / floor,
    chainP95OverP50: quantile(chain, 0.95) / p50.chain,
  });
  stop.abort();
  await watching;
} finally {
  stop.abort();
  await Promise.all(programs.map((p) => p.stop()));
  await cp.stop();
  await rm(work, { recursive: true, force: true });
}
