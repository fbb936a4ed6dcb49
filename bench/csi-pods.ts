// PVC-backed pods on the local cluster, measured: COUNTS (default 30 and 100) pods, each with its own PVC of
// StorageClass nodedisks, created at once across the three nodes; the time from the create to each pod
// Running (p50, p95, the last) and the API writes it took, beside the same number of pods with an emptyDir
// volume in the same run (csi-driver-host-path, the usual yardstick, has no module served on this
// machine). Then the memory of the agent and the CSI driver's containers as shipped. Each round is torn
// down and its disks wiped before the next. `sudo npm run bench:csi`; the figures are appended to
// bench/results/csi-pods.jsonl.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sh, sleep } from '../hack/cluster/host.ts';
import { PAUSE_IMAGE } from '../hack/cluster/images.ts';
import { clusterEnv, seedNodeUniqueDisks, startCluster, UP, waitForOutput } from '../hack/cluster/run.ts';
import { NODE_NAMES } from '../hack/cluster/topology.ts';
import { ensureBinaries } from '../hack/controlplane/binaries.ts';
import { startRecord } from './lib/results.ts';

const COUNTS = (process.env.COUNTS ?? '30,100').split(',').map(Number);
const MiB = 2 ** 20;
/** Disk images added on each node: enough for the largest round, with a spare each. */
const PER_NODE = Math.ceil(Math.max(...COUNTS) / NODE_NAMES.length) + 3;
const DISK_BYTES = 32 * MiB;
const record = startRecord('csi-pods', { counts: COUNTS.join(','), disksPerNode: PER_NODE, diskMiB: DISK_BYTES / MiB });
const { dataDir, env } = clusterEnv();
const kubectl = (await ensureBinaries()).kubectl;
const kubeconfig = join(dataDir, 'kubeconfig');
const k = (args: string[], timeoutMs = 300_000) => sh(kubectl, [`--kubeconfig=${kubeconfig}`, ...args], { timeoutMs });
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(q * xs.length) - 1)] ?? Number.NaN;

/** The API server's write requests so far, by resource (its own counter, apiserver_request_total). */
async function writes(): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const line of (await k(['get', '--raw', '/metrics'])).split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1] ?? '';
    if (!['POST', 'PUT', 'PATCH', 'DELETE', 'APPLY', 'DELETECOLLECTION'].includes(verb)) continue;
    const resource = /resource="([^"]*)"/.exec(line)?.[1] ?? '';
    const sub = /subresource="([^"]*)"/.exec(line)?.[1] ?? '';
    const key = sub ? `${resource}/${sub}` : resource;
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return out;
}

function diff(after: Map<string, number>, before: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, n] of after) {
    const d = n - (before.get(key) ?? 0);
    if (d > 0) out[key] = d;
  }
  return out;
}

/** When each pod of `ns` was first seen Running, in ms after `t0`, through one watch. */
function watchRunning(ns: string, t0: number) {
  const seen = new Map<string, number>();
  const child = spawn(kubectl, [`--kubeconfig=${kubeconfig}`, '-n', ns, 'get', 'pods', '--watch', '-o', 'jsonpath={.metadata.name} {.status.phase}{"\\n"}'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let rest = '';
  child.stdout.on('data', (b: Buffer) => {
    const lines = (rest + b.toString()).split('\n');
    rest = lines.pop() ?? '';
    for (const l of lines) {
      const [name = '', phase] = l.split(' ');
      if (phase === 'Running' && !seen.has(name)) seen.set(name, Date.now() - t0);
    }
  });
  return { seen, stop: () => child.kill() };
}

function pod(ns: string, i: number, volume: 'pvc' | 'emptyDir') {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `p${i}`, namespace: ns },
    spec: {
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'c', image: PAUSE_IMAGE, imagePullPolicy: 'Never', volumeMounts: [{ name: 'd', mountPath: '/data' }] }],
      volumes: [volume === 'pvc' ? { name: 'd', persistentVolumeClaim: { claimName: `c${i}` } } : { name: 'd', emptyDir: {} }],
    },
  };
}

const pvc = (ns: string, i: number) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name: `c${i}`, namespace: ns },
  spec: { storageClassName: 'nodedisks', accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '16Mi' } } },
});

const freeDisks = async () =>
  (await k(['get', 'nodedisks', '-o', 'jsonpath={range .items[*]}{.spec.desired.state}/{.status.node.phase}{"\\n"}{end}'])).split('\n').filter((l) => l === 'Available/Available').length;

async function waitFor(what: string, minutes: number, ok: () => Promise<boolean>): Promise<number> {
  const s = Date.now();
  for (const deadline = s + minutes * 60_000; !(await ok()); await sleep(1000)) if (Date.now() > deadline) throw new Error(`${what}: not within ${minutes} minutes`);
  return Date.now() - s;
}

interface Round {
  volume: 'pvc' | 'emptyDir';
  count: number;
  p50Ms: number;
  p95Ms: number;
  lastMs: number;
  writes: number;
  writesByResource: Record<string, number>;
  teardownS: number;
}

