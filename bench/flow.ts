// Measures the reservation flow on the real control plane: discovery time for many disks on one node,
// the controller's status writes for them, how soon one more disk file becomes a NodeDisk, label → marker
// latency, API writes in steady state, and the agent's and controller's memory.
// `npm run bench:flow` (DISKS=300 SAMPLES=20 STEADY_SECONDS=30 RESCAN=1s by default).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeDiskClient } from '../api/client.ts';
import { nodeDiskName } from '../api/names.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { ControlPlane } from '../hack/controlplane/controlplane.ts';
import { seedDisks, startAgent, startController, type Program } from '../hack/lib/programs.ts';
import { eventually } from '../hack/lib/wait.ts';
import { startRecord } from './lib/results.ts';
import { quantile } from './lib/samples.ts';

const DISKS = Number(process.env.DISKS ?? 300);
const SAMPLES = Number(process.env.SAMPLES ?? 20);
const STEADY_SECONDS = Number(process.env.STEADY_SECONDS ?? 30);
const RESCAN = process.env.RESCAN ?? '1s';
const node = 'bench-node';

function rssMiB(p: Program): number {
  // The program runs under lifeline.sh; its RSS is that of lifeline's node child.
  const children = readFileSync(`/proc/${p.pid}/task/${p.pid}/children`, 'utf8').trim().split(/\s+/);
  for (const c of children) {
    const status = readFileSync(`/proc/${c}/status`, 'utf8');
    if (readFileSync(`/proc/${c}/cmdline`, 'utf8').includes('main.ts')) return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]) / 1024;
  }
  return NaN;
}

/** A counter of a program's /metrics (its port is in its first log line). */
async function metric(p: Program, line: RegExp): Promise<number> {
  const port = /"httpPort":(\d+)/.exec(p.logs(Number.MAX_SAFE_INTEGER))?.[1];
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(line.exec(text)?.[1] ?? 0);
}

const record = startRecord('flow', { disks: DISKS, samples: SAMPLES, steadySeconds: STEADY_SECONDS, rescan: RESCAN });
const cp = await ControlPlane.start();
const work = await mkdtemp(join(tmpdir(), 'nodedisks-bench-'));
const programs: Program[] = [];
try {
  const diskDir = join(work, 'disks');
  await seedDisks(diskDir, DISKS, 64 * 1024 * 1024);
  const client = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig })));
  programs.push(await startController(cp, { logDir: work }));
  const t0 = performance.now();
  const agent = await startAgent(cp, { node, diskDir, logDir: work, rescanInterval: RESCAN });
  programs.push(agent);
  await eventually(`${DISKS} disks Available`, async () => (await client.list()).items.filter((i) => i.status?.node?.phase === 'Available').length === DISKS, 600_000, 1000);
  const discoverySeconds = (performance.now() - t0) / 1000;
  // Ready needs the controller's one status write per disk, after the agent's report.
  await eventually(
    `${DISKS} disks Ready`,
    async () => (await client.list()).items.filter((i) => i.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length === DISKS,
    600_000,
    1000,
  );
  const controllerStatusWrites = await metric(programs[0]!, /^nodedisks_controller_writes_total\{kind="status"\} (\d+)$/m);

  // One more disk file on a node that has DISKS: file written → NodeDisk exists, → reported Available.
  const toCreated: number[] = [];
  const toAvailable: number[] = [];
  for (let i = 1; i <= SAMPLES; i++) {
    const name = nodeDiskName(node, `late${i}`);
    const started = performance.now();
    writeFileSync(join(diskDir, `late${i}.img`), Buffer.alloc(4096));
    const nd = await eventually('new NodeDisk', async () => client.get(name).catch(() => undefined), 30_000, 2);
    toCreated.push(performance.now() - started);
    if (nd.status?.node?.phase !== 'Available') await eventually('new NodeDisk Available', async () => (await client.get(name)).status?.node?.phase === 'Available', 30_000, 2);
    toAvailable.push(performance.now() - started);
  }
  const scans = await metric(agent, /^nodedisks_agent_scan_duration_seconds_count (\d+)$/m);

  const latencies: number[] = [];
  for (let i = 1; i <= SAMPLES; i++) {
    const name = nodeDiskName(node, `disk${i}`);
    const started = performance.now();
    await cp.kubectl(cp.admin(), ['label', 'nodedisk', name, 'localtest.example.com/auto-reserve=true']);
    await eventually('marker', async () => existsSync(join(diskDir, `disk${i}.img.reserved`)), 30_000, 5);
    latencies.push(performance.now() - started);
  }
  await eventually('all reported Reserved', async () => (await client.list({ fieldSelector: 'status.node.phase=Reserved' })).items.length === SAMPLES, 60_000, 100);
  await new Promise((r) => setTimeout(r, 2000));

  const before = new Map((await client.list()).items.map((i) => [i.metadata.name, i.metadata.resourceVersion]));
  await new Promise((r) => setTimeout(r, STEADY_SECONDS * 1000));
  const changed = (await client.list()).items.filter((i) => before.get(i.metadata.name) !== i.metadata.resourceVersion).length;

  console.log(`disks: ${DISKS} on one node; Kubernetes ${cp.binaries.kubernetesVersion}`);
  console.log(`discovery: all ${DISKS} disks created and reported Available in ${discoverySeconds.toFixed(2)} s (agent start included)`);
  console.log(`controller status writes for the ${DISKS} new disks: ${controllerStatusWrites}`);
  console.log(
    `new disk file → NodeDisk created: p50 ${quantile(toCreated, 0.5).toFixed(0)} ms, p95 ${quantile(toCreated, 0.95).toFixed(0)} ms; → reported Available: p50 ${quantile(toAvailable, 0.5).toFixed(0)} ms, p95 ${quantile(toAvailable, 0.95).toFixed(0)} ms (${SAMPLES} files, ${DISKS} disks on the node, rescan ${RESCAN}, ${scans} full scans so far)`,
  );
  console.log(
    `label → marker on disk (kubectl label included): p50 ${quantile(latencies, 0.5).toFixed(0)} ms, p95 ${quantile(latencies, 0.95).toFixed(0)} ms, max ${Math.max(...latencies).toFixed(0)} ms over ${SAMPLES}`,
  );
  console.log(`steady state: ${changed} NodeDisks written in ${STEADY_SECONDS} s with a ${RESCAN} rescan (liveness: one heartbeat Lease per node, ADR 24)`);
  const rss = { agent: rssMiB(agent), controller: rssMiB(programs[0]!) };
  console.log(`memory (RSS): agent ${rss.agent.toFixed(0)} MiB, controller ${rss.controller.toFixed(0)} MiB`);
  const stats = (xs: number[]) => ({ p50: quantile(xs, 0.5), p95: quantile(xs, 0.95), max: Math.max(...xs), samples: xs.length });
  record.save({
    kubernetes: cp.binaries.kubernetesVersion,
    discoverySeconds,
    controllerStatusWrites,
    newFileToCreatedMs: stats(toCreated),
    newFileToAvailableMs: stats(toAvailable),
    // kubectl label's own run included: what a person typing it waits for.
    labelToMarkerMs: stats(latencies),
    steadyWrites: changed,
    rssMiB: rss,
  });
} finally {
  await Promise.all(programs.map((p) => p.stop()));
  await cp.stop();
  await rm(work, { recursive: true, force: true });
}
