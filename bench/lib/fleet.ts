// Helpers shared by the scale benchmarks (ADR 23): a fleet of NodeDisks spread over many nodes, and the
// API server's own view of the run (its request counts from /metrics, the CPU time of kube-apiserver and
// etcd from /proc), so a figure of ours can be read next to what it cost the control plane.
import { readFile, writeFile } from 'node:fs/promises';
import { API_VERSION, FIELD_MANAGER, KIND, LABEL_AUTO_RESERVE, LABEL_DISK, LABEL_NODE, AUTO_RESERVE_VALUE } from '../../api/constants.ts';
import { diskPath, nodeDiskName } from '../../api/names.ts';
import { NodeDiskClient } from '../../api/client.ts';
import { loadKubeConfig } from '../../lib/kube/kubeconfig.ts';
import { readBody, RestClient } from '../../lib/kube/rest.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import type { ControlPlane } from '../../hack/controlplane/controlplane.ts';

export interface FleetOptions {
  /** How many NodeDisks in all. */
  size: number;
  /** Spread round robin over this many nodes (bench-node-000 …). */
  nodes?: number;
  /** Every `labelEvery`-th NodeDisk carries auto-reserve=true (10: 10 %); 0 for none. */
  labelEvery?: number;
  /** Creates in flight at once. */
  concurrency?: number;
  /** Index to start from (to top up a fleet already created up to `from`). */
  from?: number;
}

export const nodeOf = (i: number, nodes = 200) => `bench-node-${String(i % nodes).padStart(3, '0')}`;

/** An admin client of the control plane (keep-alive, no client-side limit). */
export function adminClient(cp: ControlPlane): NodeDiskClient {
  return new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig })));
}

/**
 * Creates NodeDisks `from`..`size-1` as the agent would (its field manager), round robin over the nodes,
 * every `labelEvery`-th labelled auto-reserve=true. Returns the seconds it took.
 */
export async function populateFleet(client: NodeDiskClient, o: FleetOptions): Promise<number> {
  const nodes = o.nodes ?? 200;
  const labelEvery = o.labelEvery ?? 10;
  const started = performance.now();
  let next = o.from ?? 0;
  await Promise.all(
    Array.from({ length: o.concurrency ?? 32 }, async () => {
      for (let i = next++; i < o.size; i = next++) {
        const nd = newNodeDisk(nodeOf(i, nodes), `disk${i}`);
        if (labelEvery > 0 && i % labelEvery === 0) nd.metadata.labels = { ...nd.metadata.labels, [LABEL_AUTO_RESERVE]: AUTO_RESERVE_VALUE };
        await client.create(nd, { fieldManager: FIELD_MANAGER.agent });
      }
    }),
  );
  return (performance.now() - started) / 1000;
}

/**
 * NodeDisks `from`..`to - 1` as the plugin benches list them: created and reported Available by the
 * agent's field manager (disk i on node i mod 200), `concurrency` requests in flight.
 */
export async function populateReported(client: NodeDiskClient, from: number, to: number, concurrency = 32): Promise<void> {
  let next = from;
  const worker = async () => {
    for (let i = next++; i < to; i = next++) {
      const node = nodeOf(i);
      const disk = `disk${Math.floor(i / 200)}`;
      const name = nodeDiskName(node, disk);
      await client.create(
        {
          apiVersion: API_VERSION,
          kind: KIND,
          metadata: { name, labels: { [LABEL_NODE]: node, [LABEL_DISK]: disk } },
          spec: { nodeName: node, diskID: disk, path: diskPath('/var/lib/node-disks-manager/disks', disk) },
        },
        { fieldManager: FIELD_MANAGER.agent },
      );
      await client.applyStatus(
        {
          apiVersion: API_VERSION,
          kind: KIND,
          metadata: { name },
          status: { node: { phase: 'Available', capacityBytes: 67108864, lastSeenTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') } },
        },
        { fieldManager: FIELD_MANAGER.agent },
      );
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** The API server's /metrics text, read as admin. */
export async function apiserverMetricsText(cp: ControlPlane): Promise<string> {
  const rest = new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig }));
  try {
    return await readBody(await rest.open('GET', '/metrics', { accept: 'text/plain' }));
  } finally {
    rest.close();
  }
}

/**
 * A CPU profile of kube-apiserver over the next `seconds` (its /debug/pprof, on by default), written to
 * `file` for `go tool pprof`: where the API server's share of a phase goes.
 */
export async function apiserverCpuProfile(cp: ControlPlane, seconds: number, file: string): Promise<void> {
  const rest = new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig }));
  try {
    const res = await rest.open('GET', '/debug/pprof/profile', { query: { seconds: String(seconds) }, accept: 'application/octet-stream' });
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    await writeFile(file, Buffer.concat(chunks));
  } finally {
    rest.close();
  }
}