async function round(volume: 'pvc' | 'emptyDir', count: number): Promise<Round> {
  const ns = `bench-${volume.toLowerCase()}-${count}`;
  await k(['create', 'namespace', ns]);
  await k(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=baseline']);
  const items = [...(volume === 'pvc' ? Array.from({ length: count }, (_, i) => pvc(ns, i)) : []), ...Array.from({ length: count }, (_, i) => pod(ns, i, volume))];
  const file = join(dataDir, `${ns}.json`);
  writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  const before = await writes();
  const t0 = Date.now();
  const w = watchRunning(ns, t0);
  await k(['create', '-f', file]);
  await waitFor(`${count} pods Running in ${ns}`, 15, async () => w.seen.size >= count);
  w.stop();
  const took = diff(await writes(), before);
  const times = [...w.seen.values()];
  const s = Date.now();
  await k(['delete', 'namespace', ns, '--wait=true', '--timeout=15m'], 16 * 60_000);
  // The next round starts with every disk free again: released, wiped by its agent, reported Available.
  await waitFor('every disk free again', 15, async () => (await freeDisks()) >= PER_NODE * NODE_NAMES.length);
  const r: Round = {
    volume,
    count,
    p50Ms: quantile(times, 0.5),
    p95Ms: quantile(times, 0.95),
    lastMs: Math.max(...times),
    writes: Object.entries(took)
      .filter(([key]) => key !== 'leases')
      .reduce((sum, [, n]) => sum + n, 0),
    writesByResource: took,
    teardownS: Math.round((Date.now() - s) / 1000),
  };
  console.log(
    `${String(count).padStart(3)} pods, ${volume.padEnd(8)}: Running p50 ${(r.p50Ms / 1000).toFixed(1)} s, p95 ${(r.p95Ms / 1000).toFixed(1)} s, last ${(r.lastMs / 1000).toFixed(1)} s; ` +
      `${r.writes} API writes besides Leases (${Object.entries(took)
        .sort((a, b) => b[1] - a[1])
        .map(([key, n]) => `${key} ${n}`)
        .join(', ')}); deleted and free again in ${r.teardownS} s`,
  );
  return r;
}

/** VmRSS (MiB) of every process whose command line matches, in the cluster's node cgroups. */
function rssOf(re: RegExp): number[] {
  const out: number[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes('/ndc-')) continue;
      if (!re.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' '))) continue;
      out.push(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);
    } catch {
      // gone meanwhile
    }
  }
  return out.map((x) => Math.round(x * 10) / 10);
}
const memory = () => ({
  agent: rssOf(/node-disks-agent\.mjs/),
  csiNode: rssOf(/node-disks-csi\.mjs node/),
  csiController: rssOf(/node-disks-csi\.mjs controller/),
  csiProvisioner: rssOf(/csi-provisioner /),
});

const run = startCluster(env);
try {
  await waitForOutput(run, UP, 40 * 60_000);
  seedNodeUniqueDisks(
    dataDir,
    Array.from({ length: PER_NODE }, () => DISK_BYTES),
  );
  await waitFor(`${PER_NODE * NODE_NAMES.length} disks Available`, 10, async () => (await freeDisks()) === PER_NODE * NODE_NAMES.length);
  await sleep(20_000);
  const idle = memory();
  const rounds: Round[] = [];
  let peak = idle;
  for (const count of COUNTS) {
    rounds.push(await round('emptyDir', count));
    rounds.push(await round('pvc', count));
    if (count === Math.max(...COUNTS)) peak = memory();
  }
  console.log('| pods | volume | Running p50 | p95 | last | API writes (not Leases) |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const r of rounds)
    console.log(
      `| ${r.count} | ${r.volume === 'pvc' ? 'PVC nodedisks' : 'emptyDir'} | ${(r.p50Ms / 1000).toFixed(1)} s | ${(r.p95Ms / 1000).toFixed(1)} s | ${(r.lastMs / 1000).toFixed(1)} s | ${r.writes} |`,
    );
  const fmt = (xs: number[]) => xs.map((x) => `${x} MiB`).join(', ');
  console.log(
    `memory (VmRSS), idle with ${PER_NODE * 3} disks: agent ${fmt(idle.agent)}; csi-node ${fmt(idle.csiNode)}; csi-controller ${fmt(idle.csiController)}; csi-provisioner ${fmt(idle.csiProvisioner)}`,
  );
  console.log(`memory after the largest round: agent ${fmt(peak.agent)}; csi-node ${fmt(peak.csiNode)}; csi-controller ${fmt(peak.csiController)}; csi-provisioner ${fmt(peak.csiProvisioner)}`);
  record.save({ rounds: rounds.map((r) => ({ ...r })), memoryIdleMiB: idle, memoryAfterMiB: peak });
} finally {
  const s = Date.now();
  run.child.kill('SIGINT');
  console.log(`teardown: exit ${await run.exited} after ${((Date.now() - s) / 1000).toFixed(1)} s`);
  rmSync(dataDir, { recursive: true, force: true });
}