/** apiserver_request_total summed by verb, for one resource (nodedisks, events, leases …) or all. */
export async function apiserverRequests(cp: ControlPlane, resource?: string): Promise<Map<string, number>> {
  const text = await apiserverMetricsText(cp);
  const byVerb = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels = line.slice(line.indexOf('{') + 1, line.lastIndexOf('}'));
    const get = (k: string) => new RegExp(`(?:^|,)${k}="([^"]*)"`).exec(labels)?.[1];
    if (resource !== undefined && get('resource') !== resource) continue;
    const verb = get('verb') ?? '?';
    byVerb.set(verb, (byVerb.get(verb) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return byVerb;
}

/** The difference of two request counts by verb (after - before), verbs with 0 left out. */
export function requestDelta(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [verb, n] of after) {
    const d = n - (before.get(verb) ?? 0);
    if (d > 0) out.set(verb, d);
  }
  return out;
}

export const formatRequests = (m: Map<string, number>) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .map(([verb, n]) => `${verb} ${n}`)
    .join(', ') || 'none';

const CLOCK_TICKS = 100; // USER_HZ on Linux

/** User + system CPU seconds a process has used, from /proc/<pid>/stat. */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS; // utime, stime (fields 14 and 15)
}

/** Resident set size of a process in MiB (VmRSS), NaN when it is gone. */
export async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

/** The peak RSS (VmHWM) of a process in MiB. */
export async function peakRssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

/** The child of a lifeline.sh wrapper (how the harness starts every server) whose command line has `match`. */
export async function childPid(wrapperPid: number | undefined, match: string): Promise<number> {
  if (wrapperPid === undefined) throw new Error(`no process for ${match}`);
  const children = (await readFile(`/proc/${wrapperPid}/task/${wrapperPid}/children`, 'utf8')).trim().split(/\s+/).filter(Boolean);
  for (const c of children) {
    if ((await readFile(`/proc/${c}/cmdline`, 'utf8').catch(() => '')).includes(match)) return Number(c);
  }
  throw new Error(`no child of ${wrapperPid} runs ${match}`);
}

/** The kube-apiserver and etcd processes of a harness control plane. */
export async function controlPlanePids(cp: ControlPlane): Promise<{ apiserver: number; etcd: number }> {
  return { apiserver: await childPid(cp.apiserver.pid, 'kube-apiserver'), etcd: await childPid(cp.etcd.pid, 'etcd') };
}

/** CPU seconds of the control plane's processes, to difference around a phase. */
export async function controlPlaneCpu(cp: ControlPlane): Promise<{ apiserver: number; etcd: number }> {
  const pids = await controlPlanePids(cp);
  return { apiserver: await cpuSeconds(pids.apiserver), etcd: await cpuSeconds(pids.etcd) };
}

/** Samples a process's RSS every `everyMs` until stopped; returns the peak seen and the last sample. */
export function sampleRss(pid: number, everyMs = 200): { stop(): { peakMiB: number; lastMiB: number } } {
  let peak = 0;
  let last = NaN;
  const timer = setInterval(() => {
    void rssMiB(pid).then((m) => {
      if (!Number.isNaN(m)) {
        last = m;
        peak = Math.max(peak, m);
      }
    });
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      return { peakMiB: peak, lastMiB: last };
    },
  };
}

/** The machine's load averages, to print next to figures measured on a shared machine. */
export async function loadAverage(): Promise<string> {
  return (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
}
